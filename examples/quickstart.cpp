// memfmt quick start: typed formats, an explicit conversion, a checked view of foreign memory,
// and a zero-copy relabel for an ambiguous shape. Exits non-zero if anything disagrees.
#include <memfmt/convert/convert.hpp>
#include <memfmt/memfmt.hpp>
#include <memfmt/tensor/from_strided.hpp>

#include <cstdio>

int main() {
  using namespace memfmt;

  // An activation in PyTorch's default layout. Logical dims are always N, C, H, W.
  host_tensor<float, nchw> x({2, 3, 4, 5});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(i);

  // Channels-last copy: converting is explicit, and the type says which layout a buffer holds.
  host_tensor<float, nhwc> y(x.extents());
  convert(x.const_view(), y.view());
  // nhwc_view<float> oops = x;   // does not compile: NCHW is not NHWC

  // Same logical element, different address.
  const bool same = y(1, 2, 3, 4) == x(1, 2, 3, 4);
  std::printf("x(1,2,3,4) = %g at offset %lld (NCHW), %lld (NHWC)\n", static_cast<double>(x(1, 2, 3, 4)),
              static_cast<long long>(x.mapping()(1, 2, 3, 4)), static_cast<long long>(y.mapping()(1, 2, 3, 4)));

  // Memory from elsewhere (PyTorch, DLPack, a raw pointer) is checked against the format you ask for.
  nhwc_view<float> v = view_as<nhwc>(y.data(), {2, 3, 4, 5}, {60, 1, 15, 3});
  try {
    (void)view_as<nchw>(y.data(), {2, 3, 4, 5}, {60, 1, 15, 3});
  } catch (const memfmt::error& e) {
    std::printf("as expected: %s\n", e.what());
  }

  // C == 1: both layouts are the same bytes, so the format can be relabelled without a copy.
  host_tensor<float, nchw> mask({2, 1, 4, 5});
  nhwc_view<float> m = relabel<nhwc>(mask.view());

  const bool ok = same && v(1, 2, 3, 4) == x(1, 2, 3, 4) && m.data() == mask.data();
  std::puts(ok ? "quickstart: ok" : "quickstart: MISMATCH");
  return ok ? 0 : 1;
}
