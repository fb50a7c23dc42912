// Helpers of the trainer tests: plans, random values, tensors stored in a plan's format, one step.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/plan.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/runtime/training.hpp"
#include "model_test_util.hpp"

namespace memfmt::training_test {

using memfmt::format_family;
using memfmt::graph::network;
using memfmt::graph::parameter_store;
using memfmt::runtime::tensor_ref;
using trainer_t = memfmt::runtime::trainer<memfmt::reference::backend>;

using memfmt_test::plans_of;
using memfmt_test::uniform;

inline bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

inline std::vector<double> random_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& e : v) e = d(rng);
  return v;
}

// A logical (channels_first) tensor of the node's extents stored in format f, as bytes of T.
template <class T>
struct stored {
  std::vector<T> data;
  tensor_ref ref;
};

// Index of logical (channels_first) element i in the dense layout of family f.
inline std::size_t physical(const std::vector<std::int64_t>& e, std::size_t i, format_family f) {
  if (e.size() < 3 || f == format_family::channels_first) return i;
  std::int64_t spatial = 1;
  for (std::size_t d = 2; d < e.size(); ++d) spatial *= e[d];
  const auto li = static_cast<std::int64_t>(i);
  const std::int64_t n = li / (e[1] * spatial), c = li / spatial % e[1], s = li % spatial;
  return static_cast<std::size_t>((n * spatial + s) * e[1] + c);
}

template <class T>
stored<T> store(const memfmt::graph::node& n, format_family f, const std::vector<double>& logical) {
  stored<T> r;
  r.data.resize(logical.size());
  for (std::size_t i = 0; i < logical.size(); ++i) r.data[physical(n.extents, i, f)] = static_cast<T>(logical[i]);
  r.ref = tensor_ref{memfmt::dtype_of_v<T>, n.extents, f, r.data.data()};
  return r;
}

struct step_result {
  double loss = 0;               // sum(output * R), R logical
  std::vector<double> output;    // logical order
  parameter_store grads, stats;  // gradients, running statistics after the step
  std::int64_t arena = 0, all = 0;
};

// One training step of a one-input one-output network with output gradient R (so the gradients
// are those of L = sum(output * R)), on backend b.
template <class T, class Backend>
step_result train_on(Backend& b, const network& net, const memfmt::graph::plan& plan, const parameter_store& params,
                     const std::vector<double>& x, const std::vector<double>& r,
                     memfmt::runtime::trainer_options o = {}, std::vector<std::string>* fusions = nullptr) {
  memfmt::runtime::trainer<Backend> t(net, plan, b, params, o);
  if (fusions) *fusions = t.report().fusions;
  const auto& in = net.at(*net.find("input"));
  const auto& out = net.at(*net.find("output"));
  const format_family fi = plan.format(in.id).value_or(format_family::channels_first);
  const format_family fo = plan.format(out.id).value_or(format_family::channels_first);
  auto xs = store<T>(in, fi, x);
  auto rs = store<T>(out, fo, r);
  auto ys = store<T>(out, fo, std::vector<double>(r.size(), std::nan("")));
  step_result res;
  res.grads = t.train_step({{"input", xs.ref}}, {{"output", ys.ref}}, {{"output", rs.ref}});
  res.stats = t.running_stats();
  res.arena = t.report().arena_bytes;
  res.all = t.report().allocate_all_bytes;
  for (std::size_t i = 0; i < r.size(); ++i)
    res.output.push_back(memfmt::runtime::detail::as_double(ys.data[physical(out.extents, i, fo)]));
  for (std::size_t i = 0; i < r.size(); ++i) res.loss += res.output[i] * r[i];
  return res;
}

// The same on the reference backend.
template <class T>
step_result train(const network& net, const memfmt::graph::plan& plan, const parameter_store& params,
                  const std::vector<double>& x, const std::vector<double>& r, memfmt::runtime::trainer_options o = {}) {
  memfmt::reference::backend b;
  return train_on<T>(b, net, plan, params, x, r, o);
}

// A parameter's values as double, whatever its floating-point dtype (a bfloat16 network's batch-norm
// parameters and their gradients are float32).
inline std::vector<double> values(const memfmt::graph::parameter& p) {
  std::vector<double> r;
  memfmt::runtime::detail::dispatch_float_dtype(p.type, "parameter", [&](auto zero) {
    using T = decltype(zero);
    for (T v : p.values<T>()) r.push_back(memfmt::runtime::detail::as_double(v));
  });
  return r;
}

