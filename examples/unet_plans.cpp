// The UNet of the models header planned two ways: as PyTorch 1.13 eager runs it after
// model.to(channels_last) (ConvTranspose2d returns contiguous output, so each decoder stage
// converts back and forth: the "channel thrashing" the Composer and fastai documentation warn
// about), and as graph::solve places the conversions. Prints the policies side by side and, given a
// folder, writes one Graphviz DOT file per plan there (`dot -Tpng unet_optimal.dot -o ...`).
//   unet_plans [FOLDER]
#include <cstdio>
#include <fstream>
#include <string>

#include "memfmt/graph/models.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/graph/report.hpp"

using namespace memfmt::graph;

int main(int argc, char** argv) {
  models::options o;
  o.batch = 8;
  o.resolution = 256;
  const network net = models::unet(o);
  const cost_model costs;
  const auto rows = compare_policies(net, costs);
  std::fputs(compare_text(net, rows).c_str(), stdout);

  const plan eager = plan_with(net, costs, policy::pytorch_eager);
  const plan best = plan_with(net, costs, policy::optimal);
  if (argc > 1) {
    for (const auto& [name, p] : {std::pair<const char*, const plan*>{"pytorch_eager", &eager}, {"optimal", &best}}) {
      const std::string path = std::string(argv[1]) + "/unet_" + name + ".dot";
      std::ofstream f(path);
      f << to_dot(net, *p, std::string("UNet, ") + name);
      if (!f) {
        std::fprintf(stderr, "unet_plans: cannot write %s\n", path.c_str());
        return 1;
      }
      std::printf("written: %s\n", path.c_str());
    }
  }
  // The point of the picture: the eager plan thrashes, the solved one does not, and costs less.
  const bool ok = eager.copies() > best.copies() && best.total() <= eager.total();
  if (!ok) std::fputs("unet_plans: expected the eager plan to convert more than the solved one\n", stderr);
  return ok ? 0 : 1;
}
