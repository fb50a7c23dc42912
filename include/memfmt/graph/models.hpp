// memfmt/graph/models.hpp - whole networks as torchvision builds them, for plans, runs and benchmarks.
//
// Logical N, C, H, W (N, C, D, H, W for the 3-D model), stems with max pooling, classifiers, and
// node names equal to the state_dict prefixes of the PyTorch module ("layer1.0.conv1",
// "features.3.conv.1.0", "fc"), so network::parameters() names every tensor as
// model.state_dict() does and weights exported from PyTorch map by name. Layers without parameters
// that PyTorch does not name (torch.flatten, functional pooling, residual adds, the relus a block
// reuses) get descriptive names. options scale batch, resolution and channel width, so tests can
// run the same structure small; width 1 and 1000 classes are torchvision's models exactly.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../error.hpp"
#include "network.hpp"

namespace memfmt::graph::models {

struct options {
  std::int64_t batch = 1;
  std::int64_t resolution = 224;  // input H = W
  std::int64_t frames = 16;       // input D of the 3-D model
  double width = 1.0;             // multiplies every layer's channels (1: torchvision's model)
  std::int64_t classes = 0;       // 0: the model's own (1000; the UNet 2; r3d_18 400)
  memfmt::dtype type = memfmt::dtype::float32;
  format_family input_format = format_family::channels_first;
  format_family output_format = format_family::channels_first;
};

namespace detail {

inline void require(bool ok, const char* model, const std::string& what) {
  if (!ok) memfmt::detail::fail(errc::invalid_argument, std::string(model) + ": " + what);
}

inline void check(const options& o, const char* model) {
  require(o.batch > 0 && o.resolution > 0 && o.frames > 0 && o.classes >= 0, model,
          "batch " + std::to_string(o.batch) + ", resolution " + std::to_string(o.resolution) + ", frames " +
              std::to_string(o.frames) + " must be positive, classes " + std::to_string(o.classes) + " >= 0");
  require(o.width > 0 && std::isfinite(o.width) && o.width <= 64, model,
          "width " + std::to_string(o.width) + " must be in (0, 64]");
}

// Channels c at the chosen width (at least 1).
inline std::int64_t scaled(const options& o, std::int64_t c) {
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(c) * o.width));
}

// torchvision's _make_divisible: the nearest multiple of 8, never more than 10 % below v.
inline std::int64_t make_divisible(double v, std::int64_t divisor = 8) {
  std::int64_t r = std::max<std::int64_t>(
      divisor, static_cast<std::int64_t>(v + static_cast<double>(divisor) / 2) / divisor * divisor);
  if (static_cast<double>(r) < 0.9 * v) r += divisor;
  return r;
}

// conv -> batch norm [-> activation], named as given (the activation only when `act` is set).
inline node_id conv_bn(network& net, node_id in, const std::string& conv_name, const conv_attrs& a,
                       const std::string& bn_name, const std::string& act_name = {},
                       memfmt::activation act = memfmt::activation::relu) {
  node_id h = net.batch_norm(bn_name, net.conv(conv_name, in, a));
  return act_name.empty() ? h : net.activation(act_name, h, act);
}

inline node_id classifier_input(network& net, node_id h) {
  return net.flatten("flatten", net.global_pool("avgpool", h));
}

// torchvision.models.resnet: BasicBlock (expansion 1) or Bottleneck (expansion 4, stride on the 3x3).
struct resnet_shape {
  bool bottleneck;
  std::array<int, 4> blocks;
  std::int64_t groups = 1;
  std::int64_t width_per_group = 64;
};

