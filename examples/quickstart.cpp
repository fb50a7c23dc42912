// memfmt quick start: typed formats, an explicit conversion, a checked view of foreign memory and a
// zero-copy relabel for an ambiguous shape. Exits 1 if any check fails. README.md shows this file
// from the first #include on (the example_quickstart_in_readme test keeps the two the same).
#include <memfmt/memfmt.hpp>

#include <cstdio>

using namespace memfmt;

int main() {
  bool ok = true;

  // An activation in PyTorch's default layout. Logical dimensions are always N, C, H, W.
  host_tensor<float, nchw> x({2, 3, 4, 5});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(i);

  // A channels-last copy: converting is explicit, and the type says which layout a buffer holds.
  host_tensor<float, nhwc> y(x.extents());
  convert(x.const_view(), y.view());
  // nhwc_view<float> oops = x.view();   // does not compile: an NCHW view is not an NHWC view
  ok &= y(0, 1, 2, 3) == x(0, 1, 2, 3) && y.mapping()(0, 1, 2, 3) != x.mapping()(0, 1, 2, 3);

  // Memory from elsewhere (PyTorch, DLPack, a raw pointer with strides) is checked against the
  // format you ask for: these strides are channels-last, so NHWC is granted and NCHW refused.
  nhwc_view<float> v = view_as<nhwc>(y.data(), {2, 3, 4, 5}, {60, 1, 15, 3});
  ok &= v(1, 2, 3, 4) == x(1, 2, 3, 4);
  ok &= !try_view_as<nchw>(y.data(), {2, 3, 4, 5}, {60, 1, 15, 3});  // view_as<nchw> throws, naming why

  // C == 1: both layouts are the same bytes, so the format is relabelled without a copy.
  host_tensor<float, nchw> mask({2, 1, 4, 5});
  nhwc_view<float> m = relabel<nhwc>(mask.view());
  ok &= &m(1, 0, 3, 4) == &mask(1, 0, 3, 4);

  std::puts(ok ? "quickstart: ok" : "quickstart: FAILED");
  return ok ? 0 : 1;
}
