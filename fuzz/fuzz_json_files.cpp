// Fuzz target: the readers of memfmt's own JSON files (io/): network, plan, priors and timing
// cache. The first input byte picks the reader, the rest is the file. Properties, besides "no
// crash, no sanitizer report, only memfmt::error": what a reader accepts, written and read back,
// writes the same text again (the writer's text is a fixed point of the round trip); a network it
// accepts is one the planner can plan, and that plan passes verify(); a plan it accepts passes
// verify() against the network it was loaded for.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/verify.hpp"
#include "memfmt/io/network_json.hpp"
#include "memfmt/io/plan_json.hpp"
#include "memfmt/io/priors_json.hpp"
#include "memfmt/io/timing_cache_json.hpp"

namespace {

using namespace memfmt;
using memfmt_fuzz::accepted;
using memfmt_fuzz::must;
using memfmt_fuzz::require;

// Networks beyond this many nodes are read but not planned: solve() is linear, verify() is not
// needed at that size to find reader bugs, and each input should take milliseconds.
constexpr std::size_t max_planned_nodes = 400;

void require_sound(const graph::network& net, const graph::cost_model& model, const graph::plan& p, const char* what) {
  const auto bad = graph::verify(net, model, p);
  require(bad.empty(), std::string(what) + " fails verify(): " + (bad.empty() ? "" : bad.front()));
}

// The network plans are read against (the plan seeds were written for it: its fingerprint).
const graph::network& plan_network() {
  static const graph::network net = [] {
    graph::models::options o;
    o.resolution = 32;
    o.width = 0.125;
    o.classes = 10;
    return graph::models::resnet18(o);
  }();
  return net;
}

void network_file(std::string_view text) {
  const auto net = accepted([&] { return io::load_network(text); });
  if (!net) return;
  const std::string saved = must("writing a network read from a file", [&] { return io::save_network(*net); });
  const std::string again = must("reading a written network back", [&] { return io::save_network(io::load_network(saved)); });
  require(again == saved, "a network's round trip is not a fixed point");
  if (net->size() > max_planned_nodes) return;
  const graph::cost_model model;
  // A network no format assignment satisfies (conflicting mandatory pins) is refused by name.
  const auto p = accepted([&] { return graph::solve(*net, model); });
  if (p) require_sound(*net, model, *p, "the solved plan of a network read from a file");
}

void plan_file(std::string_view text) {
  const graph::network& net = plan_network();
  const graph::cost_model model;
  const auto loaded = accepted([&] { return io::load_plan(text, net, model); });
  if (!loaded) return;
  require_sound(net, model, loaded->plan, "a plan read from a file");
  const std::string saved = must("writing a plan read from a file", [&] { return io::save_plan(net, model, loaded->plan, loaded->policy); });
  const std::string again = must("reading a written plan back", [&] {
    const io::loaded_plan back = io::load_plan(saved, net, model);
    return io::save_plan(net, model, back.plan, back.policy);
  });
  require(again == saved, "a plan's round trip is not a fixed point");
}

void priors_file(std::string_view text) {
  const auto p = accepted([&] { return io::load_priors(text); });
  if (!p) return;
  const std::string saved = must("writing priors read from a file", [&] { return io::save_priors(*p, "fuzz"); });
  const std::string again = must("reading written priors back", [&] { return io::save_priors(io::load_priors(saved), "fuzz"); });
  require(again == saved, "a priors table's round trip is not a fixed point");
}

void timing_cache_file(std::string_view text) {
  const auto cache = accepted([&] { return io::load_timing_cache(text); });
  if (!cache) return;
  const std::string saved = must("writing a timing cache read from a file", [&] { return io::save_timing_cache(*cache); });
  const std::string again = must("reading a written timing cache back", [&] { return io::save_timing_cache(io::load_timing_cache(saved)); });
  require(again == saved, "a timing cache's round trip is not a fixed point");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0: network_file(text); break;
    case 1: plan_file(text); break;
    case 2: priors_file(text); break;
    default: timing_cache_file(text); break;
  }
  return 0;
}