inline network resnet(const options& o, const resnet_shape& shape, const char* model) {
  check(o, model);
  network net;
  node_id h = net.input("input", {o.batch, 3, o.resolution, o.resolution}, o.type, o.input_format);
  std::int64_t inplanes = scaled(o, 64);
  h = conv_bn(net, h, "conv1", conv_spec(inplanes, 7, 2, 3), "bn1", "relu");
  h = net.max_pool("maxpool", h, 3, 2, 1);
  const std::int64_t expansion = shape.bottleneck ? 4 : 1;
  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t planes = scaled(o, std::int64_t{64} << stage);
    for (int b = 0; b < shape.blocks[static_cast<std::size_t>(stage)]; ++b) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(b) + ".";
      const std::int64_t stride = (b == 0 && stage > 0) ? 2 : 1, out = planes * expansion;
      node_id y = h;
      if (shape.bottleneck) {
        const std::int64_t width = static_cast<std::int64_t>(static_cast<double>(planes) *
                                                             (static_cast<double>(shape.width_per_group) / 64.0)) *
                                   shape.groups;
        y = conv_bn(net, y, p + "conv1", conv_spec(width, 1), p + "bn1", p + "relu1");
        y = conv_bn(net, y, p + "conv2", conv_spec(width, 3, stride, 1, shape.groups), p + "bn2", p + "relu2");
        y = conv_bn(net, y, p + "conv3", conv_spec(out, 1), p + "bn3");
      } else {
        y = conv_bn(net, y, p + "conv1", conv_spec(out, 3, stride, 1), p + "bn1", p + "relu1");
        y = conv_bn(net, y, p + "conv2", conv_spec(out, 3, 1, 1), p + "bn2");
      }
      const node_id shortcut = stride != 1 || inplanes != out
                                   ? conv_bn(net, h, p + "downsample.0", conv_spec(out, 1, stride), p + "downsample.1")
                                   : h;
      h = net.relu(p + (shape.bottleneck ? "relu3" : "relu2"), net.add(p + "add", y, shortcut));
      inplanes = out;
    }
  }
  h = net.linear("fc", classifier_input(net, h), o.classes ? o.classes : 1000);
  net.output("output", h, o.output_format);
  return net;
}

// DoubleConv of the UNet: (conv 3x3, batch norm, relu) twice, named "<prefix>.0" .. "<prefix>.5".
inline node_id double_conv(network& net, node_id in, const std::string& prefix, std::int64_t out) {
  node_id h = conv_bn(net, in, prefix + ".0", conv_spec(out, 3, 1, 1), prefix + ".1", prefix + ".2");
  return conv_bn(net, h, prefix + ".3", conv_spec(out, 3, 1, 1), prefix + ".4", prefix + ".5");
}

}  // namespace detail

// torchvision.models.resnet18: BasicBlocks (2, 2, 2, 2); 11,689,512 parameters at width 1.
inline network resnet18(const options& o = {}) { return detail::resnet(o, {false, {2, 2, 2, 2}}, "resnet18"); }

// torchvision.models.resnet50 (v1.5: the stride on the 3x3); 25,557,032 parameters at width 1.
inline network resnet50(const options& o = {}) { return detail::resnet(o, {true, {3, 4, 6, 3}}, "resnet50"); }

// torchvision.models.resnext50_32x4d: 32 groups of 4 channels per 64 planes; 25,028,904 parameters.
inline network resnext50_32x4d(const options& o = {}) {
  return detail::resnet(o, {true, {3, 4, 6, 3}, 32, 4}, "resnext50_32x4d");
}

// torchvision.models.mobilenet_v2 (width_mult = options::width): inverted residuals with depthwise
// 3x3 convs and relu6; 3,504,872 parameters at width 1.
inline network mobilenet_v2(const options& o = {}) {
  detail::check(o, "mobilenet_v2");
  using detail::conv_bn;
  const memfmt::activation relu6 = memfmt::activation::relu6;
  network net;
  node_id h = net.input("input", {o.batch, 3, o.resolution, o.resolution}, o.type, o.input_format);
  std::int64_t channels = detail::make_divisible(32 * o.width);
  const std::int64_t last = detail::make_divisible(1280 * std::max(1.0, o.width));
  h = conv_bn(net, h, "features.0.0", conv_spec(channels, 3, 2, 1), "features.0.1", "features.0.2", relu6);
  struct stage {
    std::int64_t expand, out, repeat, stride;
  };
  const stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int index = 1;
  for (const stage& s : stages) {
    const std::int64_t out = detail::make_divisible(static_cast<double>(s.out) * o.width);
    for (std::int64_t r = 0; r < s.repeat; ++r, ++index) {
      const std::string p = "features." + std::to_string(index) + ".conv.";
      const std::int64_t stride = r == 0 ? s.stride : 1, hidden = channels * s.expand;
      node_id y = h;
      int j = 0;
      if (s.expand != 1) {
        const std::string q = p + std::to_string(j++) + ".";
        y = conv_bn(net, y, q + "0", conv_spec(hidden, 1), q + "1", q + "2", relu6);
      }
      const std::string q = p + std::to_string(j) + ".";
      y = conv_bn(net, y, q + "0", conv_spec(hidden, 3, stride, 1, hidden), q + "1", q + "2", relu6);
      y = conv_bn(net, y, p + std::to_string(j + 1), conv_spec(out, 1), p + std::to_string(j + 2));
      h = stride == 1 && channels == out ? net.add("features." + std::to_string(index) + ".add", y, h) : y;
      channels = out;
    }
  }
  const std::string p = "features." + std::to_string(index) + ".";
  h = conv_bn(net, h, p + "0", conv_spec(last, 1), p + "1", p + "2", relu6);
  h = net.dropout("classifier.0", detail::classifier_input(net, h), 0.2);
  h = net.linear("classifier.1", h, o.classes ? o.classes : 1000);
  net.output("output", h, o.output_format);
  return net;
}

