// memfmt/onnx/detail/fold.hpp - evaluates ONNX nodes whose inputs are all known at import.
//
// Exporters compute pads, scales and target shapes at run time from Shape, Gather, Concat, Cast ...
// even when every input shape is fixed (torch.onnx does for F.pad and F.interpolate). The importer
// knows every shape, so such subgraphs are evaluated here, once, and the Pad or Resize they feed
// reads a constant, as ONNX Runtime's constant folding does. These are small tensors: the code
// favours clarity (index vectors, double / int64 element access) over speed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "../../detail/checked.hpp"
#include "../tensor.hpp"
#include "attributes.hpp"

namespace memfmt::onnx::detail {

using shape_t = std::vector<std::int64_t>;

// A folded result. Shape arithmetic makes small tensors; a model asking for a huge one (a
// ConstantOfShape of [1e12]) is refused before it is allocated.
inline parameter folded_parameter(memfmt::dtype type, shape_t shape, const std::string& what) {
  constexpr std::int64_t limit = std::int64_t{1} << 26;
  const std::int64_t n = memfmt::detail::checked_numel(shape, what.c_str());
  if (n > limit)
    memfmt::detail::fail(errc::unsupported, what + ": a constant of " + std::to_string(n) + " elements " +
                                                memfmt::detail::dims_to_string(shape) +
                                                " is too large to fold (limit " + std::to_string(limit) + ")");
  return make_parameter(type, std::move(shape), what);
}

inline shape_t row_major_strides(const shape_t& s) {
  shape_t st(s.size(), 1);
  for (std::size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// An axis in [-rank, rank) (inclusive: [-rank, rank], Flatten's) made non-negative.
inline std::int64_t normalize_axis(const node_reader& r, std::int64_t axis, std::size_t rank, bool inclusive = false) {
  const auto n = static_cast<std::int64_t>(rank);
  if (axis < -n || axis > n || (axis == n && !inclusive))
    r.fail(errc::invalid_argument,
           "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + n : axis;
}

// numpy broadcasting of two shapes; an error naming both when they do not broadcast.
inline shape_t broadcast_shapes(const node_reader& r, const shape_t& a, const shape_t& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  shape_t out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1)
      r.fail(errc::shape_mismatch, "shapes " + memfmt::detail::dims_to_string(a) + " and " +
                                       memfmt::detail::dims_to_string(b) + " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// The element of `p` (shape s, right-aligned against `out`) that output index `idx` reads.
inline std::size_t broadcast_offset(const shape_t& s, const shape_t& out, const shape_t& idx) {
  std::size_t off = 0, stride = 1;
  for (std::size_t k = s.size(); k-- > 0;) {
    const std::size_t o = k + (out.size() - s.size());
    if (s[k] != 1) off += static_cast<std::size_t>(idx[o]) * stride;
    stride *= static_cast<std::size_t>(s[k]);
  }
  return off;
}

inline bool next_index(shape_t& idx, const shape_t& shape) {
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (++idx[d] < shape[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// Elementwise over broadcast inputs; f(doubles, int64s) -> (double, int64) of the output element.
template <class F>
parameter elementwise(const node_reader& r, const std::vector<const parameter*>& in, memfmt::dtype out_type, F f) {
  shape_t shape = in[0]->shape;
  for (std::size_t i = 1; i < in.size(); ++i) shape = broadcast_shapes(r, shape, in[i]->shape);
  parameter out = folded_parameter(out_type, shape, r.label());
  if (out.bytes.empty()) return out;
  shape_t idx(shape.size(), 0);
  std::size_t o = 0;
  std::vector<double> dv(in.size());
  std::vector<std::int64_t> iv(in.size());
  do {
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::size_t off = broadcast_offset(in[i]->shape, shape, idx);
      dv[i] = element_as_double(*in[i], off);
      iv[i] = element_as_int64(*in[i], off);
    }
    const auto [d, n] = f(dv, iv);
    store_element(out, o++, d, n);
  } while (next_index(idx, shape));
  return out;
}

// ReduceMax / Min / Sum / Mean / Prod of `x` over `axes` (all when empty), in double.
inline parameter reduced(const node_reader& r, const parameter& x, const std::vector<std::int64_t>& axes, bool keepdims,
                         const std::string& op) {
  const std::size_t rank = x.shape.size();
  std::vector<bool> over(rank, axes.empty());
  for (std::int64_t a : axes) over[static_cast<std::size_t>(normalize_axis(r, a, rank))] = true;
  shape_t kept(rank), out_shape;  // kept: x's shape with the reduced dims 1
  std::int64_t count = 1;
  for (std::size_t d = 0; d < rank; ++d) {
    kept[d] = over[d] ? 1 : x.shape[d];
    if (over[d]) count *= x.shape[d];
    if (!over[d] || keepdims) out_shape.push_back(kept[d]);
  }
  parameter out = folded_parameter(x.type, out_shape, r.label());
  const std::size_t n = out.bytes.size() / memfmt::size_of(x.type);
  using combine_fn = double (*)(double, double);
  const bool max = op == "ReduceMax", min = op == "ReduceMin", prod = op == "ReduceProd";
  const combine_fn combine = max    ? combine_fn([](double a, double v) { return std::max(a, v); })
                             : min  ? combine_fn([](double a, double v) { return std::min(a, v); })
                             : prod ? combine_fn([](double a, double v) { return a * v; })
                                    : combine_fn([](double a, double v) { return a + v; });
  std::vector<double> acc(n, max ? -HUGE_VAL : min ? HUGE_VAL : prod ? 1.0 : 0.0);
  if (!x.bytes.empty()) {
    const shape_t strides = row_major_strides(kept);
    shape_t idx(rank, 0);
    std::size_t i = 0;
    do {
      std::size_t o = 0;
      for (std::size_t d = 0; d < rank; ++d)
        if (!over[d]) o += static_cast<std::size_t>(idx[d] * strides[d]);
      acc[o] = combine(acc[o], element_as_double(x, i++));
    } while (next_index(idx, x.shape));
  }
  const bool mean = op == "ReduceMean";
  for (std::size_t k = 0; k < n; ++k) {
    const double v = mean ? acc[k] / static_cast<double>(count) : acc[k];
    store_element(out, k, v, saturating_int64(v));
  }
  return out;
}

// Copies elements: out element k <- in element src(k).
template <class Src>
parameter gather_elements(const parameter& in, shape_t shape, const std::string& what, Src src) {
  parameter out = folded_parameter(in.type, std::move(shape), what);
  const std::size_t e = memfmt::size_of(in.type);
  const std::size_t n = out.bytes.size() / e;
  for (std::size_t k = 0; k < n; ++k) std::memcpy(out.bytes.data() + k * e, in.bytes.data() + src(k) * e, e);
  return out;
}

inline parameter reshaped(parameter p, shape_t shape) {
  p.shape = std::move(shape);
  return p;
}

// ONNX Reshape's target: 0 copies the input dim (unless allowzero), one -1 is inferred.
// A Transpose's perm for an input of rank `rank` (reversed dims when absent), checked to be a
// permutation.
inline std::vector<std::int64_t> transpose_perm(const node_reader& r, std::size_t rank) {
  std::vector<std::int64_t> perm = r.get_ints("perm");
  if (perm.empty())
    for (std::size_t d = rank; d-- > 0;) perm.push_back(static_cast<std::int64_t>(d));
  std::vector<std::int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t d = 0; d < sorted.size(); ++d)
    if (sorted.size() != rank || sorted[d] != static_cast<std::int64_t>(d))
      r.fail(errc::invalid_argument, "Transpose perm " + memfmt::detail::dims_to_string(perm) +
                                         " is not a permutation of rank " + std::to_string(rank));
  return perm;
}

inline shape_t reshape_target(const node_reader& r, const shape_t& in, const shape_t& target, bool allowzero) {
  shape_t out = target;
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allowzero) {
      if (i >= in.size())
        r.fail(errc::invalid_argument, "reshape target " + memfmt::detail::dims_to_string(target) + " copies dim " +
                                           std::to_string(i) + " of a rank " + std::to_string(in.size()) + " input");
      out[i] = in[i];
    }
    if (out[i] == -1) {
      if (infer >= 0)
        r.fail(errc::invalid_argument, "reshape target " + memfmt::detail::dims_to_string(target) + " has two -1");
      infer = static_cast<int>(i);
    } else if (out[i] < 0) {
      r.fail(errc::invalid_argument,
             "reshape target " + memfmt::detail::dims_to_string(target) + " has a negative dim");
    } else {
      known = memfmt::detail::checked_mul(known, out[i], r.label() + ": reshape target");
    }
  }
  const std::int64_t total = memfmt::detail::checked_numel(in, "reshape input");
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      r.fail(errc::shape_mismatch,
             "cannot reshape " + memfmt::detail::dims_to_string(in) + " to " + memfmt::detail::dims_to_string(target));
    out[static_cast<std::size_t>(infer)] = total / known;
  } else if (known != total) {
    r.fail(errc::shape_mismatch, "cannot reshape " + memfmt::detail::dims_to_string(in) + " (" + std::to_string(total) +
                                     " elements) to " + memfmt::detail::dims_to_string(target));
  }
  return out;
}

// ONNX Slice on one axis: start, end and step clamped as the operator's spec says. Returns the
// indices taken.
inline std::vector<std::int64_t> slice_indices(std::int64_t dim, std::int64_t start, std::int64_t end,
                                               std::int64_t step) {
  std::vector<std::int64_t> idx;
  if (step == 0) return idx;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<std::int64_t>(start, 0, dim);
    end = std::clamp<std::int64_t>(end, 0, dim);
    for (std::int64_t i = start; i < end; i += step) idx.push_back(i);
  } else {
    start = std::clamp<std::int64_t>(start, 0, dim - 1);
    end = std::clamp<std::int64_t>(end, -1, dim - 1);
    for (std::int64_t i = start; i > end; i += step) idx.push_back(i);
  }
  return idx;
}

// Slice's starts/ends/axes/steps from attributes (opset < 10) or inputs 1-4.
struct slice_spec {
  std::vector<std::int64_t> starts, ends, axes, steps;
};
inline slice_spec read_slice(const node_reader& r, const std::vector<const parameter*>& in, std::size_t rank,
                             int opset) {
  slice_spec s;
  if (opset < 10) {
    s.starts = r.get_ints("starts");
    s.ends = r.get_ints("ends");
    s.axes = r.get_ints("axes");
  } else {
    if (in.size() < 3 || !in[1] || !in[2]) r.fail(errc::invalid_argument, "Slice needs starts and ends");
    s.starts = int64_values(*in[1]);
    s.ends = int64_values(*in[2]);
    if (in.size() > 3 && in[3]) s.axes = int64_values(*in[3]);
    if (in.size() > 4 && in[4]) s.steps = int64_values(*in[4]);
  }
  if (s.axes.empty())
    for (std::size_t i = 0; i < s.starts.size(); ++i) s.axes.push_back(static_cast<std::int64_t>(i));
  if (s.steps.empty()) s.steps.assign(s.starts.size(), 1);
  if (s.ends.size() != s.starts.size() || s.axes.size() != s.starts.size() || s.steps.size() != s.starts.size())
    r.fail(errc::invalid_argument, "Slice starts " + memfmt::detail::dims_to_string(s.starts) + ", ends " +
                                       memfmt::detail::dims_to_string(s.ends) + ", axes " +
                                       memfmt::detail::dims_to_string(s.axes) + ", steps " +
                                       memfmt::detail::dims_to_string(s.steps) + " differ in length");
  for (auto& a : s.axes) a = normalize_axis(r, a, rank);
  for (auto st : s.steps)
    if (st == 0) r.fail(errc::invalid_argument, "Slice step 0");
  return s;
}

// Unsqueeze / Squeeze axes: attribute before opset 13, input 1 from 13.
inline std::vector<std::int64_t> axes_of(const node_reader& r, const std::vector<const parameter*>& in, int opset) {
  if (opset >= 13) return in.size() > 1 && in[1] ? int64_values(*in[1]) : std::vector<std::int64_t>{};
  return r.get_ints("axes");
}

// The outputs of `r`'s node computed from its inputs `in` (nullptr for an absent optional input),
// or nullopt when the op is not one folded here. Shape is the importer's (it also reads the shape
// of values that are not constants).
inline std::optional<std::vector<parameter>> fold(const node_reader& r, const std::vector<const parameter*>& in,
                                                  int opset) {
  const std::string& op = r.op();
  const auto need = [&](std::size_t n) {
    if (in.size() < n || !in[0]) r.fail(errc::invalid_argument, "needs " + std::to_string(n) + " inputs");
    for (std::size_t i = 0; i < n; ++i)
      if (!in[i]) r.fail(errc::invalid_argument, "input " + std::to_string(i) + " is missing");
  };
  const auto one = [](parameter p) {
    return std::optional<std::vector<parameter>>(std::vector<parameter>{std::move(p)});
  };
  const auto arith = [&](auto fd, auto fi) {
    need(2);
    const bool is_int = !memfmt::is_floating(in[0]->type);
    return one(elementwise(r, {in[0], in[1]}, in[0]->type, [&](const auto& d, const auto& i) {
      return is_int ? std::pair<double, std::int64_t>{0.0, fi(i[0], i[1])}
                    : std::pair<double, std::int64_t>{fd(d[0], d[1]), 0};
    }));
  };
  const auto compare = [&](auto f) {
    need(2);
    return one(elementwise(r, {in[0], in[1]}, memfmt::dtype::bool8, [&](const auto& d, const auto&) {
      const bool v = f(d[0], d[1]);
      return std::pair<double, std::int64_t>{v ? 1.0 : 0.0, v ? 1 : 0};
    }));
  };
  const auto unary = [&](auto f) {
    need(1);
    return one(elementwise(r, {in[0]}, in[0]->type, [&](const auto& d, const auto&) {
      const double v = f(d[0]);
      return std::pair<double, std::int64_t>{v, saturating_int64(v)};
    }));
  };

  const auto logical = [&](auto f) {
    need(2);
    return one(elementwise(r, {in[0], in[1]}, memfmt::dtype::bool8, [&](const auto&, const auto& i) {
      const bool v = f(i[0] != 0, i[1] != 0);
      return std::pair<double, std::int64_t>{v ? 1.0 : 0.0, v ? 1 : 0};
    }));
  };
  // Integer results past int64 are an error (signed overflow is undefined), as is a zero divisor.
  const std::string in_constant = r.label() + ": a constant";
  const auto divisor = [&](std::int64_t b) {
    if (b == 0) r.fail(errc::invalid_argument, "integer division by zero in a constant");
  };

  if (op == "Identity") return need(1), one(*in[0]);
  if (op == "Add")
    return arith(std::plus<>{},
                 [&](std::int64_t a, std::int64_t b) { return memfmt::detail::checked_add(a, b, in_constant); });
  if (op == "Sub")
    return arith(std::minus<>{},
                 [&](std::int64_t a, std::int64_t b) { return memfmt::detail::checked_sub(a, b, in_constant); });
  if (op == "Mul")
    return arith(std::multiplies<>{},
                 [&](std::int64_t a, std::int64_t b) { return memfmt::detail::checked_mul(a, b, in_constant); });
  if (op == "Div")
    return arith(std::divides<>{}, [&](std::int64_t a, std::int64_t b) {
      divisor(b);
      return b == -1 ? memfmt::detail::checked_sub(0, a, in_constant) : a / b;
    });
  if (op == "Mod") {
    // fmod 1: the sign of the dividend (C's fmod); 0, integers only: the sign of the divisor (Python's %).
    const bool c_fmod = r.get_int("fmod", 0) != 0;
    if (!c_fmod && memfmt::is_floating(in[0] ? in[0]->type : memfmt::dtype::int64))
      r.fail(errc::invalid_argument, "Mod of floats needs fmod = 1");
    return arith([](double a, double b) { return std::fmod(a, b); },
                 [&](std::int64_t a, std::int64_t b) {
                   divisor(b);
                   const std::int64_t m = b == -1 ? 0 : a % b;
                   return !c_fmod && m != 0 && (m < 0) != (b < 0) ? m + b : m;
                 });
  }
  if (op == "Pow") {
    need(2);
    return one(elementwise(r, {in[0], in[1]}, in[0]->type, [](const auto& d, const auto&) {
      const double v = std::pow(d[0], d[1]);
      return std::pair<double, std::int64_t>{v, saturating_int64(v)};
    }));
  }
  if (op == "Clip") {
    // max(x, 0) in TensorFlow-style "same" padding computed at run time: bounds are the attributes
    // min and max before opset 11, the optional one-element inputs 1 and 2 from 11.
    need(1);
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    std::int64_t lo_i = std::numeric_limits<std::int64_t>::min(), hi_i = std::numeric_limits<std::int64_t>::max();
    if (opset < 11) {
      if (r.has("min")) lo = r.get_float("min", 0.f), lo_i = saturating_int64(lo);
      if (r.has("max")) hi = r.get_float("max", 0.f), hi_i = saturating_int64(hi);
    } else {
      for (std::size_t k = 1; k <= 2 && k < in.size(); ++k) {
        if (!in[k]) continue;
        if (in[k]->numel() != 1)
          r.fail(errc::invalid_argument, std::string(k == 1 ? "min " : "max ") +
                                             memfmt::detail::dims_to_string(in[k]->shape) + " is not one value");
        (k == 1 ? lo : hi) = element_as_double(*in[k], 0);
        (k == 1 ? lo_i : hi_i) = element_as_int64(*in[k], 0);
      }
    }
    return one(elementwise(r, {in[0]}, in[0]->type, [&](const auto& d, const auto& i) {
      return std::pair<double, std::int64_t>{std::min(std::max(d[0], lo), hi), std::min(std::max(i[0], lo_i), hi_i)};
    }));
  }
  if (op == "Min")
    return arith([](double a, double b) { return std::min(a, b); },
                 [](std::int64_t a, std::int64_t b) { return std::min(a, b); });
  if (op == "Max")
    return arith([](double a, double b) { return std::max(a, b); },
                 [](std::int64_t a, std::int64_t b) { return std::max(a, b); });
  if (op == "Equal") return compare([](double a, double b) { return a == b; });
  if (op == "Less") return compare([](double a, double b) { return a < b; });
  if (op == "Greater") return compare([](double a, double b) { return a > b; });
  if (op == "LessOrEqual") return compare([](double a, double b) { return a <= b; });
  if (op == "GreaterOrEqual") return compare([](double a, double b) { return a >= b; });
  if (op == "And") return logical([](bool a, bool b) { return a && b; });
  if (op == "Or") return logical([](bool a, bool b) { return a || b; });
  if (op == "Xor") return logical([](bool a, bool b) { return a != b; });
  if (op == "Neg") return unary([](double v) { return -v; });
  if (op == "Floor") return unary([](double v) { return std::floor(v); });
  if (op == "Ceil") return unary([](double v) { return std::ceil(v); });
  if (op == "Sqrt") return unary([](double v) { return std::sqrt(v); });
  if (op == "Abs") return unary([](double v) { return std::fabs(v); });
  if (op == "Not") return unary([](double v) { return v == 0.0 ? 1.0 : 0.0; });
  if (op == "Reciprocal") return unary([](double v) { return 1.0 / v; });
  if (op == "Exp") return unary([](double v) { return std::exp(v); });
  if (op == "Log") return unary([](double v) { return std::log(v); });
  if (op == "Erf") return unary([](double v) { return std::erf(v); });
  if (op == "Sign") return unary([](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; });
  if (op == "Round") return unary([](double v) { return std::nearbyint(v); });  // halves to even
  if (op == "ReduceMax" || op == "ReduceMin" || op == "ReduceSum" || op == "ReduceMean" || op == "ReduceProd") {
    need(1);
    // axes: an input for ReduceSum from opset 13 and for all from 18, an attribute before.
    const bool axes_input = opset >= 18 || (op == "ReduceSum" && opset >= 13);
    const std::vector<std::int64_t> axes =
        axes_input ? (in.size() > 1 && in[1] ? int64_values(*in[1]) : std::vector<std::int64_t>{}) : r.get_ints("axes");
    if (axes.empty() && r.get_int("noop_with_empty_axes", 0) != 0) return one(*in[0]);
    return one(reduced(r, *in[0], axes, r.get_int("keepdims", 1) != 0, op));
  }
  if (op == "Where") {
    need(3);
    return one(elementwise(r, {in[0], in[1], in[2]}, in[1]->type, [](const auto& d, const auto& i) {
      return d[0] != 0.0 ? std::pair<double, std::int64_t>{d[1], i[1]} : std::pair<double, std::int64_t>{d[2], i[2]};
    }));
  }
  if (op == "Cast") {
    need(1);
    const memfmt::dtype to = dtype_from_onnx(static_cast<std::int32_t>(r.get_int("to", 0)), r.label());
    parameter out = folded_parameter(to, in[0]->shape, r.label());
    const std::size_t n = out.bytes.size() / memfmt::size_of(to);
    for (std::size_t i = 0; i < n; ++i)
      store_element(out, i, element_as_double(*in[0], i), element_as_int64(*in[0], i));
    return one(std::move(out));
  }
  if (op == "Size")
    return need(1), one(reshaped(int64_vector({memfmt::detail::checked_numel(in[0]->shape, "Size")}), {}));
  if (op == "Reshape") {
    need(2);
    return one(reshaped(*in[0], reshape_target(r, in[0]->shape, int64_values(*in[1]), r.get_int("allowzero", 0) != 0)));
  }
  if (op == "Flatten") {
    need(1);
    const std::size_t rank = in[0]->shape.size();
    const auto axis = static_cast<std::size_t>(normalize_axis(r, r.get_int("axis", 1), rank, true));
    std::int64_t a = 1, b = 1;
    for (std::size_t d = 0; d < rank; ++d) (d < axis ? a : b) *= in[0]->shape[d];
    return one(reshaped(*in[0], {a, b}));
  }
  if (op == "Unsqueeze") {
    need(1);
    std::vector<std::int64_t> axes = axes_of(r, in, opset);
    const std::size_t rank = in[0]->shape.size() + axes.size();
    for (auto& a : axes) a = normalize_axis(r, a, rank);
    std::sort(axes.begin(), axes.end());
    // Inserted in increasing order, each axis is at most the rank so far, if no axis repeats (found
    // by fuzz_onnx_import's structure-aware mutator: axes [1, 1] of a scalar inserted past the end).
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
      r.fail(errc::invalid_argument,
             "Unsqueeze axes " + memfmt::detail::dims_to_string(axes_of(r, in, opset)) + " name an axis twice");
    shape_t s = in[0]->shape;
    for (std::int64_t a : axes) s.insert(s.begin() + a, 1);
    return one(reshaped(*in[0], s));
  }
  if (op == "Squeeze") {
    need(1);
    std::vector<std::int64_t> axes = axes_of(r, in, opset);
    for (auto& a : axes) a = normalize_axis(r, a, in[0]->shape.size());
    shape_t s;
    for (std::size_t d = 0; d < in[0]->shape.size(); ++d) {
      const bool listed = std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(d)) != axes.end();
      if (listed && in[0]->shape[d] != 1)
        r.fail(errc::invalid_argument, "Squeeze axis " + std::to_string(d) + " of " +
                                           memfmt::detail::dims_to_string(in[0]->shape) + " is not 1");
      if (!(listed || (axes.empty() && in[0]->shape[d] == 1))) s.push_back(in[0]->shape[d]);
    }
    return one(reshaped(*in[0], s));
  }
  if (op == "Concat") {
    need(1);
    const std::size_t rank = in[0]->shape.size();
    const auto axis = static_cast<std::size_t>(normalize_axis(r, r.get_int("axis", 0), rank));
    shape_t s = in[0]->shape;
    s[axis] = 0;
    for (const parameter* p : in) {
      if (!p || p->shape.size() != rank || p->type != in[0]->type)
        r.fail(errc::shape_mismatch, "Concat inputs differ in rank or dtype");
      for (std::size_t d = 0; d < rank; ++d)
        if (d != axis && p->shape[d] != in[0]->shape[d])
          r.fail(errc::shape_mismatch, "Concat input " + memfmt::detail::dims_to_string(p->shape) + " does not match " +
                                           memfmt::detail::dims_to_string(in[0]->shape) + " outside axis " +
                                           std::to_string(axis));
      s[axis] += p->shape[axis];
    }
    parameter out = folded_parameter(in[0]->type, s, r.label());
    std::int64_t outer = 1;
    for (std::size_t d = 0; d < axis; ++d) outer *= s[d];
    std::size_t o = 0;
    for (std::int64_t k = 0; k < outer; ++k)
      for (const parameter* p : in) {
        const std::size_t block = p->bytes.size() / static_cast<std::size_t>(std::max<std::int64_t>(outer, 1));
        if (block) std::memcpy(out.bytes.data() + o, p->bytes.data() + static_cast<std::size_t>(k) * block, block);
        o += block;
      }
    return one(std::move(out));
  }
  if (op == "Gather") {
    need(2);
    const shape_t& ds = in[0]->shape;
    if (ds.empty()) r.fail(errc::invalid_argument, "Gather of a scalar");
    const auto axis = static_cast<std::size_t>(normalize_axis(r, r.get_int("axis", 0), ds.size()));
    std::vector<std::int64_t> indices = int64_values(*in[1]);
    for (auto& i : indices) {
      if (i < -ds[axis] || i >= ds[axis])
        r.fail(errc::invalid_argument,
               "Gather index " + std::to_string(i) + " is out of range for dim " + std::to_string(ds[axis]));
      if (i < 0) i += ds[axis];
    }
    shape_t s(ds.begin(), ds.begin() + static_cast<std::ptrdiff_t>(axis));
    s.insert(s.end(), in[1]->shape.begin(), in[1]->shape.end());
    s.insert(s.end(), ds.begin() + static_cast<std::ptrdiff_t>(axis) + 1, ds.end());
    std::int64_t inner = 1;
    for (std::size_t d = axis + 1; d < ds.size(); ++d) inner *= ds[d];
    const auto ni = static_cast<std::int64_t>(indices.size());
    return one(gather_elements(*in[0], s, r.label(), [&](std::size_t k) {
      const auto kk = static_cast<std::int64_t>(k);
      const std::int64_t outer = kk / (ni * inner), j = (kk / inner) % ni, w = kk % inner;
      return static_cast<std::size_t>((outer * ds[axis] + indices[static_cast<std::size_t>(j)]) * inner + w);
    }));
  }
  if (op == "Slice") {
    need(1);
    const shape_t& ds = in[0]->shape;
    const slice_spec sp = read_slice(r, in, ds.size(), opset);
    std::vector<std::vector<std::int64_t>> take(ds.size());
    for (std::size_t d = 0; d < ds.size(); ++d) {
      take[d].resize(static_cast<std::size_t>(ds[d]));
      std::iota(take[d].begin(), take[d].end(), 0);
    }
    for (std::size_t i = 0; i < sp.axes.size(); ++i) {
      const auto a = static_cast<std::size_t>(sp.axes[i]);
      take[a] = slice_indices(ds[a], sp.starts[i], sp.ends[i], sp.steps[i]);
    }
    shape_t s(ds.size());
    for (std::size_t d = 0; d < ds.size(); ++d) s[d] = static_cast<std::int64_t>(take[d].size());
    const shape_t in_strides = row_major_strides(ds), out_strides = row_major_strides(s);
    return one(gather_elements(*in[0], s, r.label(), [&](std::size_t k) {
      std::int64_t off = 0, rem = static_cast<std::int64_t>(k);
      for (std::size_t d = 0; d < s.size(); ++d) {
        off += take[d][static_cast<std::size_t>(rem / out_strides[d])] * in_strides[d];
        rem %= out_strides[d];
      }
      return static_cast<std::size_t>(off);
    }));
  }
  if (op == "Transpose") {
    need(1);
    const shape_t& ds = in[0]->shape;
    const std::vector<std::int64_t> perm = transpose_perm(r, ds.size());
    shape_t s(ds.size());
    for (std::size_t d = 0; d < ds.size(); ++d) s[d] = ds[static_cast<std::size_t>(perm[d])];
    const shape_t in_strides = row_major_strides(ds), out_strides = row_major_strides(s);
    return one(gather_elements(*in[0], s, r.label(), [&](std::size_t k) {
      std::int64_t off = 0, rem = static_cast<std::int64_t>(k);
      for (std::size_t d = 0; d < s.size(); ++d) {
        off += (rem / out_strides[d]) * in_strides[static_cast<std::size_t>(perm[d])];
        rem %= out_strides[d];
      }
      return static_cast<std::size_t>(off);
    }));
  }
  if (op == "Expand") {
    need(2);
    const shape_t s = broadcast_shapes(r, in[0]->shape, int64_values(*in[1]));
    return one(
        gather_elements(*in[0], s, r.label(), [&, idx = shape_t(s.size(), 0), first = true](std::size_t) mutable {
          if (!first) next_index(idx, s);
          first = false;
          return broadcast_offset(in[0]->shape, s, idx);
        }));
  }
  if (op == "ConstantOfShape") {
    need(1);
    parameter value = folded_parameter(memfmt::dtype::float32, {1}, r.label());
    if (const auto* t = r.get_tensor("value")) value = to_parameter(*t, r.label());
    if (value.bytes.size() != memfmt::size_of(value.type))
      r.fail(errc::invalid_argument, "ConstantOfShape value must hold one element");
    const shape_t s = int64_values(*in[0]);
    return one(gather_elements(value, s, r.label(), [](std::size_t) { return std::size_t{0}; }));
  }
  if (op == "Range") {
    need(3);
    const bool is_int = !memfmt::is_floating(in[0]->type);
    const double start = element_as_double(*in[0], 0), limit = element_as_double(*in[1], 0),
                 delta = element_as_double(*in[2], 0);
    if (delta == 0.0) r.fail(errc::invalid_argument, "Range delta 0");
    const auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((limit - start) / delta)));
    parameter out = folded_parameter(in[0]->type, {n}, r.label());
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = start + static_cast<double>(i) * delta;
      store_element(out, static_cast<std::size_t>(i), v,
                    is_int ? element_as_int64(*in[0], 0) + i * element_as_int64(*in[2], 0) : 0);
    }
    return one(std::move(out));
  }
  return std::nullopt;
}

}  // namespace memfmt::onnx::detail
