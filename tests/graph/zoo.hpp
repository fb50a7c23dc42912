// Test networks: ResNet-50, MobileNetV2 and UNet-like graphs, plus a greedy local pusher to compare with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/graph/plan.hpp"

namespace zoo {

using namespace memfmt::graph;

// Priors with batch norm indifferent to the format (its default NCHW penalty off), for tests of
// the tie rules, where memory-bound layers must be free to inherit.
inline cost_priors indifferent_batch_norm() {
  cost_priors p;
  p.batch_norm_channels_last_speedup_fp32 = p.batch_norm_channels_last_speedup_low_precision = 1.0;
  return p;
}

inline node_id conv_bn_relu(network& net, const std::string& name, node_id in, conv_attrs a, bool relu = true) {
  node_id h = net.batch_norm(name + ".bn", net.conv(name + ".conv", in, a));
  return relu ? net.pointwise(name + ".relu", h) : h;
}

inline network resnet50(memfmt::dtype type, std::int64_t batch = 16) {
  network net;
  node_id h = net.input("image", {batch, 3, 224, 224}, type, family::channels_first);
  h = conv_bn_relu(net, "stem", h, {64, 7, 2, 3});
  h = net.pool("maxpool", h, {3, 2, 1});
  const std::int64_t mids[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  for (int s = 0; s < 4; ++s)
    for (int b = 0; b < blocks[s]; ++b) {
      const std::string name = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
      const std::int64_t mid = mids[s], out = 4 * mid, stride = (b == 0 && s > 0) ? 2 : 1;
      node_id y = conv_bn_relu(net, name + ".a", h, {mid, 1});
      y = conv_bn_relu(net, name + ".b", y, {mid, 3, stride, 1});
      y = conv_bn_relu(net, name + ".c", y, {out, 1}, false);
      const node_id shortcut = b == 0 ? conv_bn_relu(net, name + ".down", h, {out, 1, stride}, false) : h;
      h = net.pointwise(name + ".relu", net.add(name + ".add", y, shortcut));
    }
  h = net.flatten("flatten", net.global_pool("avgpool", h));
  net.output("logits", net.linear("fc", h, 1000), family::channels_first);
  return net;
}

inline network mobilenet_v2(memfmt::dtype type, std::int64_t batch = 16) {
  network net;
  node_id h = net.input("image", {batch, 3, 224, 224}, type, family::channels_first);
  h = conv_bn_relu(net, "stem", h, {32, 3, 2, 1});
  struct stage { std::int64_t expand, out, repeat, stride; };
  const stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  std::int64_t channels = 32;
  int index = 0;
  for (const stage& s : stages)
    for (std::int64_t r = 0; r < s.repeat; ++r, ++index) {
      const std::string name = "block" + std::to_string(index);
      const std::int64_t hidden = channels * s.expand, stride = r == 0 ? s.stride : 1;
      node_id y = s.expand == 1 ? h : conv_bn_relu(net, name + ".expand", h, {hidden, 1});
      y = conv_bn_relu(net, name + ".dw", y, {hidden, 3, stride, 1, hidden});
      y = conv_bn_relu(net, name + ".project", y, {s.out, 1}, false);
      h = stride == 1 && channels == s.out ? net.add(name + ".add", y, h) : y;
      channels = s.out;
    }
  h = conv_bn_relu(net, "head", h, {1280, 1});
  h = net.flatten("flatten", net.global_pool("avgpool", h));
  net.output("logits", net.linear("classifier", h, 1000), family::channels_first);
  return net;
}

inline network unet(memfmt::dtype type, std::int64_t batch = 4) {
  network net;
  node_id h = net.input("image", {batch, 3, 256, 256}, type, family::channels_first);
  const std::int64_t widths[] = {64, 128, 256, 512, 1024};
  std::vector<node_id> skips;
  for (int level = 0; level < 5; ++level) {
    const std::string name = "down" + std::to_string(level);
    if (level > 0) h = net.pool(name + ".pool", h, {2, 2});
    h = conv_bn_relu(net, name + ".1", h, {widths[level], 3, 1, 1});
    h = conv_bn_relu(net, name + ".2", h, {widths[level], 3, 1, 1});
    skips.push_back(h);
  }
  for (int level = 3; level >= 0; --level) {
    const std::string name = "up" + std::to_string(level);
    h = net.conv(name + ".reduce", net.upsample(name + ".upsample", h, 2), {widths[level], 1});
    h = net.concat(name + ".concat", {skips[static_cast<std::size_t>(level)], h});
    h = conv_bn_relu(net, name + ".1", h, {widths[level], 3, 1, 1});
    h = conv_bn_relu(net, name + ".2", h, {widths[level], 3, 1, 1});
  }
  net.output("mask", net.conv("classes", h, {2, 1}), family::channels_first);
  return net;
}

// An ORT-style greedy pusher: start from the naive per-layer choice and flip one layer at a time, in
// id order, whenever that strictly lowers the total; stop when no single flip helps.
inline plan greedy_plan(const network& net, const cost_model& model, const plan& start) {
  std::vector<std::optional<family>> formats;
  for (const auto& d : start.nodes) formats.push_back(d.format);
  cost_t best = start.total();
  for (bool improved = true; improved;) {
    improved = false;
    for (node_id id = 0; id < net.size(); ++id) {
      if (!formats[id] || !model.allowed(net, id, other(*formats[id]))) continue;
      formats[id] = other(*formats[id]);
      const cost_t t = make_plan(net, model, formats).total();
      if (t < best) {
        best = t;
        improved = true;
      } else {
        formats[id] = other(*formats[id]);
      }
    }
  }
  return make_plan(net, model, formats);
}

}  // namespace zoo
