// Plans the formats of torchvision's ResNet-50 (from the models header) for fp32 and bf16 and
// prints why.
//
// The image comes in NCHW and the logits leave as a plain matrix; in between each layer gets the
// format that minimizes the network's total cost under memfmt's default priors (NHWC/NCHW ratios of
// bench_conv's cases), with conversions only where they pay. Where a conversion costs the same in
// several places, batch norms and activations keep their conv's format and the conversion sits right
// before the next layer that needs the other one, so conv + bn + relu stay fusable.
#include <cstdio>
#include <string>
#include <vector>

#include "memfmt/graph/explain.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/verify.hpp"

using namespace memfmt::graph;

int main() {
  const cost_model model;
  for (memfmt::dtype type : {memfmt::dtype::float32, memfmt::dtype::bfloat16}) {
    models::options o;
    o.batch = 16;
    o.type = type;
    const network net = models::resnet50(o);
    const plan p = solve(net, model);
    std::printf("=== ResNet-50, %s ===\n%s\n", std::string(memfmt::to_string(type)).c_str(),
                explain(net, model, p).c_str());
    const std::vector<std::string> issues = verify(net, model, p);
    for (const auto& issue : issues) std::fprintf(stderr, "verify: %s\n", issue.c_str());
    if (!issues.empty()) return 1;
  }
  return 0;
}
