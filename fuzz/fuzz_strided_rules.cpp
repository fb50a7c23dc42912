// Fuzz target: the stride classifier (strided/classify.hpp, format_requests.hpp) and the operator
// rules (strided/op_rules.hpp). Properties, besides "no crash, no sanitizer report, only
// memfmt::error": the predicates agree with enumerating every element's offset; a fresh tensor's
// strides (dense_strides, empty_like, every operator's output) are non-negative, dense and
// non-overlapping; output sizes follow the broadcast / cat / convolution formulas.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/detail/checked.hpp"
#include "memfmt/strided/classify.hpp"
#include "memfmt/strided/format_requests.hpp"
#include "memfmt/strided/op_rules.hpp"

namespace {

using memfmt::memory_format;
using memfmt::strided_desc;
using memfmt_fuzz::dims;
using memfmt_fuzz::require;

constexpr std::int64_t brute_limit = 2048;

const std::int64_t large_values[] = {
    std::int64_t{1} << 31, std::int64_t{1} << 32, std::int64_t{1} << 40, std::int64_t{1} << 62, INT64_MAX,
    INT64_MAX - 1};

std::int64_t pick_size(FuzzedDataProvider& in) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) return in.PickValueInArray(large_values);
  return in.ConsumeIntegralInRange<std::int64_t>(0, 5);
}
std::int64_t pick_stride(FuzzedDataProvider& in) {
  const int kind = in.ConsumeIntegralInRange<int>(0, 31);
  if (kind == 0) return in.PickValueInArray(large_values);
  if (kind == 1) return -in.ConsumeIntegralInRange<std::int64_t>(1, 3);
  return in.ConsumeIntegralInRange<std::int64_t>(0, 70);
}

