// Compile-fail cases. CTest compiles this file once with no case selected (must compile) and once
// per MEMFMT_CF_<case> (must not compile). Each case is a mistake the type system must catch.
#include "memfmt/dtype.hpp"
#include "memfmt/format/layout.hpp"
#include "memfmt/tensor/host_tensor.hpp"
#include "memfmt/tensor/relabel.hpp"
#include "memfmt/tensor/tensor_view.hpp"

using namespace memfmt;

void take_nhwc(nhwc_view<const float>) {}
void take_nchw(nchw_view<float>) {}
void take_ndhwc(ndhwc_view<float>) {}

int main() {
  float buf[120] = {};
  nchw_view<float> a(buf, {2, 3, 4, 5});
  nhwc_view<float> b(buf, {2, 3, 4, 5});
  take_nchw(a);
  take_nhwc(b);
#if defined(MEMFMT_CF_VIEW_NCHW_TO_NHWC)
  take_nhwc(a);  // an NCHW view where NHWC is expected
#elif defined(MEMFMT_CF_VIEW_NHWC_TO_NCHW)
  nchw_view<float> c = b;
  (void)c;
#elif defined(MEMFMT_CF_VIEW_2D_TO_3D)
  take_ndhwc(b);
#elif defined(MEMFMT_CF_CONST_TO_MUTABLE)
  nchw_view<const float> k = a;
  take_nchw(k);
#elif defined(MEMFMT_CF_HOST_TENSOR_OTHER_FORMAT)
  host_tensor<float, nchw> t({1, 2, 3, 4});
  take_nhwc(t);
#elif defined(MEMFMT_CF_RELABEL_ACROSS_RANK)
  (void)relabel<ndhwc>(b);
#elif defined(MEMFMT_CF_LAYOUT_WRONG_ARITY)
  (void)layout<nchw>::packed({2, 3, 4, 5})(1, 2, 3);
#elif defined(MEMFMT_CF_DTYPE_OF_UNSUPPORTED)
  (void)dtype_of_v<long double>;
#elif defined(MEMFMT_CF_LAYOUT_NOT_A_FORMAT)
  layout<int> bad;
  (void)bad;
#endif
  return 0;
}