// ||got - want|| <= tol * max(||want||, floor_rms * sqrt(values)) in Euclidean norms. Gradients are
// compared so where an element-wise bound is meaningless: a sum such as a batch norm's dgamma = sum(dy *
// xhat) cancels to far below its terms, and a max pooling or ReLU input rounding across a tie routes a
// whole gradient elsewhere; a lost, zeroed or sign-flipped gradient is still an error of 1 or more.
// `floor_rms`, the average magnitude of all values of a step, keeps a gradient that is rounding alone
// (a batch-norm bias whose shift the next batch norm removes) from being held to its own tiny norm.
inline void expect_close_in_norm(const std::vector<double>& got, const std::vector<double>& want, double tol,
                                 const std::string& what, double floor_rms = 0.0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  const double scale = std::max({std::sqrt(norm), floor_rms * std::sqrt(static_cast<double>(want.size())), 1e-12});
  const double relative = std::sqrt(diff) / scale;
  EXPECT_LE(relative, tol) << what << ": ||got - want|| / max(||want||, floor) = " << relative << ", tolerance " << tol;
  ::testing::Test::RecordProperty(what + "_error_over_tolerance", std::to_string(relative / tol));
}

// CBAM's spatial attention on h (the mean and max over C, a 3x3 conv, sigmoid, broadcast mul),
// reductions over spatial axes broadcast back over h (a mean along the first spatial axis, an l2
// norm over all of them), coordinate attention and axial mixing (transposes of spatial axes, a
// concat and slices along one), then the other reductions over C joined to it as channels:
// [N, C + 5, spatial...].
inline memfmt::graph::node_id spatial_attention_and_reductions(memfmt::graph::network& net, memfmt::graph::node_id h) {
  const auto sa = net.concat("sa.cat", {net.channel_reduce("sa.mean", h, memfmt::reduce_op::mean),
                                        net.channel_reduce("sa.max", h, memfmt::reduce_op::max)});
  h = net.mul("sa.mul", h,
              net.activation("sa.sigmoid", net.conv("sa.conv", sa, memfmt::graph::conv_spec(1, 3, 1, 1)),
                             memfmt::activation::sigmoid));
  const std::uint32_t first = memfmt::axis_bit(2), all = ((1u << net.at(h).extents.size()) - 1) & ~3u;
  h = net.mul("sp.mul", h,
              net.activation("sp.sigmoid", net.reduce("sp.mean", h, {memfmt::reduce_op::mean, first}),
                             memfmt::activation::sigmoid));
  h = net.add("sp.add", h, net.reduce("sp.l2", h, {memfmt::reduce_op::l2, all}));
  // Coordinate attention: h pooled along its last spatial axis and, transposed, along its first,
  // concatenated along the first, gated, split and transposed back; then axial mixing: h with its
  // first and last spatial axes swapped, through tanh, swapped back and added.
  const int last = static_cast<int>(net.at(h).extents.size()) - 1;
  std::vector<int> swap(static_cast<std::size_t>(last + 1));
  for (int d = 0; d <= last; ++d) swap[static_cast<std::size_t>(d)] = d;
  std::swap(swap[2], swap[static_cast<std::size_t>(last)]);
  const auto pooled_h = net.reduce("coord.pool_h", h, {memfmt::reduce_op::mean, memfmt::axis_bit(last)});
  const auto pooled_w =
      net.transpose("coord.pool_w_t", net.reduce("coord.pool_w", h, {memfmt::reduce_op::max, first}), swap);
  const auto gates =
      net.activation("coord.sigmoid", net.concat("coord.cat", {pooled_h, pooled_w}, {2}), memfmt::activation::sigmoid);
  const std::int64_t e = net.at(pooled_h).extents[2], w = net.at(pooled_w).extents[2];
  h = net.mul("coord.mul_h", h, net.slice("coord.gate_h", gates, memfmt::slice_params{2, 0, e, 1}));
  h = net.mul(
      "coord.mul_w", h,
      net.transpose("coord.gate_w", net.slice("coord.gate_w_t", gates, memfmt::slice_params{2, e, e + w, 1}), swap));
  h = net.add(
      "axial.add", h,
      net.transpose("axial.back",
                    net.activation("axial.tanh", net.transpose("axial", h, swap), memfmt::activation::tanh), swap));
  std::vector<memfmt::graph::node_id> joined{h};
  for (const auto op : {memfmt::reduce_op::sum, memfmt::reduce_op::min, memfmt::reduce_op::l1, memfmt::reduce_op::l2,
                        memfmt::reduce_op::sum_square})
    joined.push_back(net.channel_reduce(std::string("reduce.") + memfmt::to_string(op), h, op));
  return net.concat("joined", joined);
}

}  // namespace memfmt::training_test