// Strides that are a dense layout of `sizes` in a random dimension order (what real tensors
// mostly have), or arbitrary ones.
dims pick_strides(FuzzedDataProvider& in, const dims& sizes) {
  dims strides(sizes.size());
  if (in.ConsumeBool()) {
    for (auto& s : strides) s = pick_stride(in);
    return strides;
  }
  std::vector<std::size_t> order(sizes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (std::size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[in.ConsumeIntegralInRange<std::size_t>(0, i - 1)]);
  std::int64_t next = 1;
  for (auto d : order) {
    strides[d] = next;
    if (memfmt::detail::mul_overflows(next, sizes[d] > 1 ? sizes[d] : 1, &next)) next = 1;
  }
  return strides;
}

strided_desc pick_tensor(FuzzedDataProvider& in, std::size_t rank) {
  strided_desc t;
  for (std::size_t i = 0; i < rank; ++i) t.sizes.push_back(pick_size(in));
  t.strides = pick_strides(in, t.sizes);
  return t;
}

bool small_strides(const dims& strides) {
  for (auto s : strides)
    if (s < 0 || s >= (std::int64_t{1} << 40)) return false;
  return true;
}

bool brute_dense_in_order(const dims& sizes, const dims& strides, const std::vector<std::size_t>& order) {
  bool ok = true;
  memfmt_fuzz::for_each_offset(sizes, strides, [&](const dims& c, std::int64_t off) {
    ok = ok && off == memfmt_fuzz::linear_index(sizes, c, order);
  });
  return ok;
}

// A fresh tensor's strides: non-negative, and (when enumerable) every element exactly once.
// `keeps_input` for the requests that keep an input's strides where they address nothing (size-1
// dimensions, empty tensors), which may be anything the input had.
void expect_fresh(const dims& sizes, const dims& strides, const char* what, bool keeps_input = false) {
  require(sizes.size() == strides.size(), std::string(what) + ": rank of sizes and strides differ");
  const bool empty = memfmt::detail::has_zero_size(sizes);
  for (std::size_t d = 0; d < sizes.size(); ++d)
    if (strides[d] < 0 && !(keeps_input && (empty || sizes[d] == 1)))
      memfmt_fuzz::property_failed(std::string(what) + ": negative stride, " + memfmt_fuzz::describe(sizes, strides));
  const std::int64_t n = memfmt_fuzz::small_numel(sizes, brute_limit);
  if (n > 0)
    require(memfmt_fuzz::offsets_are_a_permutation(sizes, strides, n),
            std::string(what) + ": not dense and non-overlapping, " + memfmt_fuzz::describe(sizes, strides));
  require(memfmt::is_non_overlapping_and_dense(strided_desc{sizes, strides}),
          std::string(what) + ": is_non_overlapping_and_dense says no, " + memfmt_fuzz::describe(sizes, strides));
}

void check_classifier(const strided_desc& t) {
  const auto rank = t.sizes.size();
  const bool cont = memfmt::is_contiguous(t);
  const bool cl = memfmt::is_contiguous(t, memory_format::channels_last);
  const bool cl3 = memfmt::is_contiguous(t, memory_format::channels_last_3d);
  const bool nod = memfmt::is_non_overlapping_and_dense(t);
  memfmt::suggest_memory_format(t);
  memfmt::suggest_memory_format(t, true);
  const std::int64_t n = memfmt_fuzz::small_numel(t.sizes, brute_limit);
  if (n >= 0 && small_strides(t.strides)) {
    const std::string where = memfmt_fuzz::describe(t.sizes, t.strides);
    std::vector<std::size_t> c_order(rank);
    for (std::size_t i = 0; i < rank; ++i) c_order[i] = i;
    require(cont == (n == 0 || brute_dense_in_order(t.sizes, t.strides, c_order)), "is_contiguous, " + where);
    if (n > 0 && rank == 4)
      require(cl == brute_dense_in_order(t.sizes, t.strides, {0, 2, 3, 1}), "channels_last, " + where);
    if (n > 0 && rank == 5)
      require(cl3 == brute_dense_in_order(t.sizes, t.strides, {0, 2, 3, 4, 1}), "channels_last_3d, " + where);
    require(nod == (n == 0 || memfmt_fuzz::offsets_are_a_permutation(t.sizes, t.strides, n)),
            "is_non_overlapping_and_dense, " + where);
  }
  for (auto f : memfmt::all_memory_formats) {
    try {
      const auto s = memfmt::dense_strides(t.sizes, f);
      expect_fresh(t.sizes, s, "dense_strides");
      if (n != 0) require(memfmt::is_contiguous(strided_desc{t.sizes, s}, f), "dense_strides are not contiguous in f");
    } catch (const memfmt::error& e) {
      std::int64_t extent = 0;
      if (e.code() == memfmt::errc::overflow)
        require(memfmt::detail::dense_extent_overflows(t.sizes, &extent),
                std::string("spurious overflow: ") + e.what());
    }
    try {
      const auto s = memfmt::empty_like_strides(t, f);
      expect_fresh(t.sizes, s, "empty_like_strides", f == memory_format::preserve);
      if (f == memory_format::preserve && nod) require(s == t.strides, "empty_like(preserve) changed dense strides");
    } catch (const memfmt::error&) {
    }
    try {
      const auto r = memfmt::to_format(t, f);
      require(r.sizes == t.sizes, "to_format changed the sizes");
      if (r.alias) require(r.strides == t.strides, "to_format aliases with other strides");
      else expect_fresh(r.sizes, r.strides, "to_format");
    } catch (const memfmt::error&) {
    }
    try {
      const auto r = memfmt::contiguous_format(t, f);
      if (r.alias) require(r.strides == t.strides, "contiguous_format aliases with other strides");
      else expect_fresh(r.sizes, r.strides, "contiguous_format");
    } catch (const memfmt::error&) {
    }
  }
}

// Broadcast by the rule itself (independent of tensor_iterator_strides.hpp): right-aligned, each
// pair equal or one of them 1. Returns false when the shapes do not broadcast.
bool broadcast(const std::vector<strided_desc>& ops, dims* out) {
  std::size_t rank = 0;
  for (const auto& o : ops) rank = std::max(rank, o.sizes.size());
  dims shape(rank, 1);
  for (const auto& o : ops)
    for (std::size_t i = 0; i < o.sizes.size(); ++i) {
      auto& s = shape[rank - o.sizes.size() + i];
      const auto v = o.sizes[i];
      if (v == s || v == 1) continue;
      if (s != 1) return false;
      s = v;
    }
  *out = shape;
  return true;
}

void check_pointwise(FuzzedDataProvider& in) {
  const auto base = pick_tensor(in, in.ConsumeIntegralInRange<std::size_t>(0, 5));
  std::vector<strided_desc> ops;
  const int count = in.ConsumeIntegralInRange<int>(1, 3);
  for (int k = 0; k < count; ++k) {
    strided_desc op;
    const auto drop = in.ConsumeIntegralInRange<std::size_t>(0, base.sizes.size());
    for (std::size_t i = drop; i < base.sizes.size(); ++i) {
      const int kind = in.ConsumeIntegralInRange<int>(0, 7);
      op.sizes.push_back(kind == 0 ? 1 : kind == 1 ? pick_size(in) : base.sizes[i]);
    }
    op.strides = pick_strides(in, op.sizes);
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) op.type = memfmt::dtype::float64;
    ops.push_back(op);
  }
  try {
    const auto out = memfmt::pointwise_result(ops);
    dims shape;
    require(broadcast(ops, &shape) && out.sizes == shape, "pointwise_result: sizes are not the broadcast shape");
    expect_fresh(out.sizes, out.strides, "pointwise_result");
  } catch (const memfmt::error&) {
  }
}

