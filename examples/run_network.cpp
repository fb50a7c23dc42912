// Runs a planned network: ResNet-18 of the models header (small), its formats planned by
// graph::solve with the backend's capability query, random parameters, one forward pass on the
// oneDNN backend when built with it (else the reference backend), and the executor's report.
#include <cstdio>
#include <random>
#include <vector>

#include <memfmt/graph/models.hpp>
#include <memfmt/graph/solve.hpp>
#include <memfmt/runtime/backend_support.hpp>
#include <memfmt/runtime/executor.hpp>
#include <memfmt/runtime/random_parameters.hpp>
#if MEMFMT_EXAMPLE_ONEDNN
#include <memfmt/backends/onednn/backend.hpp>
using backend_t = memfmt::onednn::backend;
#else
#include <memfmt/backends/reference/backend.hpp>
using backend_t = memfmt::reference::backend;
#endif

int main() {
  using namespace memfmt;
  graph::models::options o;
  o.batch = 2;
  o.resolution = 64;
  o.width = 0.25;
  o.classes = 10;
  const graph::network net = graph::models::resnet18(o);

  backend_t backend;  // must outlive the executor
  graph::cost_model costs;
  costs.set_support_query(runtime::support_query_for(backend));  // formats the backend cannot run are excluded
  const graph::plan plan = graph::solve(net, costs);

  runtime::executor<backend_t> run(net, plan, backend, runtime::random_parameters(net, 1));
  std::vector<float> x(static_cast<std::size_t>(2 * 3 * 64 * 64)), y(2 * 10);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& v : x) v = d(rng);
  run.forward({{"input", runtime::tensor_ref{dtype::float32, {2, 3, 64, 64}, format_family::channels_first, x.data()}}},
              {{"output", runtime::tensor_ref{dtype::float32, {2, 10}, format_family::channels_first, y.data()}}});

  const runtime::executor_report& r = run.report();
  std::printf("resnet18 on the %s backend, plan total cost %lld\n", backend_t::name,
              static_cast<long long>(plan.total()));
  std::printf("activation arena %lld bytes (one buffer per value: %lld), %lld conversions, %lld relabels\n",
              static_cast<long long>(r.arena_bytes), static_cast<long long>(r.allocate_all_bytes),
              static_cast<long long>(r.conversions), static_cast<long long>(r.relabels));
  std::printf("%zu fused groups, e.g. %s\n", r.fusions.size(), r.fusions.empty() ? "-" : r.fusions.front().c_str());
  std::printf("logits of image 0:");
  for (int k = 0; k < 10; ++k) std::printf(" %.4f", y[static_cast<std::size_t>(k)]);
  std::printf("\n");
  for (float v : y)
    if (!(v == v)) return 1;  // a NaN: the run is broken
  return 0;
}