// torchvision.models.shufflenet_v2_x1_0: a 3x3/2 stem and max pooling, three stages of 4, 8 and 4
// units (116, 232 and 464 channels), a 1x1 conv to 1024, the spatial mean and a linear;
// 2,278,604 parameters at width 1. A unit of stride 1 splits its input in halves along C, runs
// one half through 1x1, depthwise 3x3 and 1x1 convs and concatenates them; a unit of stride 2 runs
// both halves' branches on the whole input; each ends with a channel shuffle of 2 groups.
inline network shufflenet_v2_x1_0(const options& o = {}) {
  detail::check(o, "shufflenet_v2_x1_0");
  const auto even = [&](std::int64_t c) { return std::max<std::int64_t>(2, detail::scaled(o, c) / 2 * 2); };
  network net;
  node_id h = net.input("input", {o.batch, 3, o.resolution, o.resolution}, o.type, o.input_format);
  std::int64_t channels = detail::scaled(o, 24);
  h = detail::conv_bn(net, h, "conv1.0", conv_spec(channels, 3, 2, 1), "conv1.1", "conv1.2");
  h = net.max_pool("maxpool", h, 3, 2, 1);
  const std::int64_t stage_out[] = {116, 232, 464}, repeats[] = {4, 8, 4};
  for (int st = 0; st < 3; ++st) {
    const std::int64_t out = even(stage_out[st]), half = out / 2;
    for (std::int64_t r = 0; r < repeats[st]; ++r) {
      const std::string p = "stage" + std::to_string(st + 2) + "." + std::to_string(r) + ".";
      const std::int64_t stride = r == 0 ? 2 : 1;
      node_id kept = h, branch_in = h;
      if (stride == 2) {
        const std::string q = p + "branch1.";
        kept = net.batch_norm(q + "1", net.conv(q + "0", h, conv_spec(channels, 3, 2, 1, channels)));
        kept = detail::conv_bn(net, kept, q + "2", conv_spec(half, 1), q + "3", q + "4");
      } else {
        const auto halves = net.split(p + "split", h, {channels / 2, channels - channels / 2});
        kept = halves[0];
        branch_in = halves[1];
      }
      const std::string q = p + "branch2.";
      node_id y = detail::conv_bn(net, branch_in, q + "0", conv_spec(half, 1), q + "1", q + "2");
      y = net.batch_norm(q + "4", net.conv(q + "3", y, conv_spec(half, 3, stride, 1, half)));
      y = detail::conv_bn(net, y, q + "5", conv_spec(half, 1), q + "6", q + "7");
      h = net.channel_shuffle(p + "shuffle", net.concat(p + "cat", {kept, y}), 2);
      channels = out;
    }
  }
  h = detail::conv_bn(net, h, "conv5.0", conv_spec(detail::scaled(o, 1024), 1), "conv5.1", "conv5.2");
  h = net.linear("fc", detail::classifier_input(net, h), o.classes ? o.classes : 1000);
  net.output("output", h, o.output_format);
  return net;
}

