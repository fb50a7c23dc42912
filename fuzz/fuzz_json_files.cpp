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

// What a reader accepted, written (`saved`), read back and written again, is the same text: the
// writer's text is a fixed point of the round trip.
template <class Load, class Save>
void require_fixed_point(const std::string& saved, Load&& load, Save&& save, const std::string& what) {
  const std::string again = must(("reading " + what + " back").c_str(), [&] { return save(load(saved)); });
  require(again == saved, what + ": the round trip is not a fixed point");
}

// What `load` accepts from `text`, after requiring that `save` writes it as a fixed point of the
// round trip; nullopt when `load` refuses it.
template <class Load, class Save>
auto read_and_round_trip(std::string_view text, Load&& load, Save&& save, const std::string& what) {
  auto loaded = accepted([&] { return load(text); });
  if (loaded) {
    const std::string saved = must(("writing " + what + " read from a file").c_str(), [&] { return save(*loaded); });
    require_fixed_point(saved, load, save, what + ", written");
  }
  return loaded;
}

void network_file(std::string_view text) {
  const auto net = read_and_round_trip(
      text, [](std::string_view t) { return io::load_network(t); },
      [](const graph::network& n) { return io::save_network(n); }, "a network");
  if (!net || net->size() > max_planned_nodes) return;
  const graph::cost_model model;
  // A network no format assignment satisfies (conflicting mandatory pins) is refused by name.
  const auto p = accepted([&] { return graph::solve(*net, model); });
  if (p) require_sound(*net, model, *p, "the solved plan of a network read from a file");
}

void plan_file(std::string_view text) {
  const graph::network& net = plan_network();
  const graph::cost_model model;
  const auto loaded = read_and_round_trip(
      text, [&](std::string_view t) { return io::load_plan(t, net, model); },
      [&](const io::loaded_plan& p) { return io::save_plan(net, model, p.plan, p.policy); }, "a plan");
  if (loaded) require_sound(net, model, loaded->plan, "a plan read from a file");
}

void priors_file(std::string_view text) {
  read_and_round_trip(
      text, [](std::string_view t) { return io::load_priors(t); },
      [](const graph::cost_priors& p) { return io::save_priors(p, "fuzz"); }, "priors");
}

void timing_cache_file(std::string_view text) {
  read_and_round_trip(
      text, [](std::string_view t) { return io::load_timing_cache(t); },
      [](const graph::timing_cache& c) { return io::save_timing_cache(c); }, "a timing cache");
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
