// memfmt quick start: typed formats, an explicit conversion, a checked view of foreign memory and a
// zero-copy relabel for an ambiguous shape. Prints what it does; exits 1 if any check fails.
#include <memfmt/memfmt.hpp>

#include <cstdio>
#include <string>

using namespace memfmt;

int main() {
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) std::printf("quickstart: FAILED: %s\n", what);
    failures += ok ? 0 : 1;
  };

  // An activation in PyTorch's default layout. Logical dimensions are always N, C, H, W.
  host_tensor<float, nchw> x({2, 3, 4, 5});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(i);

  // A channels-last copy: converting is explicit, and the type says which layout a buffer holds.
  host_tensor<float, nhwc> y(x.extents());
  convert(x.const_view(), y.view());
  // nhwc_view<float> oops = x.view();   // does not compile: an NCHW view is not an NHWC view
  check(y(0, 1, 2, 3) == x(0, 1, 2, 3), "same logical element in both formats");
  std::printf("element (0, 1, 2, 3) is at offset %lld in NCHW and %lld in NHWC\n",
              static_cast<long long>(x.mapping()(0, 1, 2, 3)), static_cast<long long>(y.mapping()(0, 1, 2, 3)));

  // Memory from elsewhere (PyTorch, DLPack, a raw pointer with strides) is checked against the
  // format you ask for. These strides are channels-last, so an NHWC view is granted...
  float* foreign = y.data();
  nhwc_view<float> v = view_as<nhwc>(foreign, {2, 3, 4, 5}, {60, 1, 15, 3});
  check(v(1, 2, 3, 4) == x(1, 2, 3, 4), "view_as<nhwc> reads the converted data");
  // ...and an NCHW view is refused with an error that names the sizes and strides.
  bool refused = false;
  try {
    (void)view_as<nchw>(foreign, {2, 3, 4, 5}, {60, 1, 15, 3});
  } catch (const memfmt::error& e) {
    refused = e.code() == errc::format_mismatch && std::string(e.what()).find("[60, 1, 15, 3]") != std::string::npos;
    std::printf("refused as expected: %s\n", e.what());
  }
  check(refused, "view_as<nchw> of channels-last strides throws format_mismatch naming the strides");

  // C == 1: both layouts are the same bytes, so the format is relabelled without a copy.
  host_tensor<float, nchw> mask({2, 1, 4, 5});
  nhwc_view<float> m = relabel<nhwc>(mask.view());
  check(&m(1, 0, 3, 4) == &mask(1, 0, 3, 4), "relabel keeps every element's address");

  std::puts(failures == 0 ? "quickstart: ok" : "quickstart: FAILED");
  return failures == 0 ? 0 : 1;
}