// torchvision.models.convnext_tiny: a 4x4/4 patchify stem and layer norm, four stages of 3, 3, 9 and
// 3 blocks (96, 192, 384 and 768 channels) with a layer norm and a 2x2/2 conv between stages, then
// the spatial mean, a layer norm and a linear; 28,589,128 parameters at width 1. A block is a
// depthwise 7x7 conv, layer norm over C, a 4x expansion and projection with GELU between (nn.Linear
// on the permuted tensor in PyTorch: here 1x1 convs, "block.3" and "block.5", whose weights are
// the linears' with two trailing 1s), a per-channel layer scale and the residual add. The layer
// norms are over C at each position (eps 1e-6), which channels-last keeps contiguous.
inline network convnext_tiny(const options& o = {}) {
  detail::check(o, "convnext_tiny");
  constexpr double eps = 1e-6;
  network net;
  node_id h = net.input("input", {o.batch, 3, o.resolution, o.resolution}, o.type, o.input_format);
  const std::int64_t widths[] = {96, 192, 384, 768}, depths[] = {3, 3, 9, 3};
  std::int64_t channels = detail::scaled(o, widths[0]);
  h = net.layer_norm("features.0.1", net.conv("features.0.0", h, conv_spec(channels, 4, 4, 0, 1, true)), eps);
  for (int st = 0; st < 4; ++st) {
    const std::string stage = "features." + std::to_string(2 * st + 1) + ".";
    if (st > 0) {
      const std::string down = "features." + std::to_string(2 * st) + ".";
      channels = detail::scaled(o, widths[st]);
      h = net.conv(down + "1", net.layer_norm(down + "0", h, eps), conv_spec(channels, 2, 2, 0, 1, true));
    }
    for (std::int64_t b = 0; b < depths[st]; ++b) {
      const std::string p = stage + std::to_string(b) + ".";
      node_id y = net.conv(p + "block.0", h, conv_spec(channels, 7, 1, 3, channels, true));
      y = net.layer_norm(p + "block.2", y, eps);
      y = net.activation(p + "block.4", net.conv(p + "block.3", y, conv_spec(4 * channels, 1, 1, 0, 1, true)),
                         memfmt::activation::gelu);
      y = net.conv(p + "block.5", y, conv_spec(channels, 1, 1, 0, 1, true));
      y = net.mul(p + "mul", net.constant(p + "layer_scale", {1, channels, 1, 1}, o.type, true), y);
      h = net.add(p + "add", y, h);
    }
  }
  h = net.layer_norm("classifier.0", net.global_pool("avgpool", h), eps);
  h = net.linear("classifier.2", net.flatten("classifier.1", h), o.classes ? o.classes : 1000);
  net.output("output", h, o.output_format);
  return net;
}

