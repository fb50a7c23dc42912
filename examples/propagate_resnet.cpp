// Plans the formats of a ResNet-50-like network for fp32 and bf16 and prints why.
//
// The image comes in NCHW and the logits leave as a plain matrix; in between each layer gets the
// format that minimizes the network's total cost under memfmt's default priors (measured NHWC/NCHW
// ratios, see README), with conversions only where they pay. Where a conversion costs the same in
// several places, batch norms and activations keep their conv's format and the conversion sits right
// before the next layer that needs the other one, so conv + bn + relu stay fusable.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/verify.hpp"

using namespace memfmt::graph;

namespace {

node_id conv_bn(network& net, const std::string& name, node_id in, conv_attrs a, bool relu) {
  node_id h = net.batch_norm(name + ".bn", net.conv(name + ".conv", in, a));
  return relu ? net.pointwise(name + ".relu", h) : h;
}

network resnet50(memfmt::dtype type) {
  network net;
  node_id h = net.input("image", {16, 3, 224, 224}, type, family::channels_first);
  h = net.pool("maxpool", conv_bn(net, "stem", h, {64, 7, 2, 3}, true), {3, 2, 1});
  const std::int64_t widths[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage)
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      const std::int64_t mid = widths[stage], stride = (b == 0 && stage > 0) ? 2 : 1;
      node_id y = conv_bn(net, name + ".a", h, {mid, 1}, true);
      y = conv_bn(net, name + ".b", y, {mid, 3, stride, 1}, true);
      y = conv_bn(net, name + ".c", y, {4 * mid, 1}, false);
      const node_id shortcut = b == 0 ? conv_bn(net, name + ".down", h, {4 * mid, 1, stride}, false) : h;
      h = net.pointwise(name + ".relu", net.add(name + ".add", y, shortcut));
    }
  h = net.flatten("flatten", net.global_pool("avgpool", h));
  net.output("logits", net.linear("fc", h, 1000), family::channels_first);
  return net;
}

}  // namespace

int main() {
  const cost_model model;
  for (memfmt::dtype type : {memfmt::dtype::float32, memfmt::dtype::bfloat16}) {
    const network net = resnet50(type);
    const plan p = solve(net, model);
    std::printf("=== ResNet-50, %s ===\n%s\n", std::string(memfmt::to_string(type)).c_str(),
                explain(net, model, p).c_str());
    const std::vector<std::string> issues = verify(net, model, p);
    for (const auto& issue : issues) std::fprintf(stderr, "verify: %s\n", issue.c_str());
    if (!issues.empty()) return 1;
  }
  return 0;
}
