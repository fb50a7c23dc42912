// The executor's device-memory hooks (executor.hpp, detail::owns_memory) on the CPU: a fake
// "device" backend - the reference kernels behind allocate / deallocate / copy_in / copy_out /
// convert - counts every hook call and checks that every pointer a layer receives lies in memory
// it allocated. Its outputs equal the reference backend's (the same kernels, so bit for bit), the
// arena and every parameter come from the hooks, every input and output byte crosses copy_in /
// copy_out, each conversion of the plan runs through Backend::convert, everything allocated is
// given back, and poison mode is refused. The trainer (training.hpp) takes the same hooks: its
// training step on the fake device (outputs, every parameter gradient, the batch norm's running
// statistics) equals the reference backend's bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/expect_error.hpp"
#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/convert/convert.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/runtime/executor.hpp"
#include "model_test_util.hpp"
#include "training_util.hpp"

namespace {

using memfmt::errc;
using memfmt::format_family;
using memfmt::graph::network;
using memfmt::runtime::tensor_ref;

// The reference kernels behind device-memory hooks that count their calls.
struct fake_device : memfmt::reference::backend {
  static constexpr const char* name = "fake_device";
  using element_types = memfmt::element_types<float>;  // all the tests run; compiled for no other

  std::map<const std::byte*, std::size_t> blocks;  // live allocations
  int allocations = 0, deallocations = 0, converts = 0, layer_calls = 0;
  std::size_t bytes_in = 0, bytes_out = 0;

