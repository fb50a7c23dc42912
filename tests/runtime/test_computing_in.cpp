// runtime::computing_in: a backend compiled for fewer element types runs the same kernels (the
// same bits as the backend itself) and refuses the other dtypes before any work, in its support
// answers, the planner's query and the executor.
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "../common/expect_error.hpp"
#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/runtime/backend_support.hpp"
#include "memfmt/runtime/computing_in.hpp"
#include "memfmt/runtime/executor.hpp"
#include "memfmt/runtime/random_parameters.hpp"

namespace {

using memfmt::dtype;
using memfmt::errc;
using memfmt::format_family;
using memfmt::layer_kind;
using float_reference = memfmt::runtime::computing_in<memfmt::reference::backend, float>;

static_assert(std::is_same_v<memfmt::detail::backend_element_types_t<float_reference>, memfmt::element_types<float>>);

memfmt::graph::network small_resnet(dtype t) {
  memfmt::graph::models::options o;
  o.batch = 2;
  o.resolution = 32;
  o.width = 0.125;
  o.classes = 10;
  o.type = t;
  return memfmt::graph::models::resnet18(o);
}

template <class Backend>
std::vector<float> logits(Backend& backend, const memfmt::graph::network& net, const std::vector<float>& x) {
  memfmt::graph::cost_model costs;
  costs.set_support_query(memfmt::runtime::support_query_for(backend));
  const memfmt::graph::plan plan = memfmt::graph::solve(net, costs);
  memfmt::runtime::executor<Backend> run(net, plan, backend, memfmt::runtime::random_parameters(net, 7));
  std::vector<float> y(2 * 10);
  run.forward(
      {{"input", {dtype::float32, {2, 3, 32, 32}, format_family::channels_first, const_cast<float*>(x.data())}}},
      {{"output", {dtype::float32, {2, 10}, format_family::channels_first, y.data()}}});
  return y;
}

TEST(ComputingIn, RunsTheBackendsKernels) {
  const memfmt::graph::network net = small_resnet(dtype::float32);
  std::vector<float> x(2 * 3 * 32 * 32);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& v : x) v = d(rng);
  memfmt::reference::backend all_types;
  float_reference float_only;
  const std::vector<float> want = logits(all_types, net, x), got = logits(float_only, net, x);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;  // the same kernels, bit for bit
}

TEST(ComputingIn, AnswersForItsTypesOnly) {
  const float_reference backend;
  memfmt::op_query q;
  q.op = layer_kind::pool;
  EXPECT_TRUE(backend.support(q));
  q.rank = 3;  // the backend's own refusals still come through
  EXPECT_FALSE(backend.support(q));
  q.rank = 4;
  for (dtype t : {dtype::float64, dtype::float16, dtype::bfloat16, dtype::int32}) {
    q.type = t;
    const memfmt::op_support s = backend.support(q);
    EXPECT_FALSE(s) << to_string(t);
    EXPECT_EQ(s.code, errc::unsupported_dtype);
    for (const std::string& part : std::vector<std::string>{"pool", std::string(to_string(t)), "reference", "float32"})
      EXPECT_NE(s.reason.find(part), std::string::npos) << s.reason;
  }
}

TEST(ComputingIn, OtherDtypesAreRefusedBeforeAnyWork) {
  const memfmt::graph::network net = small_resnet(dtype::float64);
  float_reference backend;
  // The planner is told no format runs: every layer's reason names the dtype.
  const auto query = memfmt::runtime::support_query_for(backend);
  for (const memfmt::graph::node& n : net.nodes()) {
    if (!memfmt::runs_on_backend(n.kind)) continue;
    const auto why = query(net, n, format_family::channels_last);
    ASSERT_TRUE(why) << n.name;
    EXPECT_NE(why->find("float64"), std::string::npos) << *why;
  }
  // The executor, given a plan made without the query, refuses it when it is built.
  const memfmt::graph::plan plan = memfmt::graph::solve(net, memfmt::graph::cost_model{});
  const std::string what = memfmt_test::error_message(
      [&] {
        memfmt::runtime::executor<float_reference> run(net, plan, backend, memfmt::runtime::random_parameters(net, 7));
      },
      errc::unsupported_dtype);
  EXPECT_NE(what.find("float64"), std::string::npos) << what;
  EXPECT_NE(what.find("float32"), std::string::npos) << what;
}

}  // namespace