void check_cat(FuzzedDataProvider& in) {
  const auto first = pick_tensor(in, in.ConsumeIntegralInRange<std::size_t>(1, 5));
  const auto dim = in.ConsumeIntegralInRange<std::int64_t>(-static_cast<std::int64_t>(first.sizes.size()),
                                                           static_cast<std::int64_t>(first.sizes.size()) - 1);
  const auto d = static_cast<std::size_t>(dim < 0 ? dim + static_cast<std::int64_t>(first.sizes.size()) : dim);
  std::vector<strided_desc> inputs{first};
  std::int64_t total = first.sizes[d];
  const int more = in.ConsumeIntegralInRange<int>(0, 3);
  for (int k = 0; k < more; ++k) {
    strided_desc t = first;
    t.sizes[d] = pick_size(in);
    t.strides = pick_strides(in, t.sizes);
    if (memfmt::detail::add_overflows(total, t.sizes[d], &total)) total = -1;
    inputs.push_back(t);
  }
  try {
    const auto out = memfmt::cat_result(inputs, dim);
    dims want = first.sizes;
    want[d] = total;
    require(out.sizes == want, "cat_result: sizes are not the inputs' along dim");
    expect_fresh(out.sizes, out.strides, "cat_result");
  } catch (const memfmt::error&) {
  }
}

void check_conv(FuzzedDataProvider& in) {
  const auto spatial = in.ConsumeIntegralInRange<std::size_t>(1, 3);
  const bool batched = in.ConsumeIntegralInRange<int>(0, 7) != 0;
  memfmt::torch_conv_args args;
  args.groups =
      in.ConsumeIntegralInRange<int>(0, 7) == 0 ? pick_size(in) : in.ConsumeIntegralInRange<std::int64_t>(1, 3);
  strided_desc w = pick_tensor(in, spatial + 2);
  strided_desc x = pick_tensor(in, spatial + (batched ? 2 : 1));
  if (in.ConsumeBool()) {  // mostly shapes that agree, so the rules run past their checks
    const std::size_t c = batched ? 1 : 0;
    if (memfmt::detail::mul_overflows(w.sizes[1], args.groups, &x.sizes[c])) x.sizes[c] = 1;
    if (args.groups > 0 && w.sizes[0] % args.groups != 0) w.sizes[0] = args.groups;
    x.strides = pick_strides(in, x.sizes);
    w.strides = pick_strides(in, w.sizes);
  }
  auto list = [&](std::int64_t lo, std::int64_t hi) {
    dims v(in.ConsumeBool() ? 1 : spatial);
    for (auto& e : v)
      e = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? pick_size(in) : in.ConsumeIntegralInRange(lo, hi);
    return v;
  };
  args.stride = list(1, 3);
  args.padding = list(0, 2);
  args.dilation = list(1, 2);
  const auto type = in.ConsumeBool() ? memfmt::dtype::float32 : memfmt::dtype::float64;
  x.type = w.type = type;
  memfmt::torch_conv_context ctx;
  ctx.num_threads = in.ConsumeIntegralInRange<int>(1, 4);
  try {
    const auto out = memfmt::conv_result(x, w, args, ctx);
    dims want;
    if (batched) want.push_back(x.sizes[0]);
    const std::size_t first_spatial = batched ? 2 : 1;
    want.push_back(x.sizes[first_spatial - 1] == 0 ? 0 : w.sizes[0]);
    for (std::size_t i = 0; i < spatial; ++i) {
      auto at = [&](const dims& v) { return v.size() == 1 ? v[0] : v[i]; };
      const auto kernel = at(args.dilation) * (w.sizes[2 + i] - 1) + 1;
      want.push_back((x.sizes[first_spatial + i] + 2 * at(args.padding) - kernel) / at(args.stride) + 1);
    }
    require(out.sizes == want, "conv_result: output sizes " + memfmt::detail::dims_to_string(out.sizes) +
                                   " differ from the formula's " + memfmt::detail::dims_to_string(want));
    expect_fresh(out.sizes, out.strides, "conv_result");
  } catch (const memfmt::error&) {
  }
}

void check_batch_norm(FuzzedDataProvider& in) {
  const auto t = pick_tensor(in, in.ConsumeIntegralInRange<std::size_t>(1, 5));
  try {
    const auto out = memfmt::batch_norm_result(t, in.ConsumeBool(), in.ConsumeBool());
    require(out.sizes == t.sizes, "batch_norm_result: sizes changed");
    if (memfmt::detail::has_zero_size(t.sizes)) return;  // cloned: the input's strides, any
    expect_fresh(out.sizes, out.strides, "batch_norm_result");
  } catch (const memfmt::error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: {
      const auto t = pick_tensor(in, in.ConsumeIntegralInRange<std::size_t>(0, 6));
      check_classifier(t);
      break;
    }
    case 1: check_pointwise(in); break;
    case 2: check_cat(in); break;
    case 3: check_conv(in); break;
    default: check_batch_norm(in); break;
  }
  return 0;
}