  void* allocate(std::size_t bytes) {
    auto* p = static_cast<std::byte*>(std::malloc(bytes));
    blocks[p] = bytes;
    ++allocations;
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept {
    const auto it = blocks.find(static_cast<std::byte*>(p));
    if (it == blocks.end() || it->second != bytes) std::abort();  // not ours, or the wrong size
    blocks.erase(it);
    ++deallocations;
    std::free(p);
  }
  void copy_in(void* dst, const void* host, std::size_t bytes) {
    require_device(dst, bytes);
    std::memcpy(dst, host, bytes);
    bytes_in += bytes;
  }
  void copy_out(void* host, const void* src, std::size_t bytes) {
    require_device(src, bytes);
    std::memcpy(host, src, bytes);
    bytes_out += bytes;
  }
  template <class T, class From, class To>
  void convert(memfmt::tensor_view<const T, From> s, memfmt::tensor_view<T, To> d) {
    require_device(s.data(), 1);
    require_device(d.data(), 1);
    ++converts;
    memfmt::convert(s, d);
  }

  // Whether [p, p + bytes) lies in one allocation.
  bool on_device(const void* p, std::size_t bytes) const {
    const auto* b = static_cast<const std::byte*>(p);
    auto it = blocks.upper_bound(b);
    if (it == blocks.begin()) return false;
    --it;
    return b + bytes <= it->first + it->second;
  }
  void require_device(const void* p, std::size_t bytes) const {
    if (!on_device(p, bytes)) throw std::runtime_error("fake_device: a pointer outside device memory");
  }

  // The layers of the test network: every pointer must be device memory.
  template <class T, class XF, class WF, class YF>
  void conv_forward(memfmt::tensor_view<const T, XF> x, memfmt::tensor_view<const T, WF> w, const T* bias,
                    memfmt::tensor_view<T, YF> y, const memfmt::conv_params& p) {
    require_device(x.data(), 1);
    require_device(w.data(), 1);
    if (bias) require_device(bias, 1);
    require_device(y.data(), 1);
    ++layer_calls;
    memfmt::reference::backend::conv_forward(x, w, bias, y, p);
  }
  template <class T, class F>
  void batch_norm_forward_inference(memfmt::tensor_view<const T, F> x, memfmt::tensor_view<T, F> y,
                                    const memfmt::param_t<T>* g, const memfmt::param_t<T>* b,
                                    const memfmt::param_t<T>* m, const memfmt::param_t<T>* v,
                                    const memfmt::batch_norm_params& p, memfmt::tensor_view<const T, F> residual = {}) {
    for (const void* q :
         {static_cast<const void*>(x.data()), static_cast<const void*>(y.data()), static_cast<const void*>(g),
          static_cast<const void*>(b), static_cast<const void*>(m), static_cast<const void*>(v)})
      require_device(q, 1);
    ++layer_calls;
    memfmt::reference::backend::batch_norm_forward_inference(x, y, g, b, m, v, p, residual);
  }
  template <class T, class XF, class YF>
  void activation_forward(const memfmt::activation_params& k, memfmt::tensor_view<const T, XF> x,
                          memfmt::tensor_view<T, YF> y) {
    require_device(x.data(), 1);
    require_device(y.data(), 1);
    ++layer_calls;
    memfmt::reference::backend::activation_forward(k, x, y);
  }
  template <class T, class AF, class BF, class YF>
  void binary_forward(memfmt::binary_op k, memfmt::tensor_view<const T, AF> a, memfmt::tensor_view<const T, BF> b,
                      memfmt::tensor_view<T, YF> y) {
    require_device(a.data(), 1);
    require_device(b.data(), 1);
    require_device(y.data(), 1);
    ++layer_calls;
    memfmt::reference::backend::binary_forward(k, a, b, y);
  }
  template <class T, class XF, class YF>
  void global_average_pool_forward(memfmt::tensor_view<const T, XF> x, memfmt::tensor_view<T, YF> y) {
    require_device(x.data(), 1);
    require_device(y.data(), 1);
    ++layer_calls;
    memfmt::reference::backend::global_average_pool_forward(x, y);
  }
  template <class T, class XF, class YF>
  void linear_forward(memfmt::tensor_view<const T, XF> x, const T* w, const T* bias, memfmt::tensor_view<T, YF> y) {
    require_device(x.data(), 1);
    require_device(w, 1);
    if (bias) require_device(bias, 1);
    require_device(y.data(), 1);
    ++layer_calls;
    memfmt::reference::backend::linear_forward(x, w, bias, y);
  }
};

static_assert(memfmt::runtime::detail::owns_memory<fake_device>::value, "the fake device names every hook");
static_assert(std::is_same_v<memfmt::detail::backend_element_types_t<fake_device>, memfmt::element_types<float>>);
static_assert(
    std::is_same_v<memfmt::detail::backend_element_types_t<memfmt::reference::backend>, memfmt::float_element_types>,
    "a backend that names no element types is compiled for every floating type");
static_assert(!memfmt::runtime::detail::owns_memory<memfmt::reference::backend>::value, "host backends do not");

// conv (bias) -> batch norm -> relu -> 1x1 conv -> + relu -> global average pool -> flatten ->
// linear -> "y"; the relu is also the output "features", pinned channels-last.
network test_network() {
  network net;
  const auto x = net.input("input", {2, 4, 6, 5}, memfmt::dtype::float32, format_family::channels_first);
  const auto c1 = net.conv("c1", x, memfmt::graph::conv_spec(6, 3, 1, 1, 1, true));
  const auto r = net.relu("r", net.batch_norm("bn", c1));
  const auto c2 = net.conv("c2", r, memfmt::graph::conv_spec(6, 1));
  const auto s = net.add("sum", c2, r);
  const auto f = net.flatten("flat", net.global_pool("gap", s));
  net.output("y", net.linear("fc", f, 3), format_family::channels_first);
  net.output("features", r, format_family::channels_last);
  return net;
}

template <class Backend>
std::map<std::string, std::vector<float>> run(Backend& b, const network& net, const memfmt::graph::plan& plan,
                                              const std::vector<float>& input,
                                              memfmt::runtime::executor_report* report) {
  const auto params = memfmt_test::make_params(net, 3);
  memfmt::runtime::executor<Backend> ex(net, plan, b, params);
  std::map<std::string, std::vector<float>> out;
  std::map<std::string, tensor_ref> outputs;
  for (const char* name : {"y", "features"}) {
    const auto& n = net.at(*net.find(name));
    out[name].assign(static_cast<std::size_t>(n.numel()), -1.0f);
    const format_family format =
        std::string(name) == "features" ? format_family::channels_last : format_family::channels_first;
    outputs[name] = tensor_ref{memfmt::dtype::float32, n.extents, format, out[name].data()};
  }
  const auto& in = net.at(*net.find("input"));
  std::vector<float> x = input;
  ex.forward({{"input", tensor_ref{memfmt::dtype::float32, in.extents, format_family::channels_first, x.data()}}},
             outputs);
  if (report) *report = ex.report();
  return out;
}

TEST(ExecutorDeviceMemory, HooksCarryEveryByteAndResultsEqualTheHostRun) {
  const network net = test_network();
  std::vector<float> x(2 * 4 * 6 * 5);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 37 % 23) - 11) / 8.0f;
  const memfmt::graph::cost_model model{};
  for (format_family f : {format_family::channels_first, format_family::channels_last}) {
    SCOPED_TRACE(memfmt::graph::to_string(f));
    const auto plan = memfmt::graph::make_plan(net, model, memfmt_test::uniform(net, f));
    memfmt::reference::backend host;
    const auto want = run(host, net, plan, x, nullptr);
    fake_device dev;
    memfmt::runtime::executor_report report;
    const auto got = run(dev, net, plan, x, &report);
    for (const auto& [name, values] : want) {
      ASSERT_EQ(got.at(name).size(), values.size());
      EXPECT_EQ(std::memcmp(got.at(name).data(), values.data(), values.size() * sizeof(float)), 0) << name;
    }
    // Every allocation (the arena and each parameter) was given back with the executor.
    EXPECT_GT(dev.allocations, 1);
    EXPECT_EQ(dev.deallocations, dev.allocations);
    EXPECT_TRUE(dev.blocks.empty());
    // Inputs and outputs crossed the hooks whole; parameters went in through copy_in too.
    const std::size_t io_out = (got.at("y").size() + got.at("features").size()) * sizeof(float);
    EXPECT_EQ(dev.bytes_out, io_out);
    EXPECT_GT(dev.bytes_in, x.size() * sizeof(float));
    EXPECT_EQ(dev.converts, report.conversions) << "one Backend::convert per conversion of the plan";
    EXPECT_GT(report.conversions, 0);
    EXPECT_GT(dev.layer_calls, 0);
  }
}