// torchvision.models.vgg16_bn: 13 conv (with bias) + batch norm + relu, five max pools, the
// adaptive average pool to 7x7 and three linears; 138,365,992 parameters at width 1. The
// resolution must make the last feature map divide 7 or be a multiple of it, where the adaptive
// pool is a nearest upsample or a plain average pool (224: 7x7, no pool at all).
inline network vgg16_bn(const options& o = {}) {
  detail::check(o, "vgg16_bn");
  const std::int64_t final_extent = o.resolution / 32;
  detail::require(o.resolution % 32 == 0 && (7 % final_extent == 0 || final_extent % 7 == 0), "vgg16_bn",
                  "resolution " + std::to_string(o.resolution) +
                      " must be a multiple of 32 whose 32nd part divides 7 or is a multiple of 7 (32, 224, 448, ...)");
  network net;
  node_id h = net.input("input", {o.batch, 3, o.resolution, o.resolution}, o.type, o.input_format);
  const std::int64_t config[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
  int index = 0;
  std::int64_t channels = 3;
  for (std::int64_t c : config) {
    const std::string p = "features.";
    if (c == 0) {
      h = net.max_pool(p + std::to_string(index++), h, 2, 2);
      continue;
    }
    channels = detail::scaled(o, c);
    h = detail::conv_bn(net, h, p + std::to_string(index), conv_spec(channels, 3, 1, 1, 1, true),
                        p + std::to_string(index + 1), p + std::to_string(index + 2));
    index += 3;
  }
  if (final_extent < 7) h = net.upsample("avgpool", h, 7 / final_extent);
  if (final_extent > 7) h = net.avg_pool("avgpool", h, final_extent / 7, final_extent / 7);
  const std::int64_t hidden = detail::scaled(o, 4096);
  h = net.flatten("flatten", h);
  h = net.dropout("classifier.2", net.relu("classifier.1", net.linear("classifier.0", h, hidden)));
  h = net.dropout("classifier.5", net.relu("classifier.4", net.linear("classifier.3", h, hidden)));
  h = net.linear("classifier.6", h, o.classes ? o.classes : 1000);
  net.output("output", h, o.output_format);
  return net;
}

// The UNet of Ronneberger et al. as the common PyTorch implementation (milesial/Pytorch-UNet,
// bilinear = false) names it: DoubleConv blocks, max pooling down, ConvTranspose2d 2x2/2 up,
// concatenation [skip, upsampled] along C, a 1x1 conv with bias to the classes. The resolution
// must be a multiple of 16 (no padding of odd maps). 31,037,698 parameters at width 1 and 2 classes.
inline network unet(const options& o = {}) {
  detail::check(o, "unet");
  detail::require(o.resolution % 16 == 0, "unet",
                  "resolution " + std::to_string(o.resolution) + " must be a multiple of 16");
  network net;
  node_id h = net.input("input", {o.batch, 3, o.resolution, o.resolution}, o.type, o.input_format);
  std::int64_t widths[5];
  for (int i = 0; i < 5; ++i) widths[i] = detail::scaled(o, std::int64_t{64} << i);
  node_id skips[5];
  skips[0] = h = detail::double_conv(net, h, "inc.double_conv", widths[0]);
  for (int i = 1; i < 5; ++i) {
    const std::string p = "down" + std::to_string(i) + ".maxpool_conv.";
    h = net.max_pool(p + "0", h, 2, 2);
    skips[i] = h = detail::double_conv(net, h, p + "1.double_conv", widths[i]);
  }
  for (int i = 1; i < 5; ++i) {
    const std::string p = "up" + std::to_string(i) + ".";
    h = net.conv_transpose(p + "up", h, conv_transpose_spec(widths[4 - i], 2, 2, 0, 0, 1, true));
    h = net.concat(p + "cat", {skips[4 - i], h});
    h = detail::double_conv(net, h, p + "conv.double_conv", widths[4 - i]);
  }
  h = net.conv("outc.conv", h, conv_spec(o.classes ? o.classes : 2, 1, 1, 0, 1, true));
  net.output("output", h, o.output_format);
  return net;
}

// torchvision.models.video.r3d_18: a 3-D ResNet-18 on [N, 3, frames, resolution, resolution]; the
// stem is a (3, 7, 7) conv with stride (1, 2, 2) and no max pool, every later conv 3x3x3;
// 33,371,472 parameters at width 1 and 400 classes.
inline network r3d_18(const options& o = {}) {
  detail::check(o, "r3d_18");
  using detail::conv_bn;
  network net;
  node_id h = net.input("input", {o.batch, 3, o.frames, o.resolution, o.resolution}, o.type, o.input_format);
  std::int64_t inplanes = detail::scaled(o, 64);
  conv_attrs stem = conv_spec(inplanes, 7, 1, 3);
  stem.kernel = {3, 7, 7};
  stem.params.stride = {1, 2, 2};
  stem.params.padding = {1, 3, 3};
  h = conv_bn(net, h, "stem.0", stem, "stem.1", "stem.2");
  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t planes = detail::scaled(o, std::int64_t{64} << stage);
    for (int b = 0; b < 2; ++b) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(b) + ".";
      const std::int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
      node_id y = conv_bn(net, h, p + "conv1.0", conv_spec(planes, 3, stride, 1), p + "conv1.1", p + "conv1.2");
      y = conv_bn(net, y, p + "conv2.0", conv_spec(planes, 3, 1, 1), p + "conv2.1");
      const node_id shortcut =
          stride != 1 || inplanes != planes
              ? conv_bn(net, h, p + "downsample.0", conv_spec(planes, 1, stride), p + "downsample.1")
              : h;
      h = net.relu(p + "relu", net.add(p + "add", y, shortcut));
      inplanes = planes;
    }
  }
  h = net.linear("fc", detail::classifier_input(net, h), o.classes ? o.classes : 400);
  net.output("output", h, o.output_format);
  return net;
}

// A synthetic planner workload: `blocks` bottleneck-like residual blocks in a row (conv 1x1, bn,
// relu, conv 3x3, bn, relu, conv 1x1, bn, add, relu: 10 layers each) between an input and an output,
// 10 * blocks + 2 nodes. The 1x1 and 3x3 convs prefer different formats under the fp32 priors, so
// the plan has real choices; the extents stay small, so any length fits in the cost arithmetic.
inline network bottleneck_chain(std::size_t blocks, const options& o = {}) {
  detail::check(o, "bottleneck_chain");
  using detail::conv_bn;
  network net;
  const std::int64_t wide = detail::scaled(o, 64), narrow = detail::scaled(o, 16);
  node_id h = net.input("input", {o.batch, wide, o.resolution, o.resolution}, o.type, o.input_format);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::string p = "block" + std::to_string(b) + ".";
    node_id y = conv_bn(net, h, p + "conv1", conv_spec(narrow, 1), p + "bn1", p + "relu1");
    y = conv_bn(net, y, p + "conv2", conv_spec(narrow, 3, 1, 1), p + "bn2", p + "relu2");
    y = conv_bn(net, y, p + "conv3", conv_spec(wide, 1), p + "bn3");
    h = net.relu(p + "relu3", net.add(p + "add", y, h));
  }
  net.output("output", h, o.output_format);
  return net;
}

}  // namespace memfmt::graph::models