// A float64 network passes the reference kernels' support() but is outside the element types the
// fake device names, for which no layer was compiled: refused when built, nothing allocated.
TEST(ExecutorDeviceMemory, ElementTypesTheBackendDoesNotNameAreRefused) {
  network net;
  const auto x = net.input("input", {1, 2, 3, 3}, memfmt::dtype::float64, format_family::channels_first);
  net.output("output", net.conv("c", x, memfmt::graph::conv_spec(2, 1)), format_family::channels_first);
  const auto plan = memfmt::graph::make_plan(net, memfmt::graph::cost_model{},
                                             memfmt_test::uniform(net, format_family::channels_first));
  const auto params = memfmt_test::make_params(net, 3);
  fake_device dev;
  memfmt_test::expect_error([&] { memfmt::runtime::executor<fake_device> ex(net, plan, dev, params); },
                            errc::unsupported_dtype,
                            {"fake_device backend", "node 'input'", "float64", "supported: float32)"});
  memfmt_test::expect_error([&] { memfmt::runtime::trainer<fake_device> tr(net, plan, dev, params); },
                            errc::unsupported_dtype,
                            {"trainer (fake_device backend)", "float64", "supported: float32)"});
  EXPECT_EQ(dev.allocations, 0);
  EXPECT_EQ(dev.layer_calls, 0);
}

TEST(ExecutorDeviceMemory, PoisonModeIsRefused) {
  const network net = test_network();
  const auto plan = memfmt::graph::make_plan(net, memfmt::graph::cost_model{},
                                             memfmt_test::uniform(net, format_family::channels_last));
  fake_device dev;
  const auto params = memfmt_test::make_params(net, 3);
  memfmt_test::expect_error(
      [&] {
        memfmt::runtime::executor<fake_device> ex(net, plan, dev, params, {true, true});
      },
      errc::invalid_argument, {"fake_device", "poison mode"});
  EXPECT_EQ(dev.allocations, 0);
}

// conv (bias) -> batch norm -> relu, read by a 1x1 conv and by the residual add after it (two
// gradient contributions summed) -> relu -> global average pool -> flatten -> linear -> "output".
network training_network() {
  network net;
  const auto x = net.input("input", {2, 3, 6, 5}, memfmt::dtype::float32, format_family::channels_first);
  const auto r = net.relu("r", net.batch_norm("bn", net.conv("c1", x, memfmt::graph::conv_spec(4, 3, 1, 1, 1, true))));
  const auto s = net.relu("r2", net.add("sum", net.conv("c2", r, memfmt::graph::conv_spec(4, 1)), r));
  net.output("output", net.linear("fc", net.flatten("flat", net.global_pool("gap", s)), 3),
             format_family::channels_first);
  return net;
}

TEST(TrainerDeviceMemory, HooksCarryEveryByteAndTheStepEqualsTheHostStep) {
  namespace tt = memfmt::training_test;
  const network net = training_network();
  const auto params = memfmt_test::make_params(net, 5);
  const auto& in = net.at(*net.find("input"));
  const auto& out = net.at(*net.find("output"));
  const auto x = tt::random_values(static_cast<std::size_t>(in.numel()), 11);
  const auto r = tt::random_values(static_cast<std::size_t>(out.numel()), 12);
  for (const auto& [plan_name, plan] : tt::plans_of(net)) {
    SCOPED_TRACE(plan_name);
    const tt::step_result want = tt::train<float>(net, plan, params, x, r);
    fake_device dev;
    const tt::step_result got = tt::train_on<float>(dev, net, plan, params, x, r);
    ASSERT_EQ(got.output.size(), want.output.size());
    for (std::size_t i = 0; i < want.output.size(); ++i) EXPECT_EQ(got.output[i], want.output[i]) << "output " << i;
    for (const auto* stores : {&want.grads, &want.stats}) {
      const auto& mine = stores == &want.grads ? got.grads : got.stats;
      ASSERT_EQ(mine.names(), stores->names());
      for (const std::string& name : stores->names()) EXPECT_EQ(mine.at(name).bytes, stores->at(name).bytes) << name;
    }
    EXPECT_FALSE(want.grads.names().empty());
    // The arena, every parameter, statistic and gradient came from the hooks and went back.
    EXPECT_GT(dev.allocations, 1);
    EXPECT_EQ(dev.deallocations, dev.allocations);
    EXPECT_TRUE(dev.blocks.empty());
    // The input and output gradient went in and the output, gradients and statistics came out.
    EXPECT_GE(dev.bytes_in, (x.size() + r.size()) * sizeof(float));
    EXPECT_GE(dev.bytes_out, r.size() * sizeof(float));
    EXPECT_GT(dev.layer_calls, 0);
  }
}

}  // namespace
