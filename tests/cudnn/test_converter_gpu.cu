// cudnn::backend::convert through cuda_converter() (memfmt::cuda::convert's kernels) against the
// index arithmetic of the two formats, every element size, rank 4 and 5, both directions; group
// norm through cuda_group_norm() against the reference backend (group_norm_check.hpp's cases) and on
// an empty x;
// and both handed to the executor tests (kernel_converter.hpp). Skips without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include <memfmt/backends/cudnn/backend.hpp>
#include <memfmt/backends/cudnn/cuda_converter.cuh>
#include <memfmt/backends/cudnn/cuda_group_norm.cuh>
#include <memfmt/backends/cudnn/cuda_layer_kernels.cuh>

#include "../common/expect_error.hpp"
#include "group_norm_check.hpp"

#include "kernel_converter.hpp"

namespace memfmt_test {
memfmt::cudnn::format_converter kernel_converter() { return memfmt::cudnn::cuda_converter(); }
memfmt::cudnn::group_norm_kernels kernel_group_norm() { return memfmt::cudnn::cuda_group_norm(); }
memfmt::cudnn::layer_kernel_set kernel_layer_kernels() { return memfmt::cudnn::cuda_layer_kernels(); }
}  // namespace memfmt_test

namespace {

using namespace memfmt;

// Logical (n, c, position) of a packed tensor in either format, as an element index.
std::int64_t index_of(bool channels_last, std::int64_t n, std::int64_t c, std::int64_t s, std::int64_t C,
                      std::int64_t S) {
  return channels_last ? (n * S + s) * C + c : (n * C + c) * S + s;
}

template <class Word, class From, class To>
void check_conversion(cudnn::backend& be, const std::array<std::int64_t, From::rank>& e) {
  tensor_view<const Word, From> probe(nullptr, e);
  const std::int64_t N = e[0], C = e[1], S = probe.spatial_numel(), count = probe.numel();
  std::vector<Word> host(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) host[static_cast<std::size_t>(i)] = static_cast<Word>(i * 2654435761u);
  const std::size_t bytes = host.size() * sizeof(Word);
  void* src = be.allocate(bytes);
  void* dst = be.allocate(bytes);
  be.copy_in(src, host.data(), bytes);
  be.convert(tensor_view<const Word, From>(static_cast<const Word*>(src), e),
             tensor_view<Word, To>(static_cast<Word*>(dst), e));
  std::vector<Word> got(host.size());
  be.copy_out(got.data(), dst, bytes);
  be.deallocate(src, bytes);
  be.deallocate(dst, bytes);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t s = 0; s < S; ++s)
        ASSERT_EQ(got[static_cast<std::size_t>(index_of(To::channels_last, n, c, s, C, S))],
                  host[static_cast<std::size_t>(index_of(From::channels_last, n, c, s, C, S))])
            << sizeof(Word) << "-byte elements, n " << n << " c " << c << " position " << s;
}

template <class Word>
void check_every_shape(cudnn::backend& be) {
  check_conversion<Word, nchw, nhwc>(be, {2, 37, 9, 11});
  check_conversion<Word, nhwc, nchw>(be, {2, 37, 9, 11});
  check_conversion<Word, nchw, nhwc>(be, {1, 3, 64, 64});  // few channels: the narrow path
  check_conversion<Word, ncdhw, ndhwc>(be, {2, 16, 3, 5, 7});
  check_conversion<Word, ndhwc, ncdhw>(be, {2, 16, 3, 5, 7});
}

TEST(CudnnKernelConverter, EveryElementSizeAgainstTheIndexArithmetic) {
  if (cudnn::device_count() == 0) GTEST_SKIP() << "no CUDA device: the conversion kernels not run";
  cudnn::backend_options o;
  o.converter = cudnn::cuda_converter();
  cudnn::backend be(o);
  check_every_shape<std::uint8_t>(be);
  check_every_shape<std::uint16_t>(be);
  check_every_shape<std::uint32_t>(be);
  check_every_shape<std::uint64_t>(be);
}

// A host vector's copy in device memory (null for an empty vector), freed by the backend.
template <class V>
class device_copy {
 public:
  device_copy(cudnn::backend& be, const std::vector<V>& host) : be_(be), bytes_(host.size() * sizeof(V)) {
    ptr_ = be_.allocate(bytes_);
    be_.copy_in(ptr_, host.data(), bytes_);
  }
  device_copy(const device_copy&) = delete;
  device_copy& operator=(const device_copy&) = delete;
  ~device_copy() { be_.deallocate(ptr_, bytes_); }
  V* get() const { return static_cast<V*>(ptr_); }
  void copy_out(std::vector<V>& host) const { be_.copy_out(host.data(), ptr_, host.size() * sizeof(V)); }

 private:
  cudnn::backend& be_;
  std::size_t bytes_;
  void* ptr_ = nullptr;
};

// group_norm_check.hpp's cases through the backend's group_norm_forward / backward.
struct on_device {
  cudnn::backend& be;
  template <class T, class XF, class YF>
  void check(std::vector<std::int64_t> e, std::int64_t groups, double offset, bool params) const {
    namespace gnc = memfmt_test::group_norm;
    using P = gnc::param_t<T>;
    const memfmt::group_norm_params gp{groups, 1e-5};
    const auto forward = [&](gnc::io<T>& a) {
      a.y.assign(a.x.size(), T{});
      a.mean.assign(static_cast<std::size_t>(e[0] * groups), P{});
      a.invstd = a.mean;
      device_copy<T> x(be, a.x), y(be, a.y);
      device_copy<P> gamma(be, a.gamma), beta(be, a.beta), mean(be, a.mean), invstd(be, a.invstd);
      be.group_norm_forward(tensor_view<const T, XF>(x.get(), gnc::dims<XF>(e)),
                            tensor_view<T, YF>(y.get(), gnc::dims<YF>(e)), gamma.get(), beta.get(), mean.get(),
                            invstd.get(), gp);
      y.copy_out(a.y);
      mean.copy_out(a.mean);
      invstd.copy_out(a.invstd);
    };
    const auto backward = [&](gnc::io<T>& a) {
      a.dx.assign(a.x.size(), T{});
      a.dgamma.assign(params ? static_cast<std::size_t>(e[1]) : 0u, P{});
      a.dbeta = a.dgamma;
      device_copy<T> x(be, a.x), dy(be, a.dy), dx(be, a.dx);
      device_copy<P> gamma(be, a.gamma), mean(be, a.mean), invstd(be, a.invstd), dgamma(be, a.dgamma),
          dbeta(be, a.dbeta);
      be.group_norm_backward(tensor_view<const T, XF>(x.get(), gnc::dims<XF>(e)),
                             tensor_view<const T, YF>(dy.get(), gnc::dims<YF>(e)),
                             tensor_view<T, YF>(dx.get(), gnc::dims<YF>(e)), gamma.get(), mean.get(), invstd.get(),
                             dgamma.get(), dbeta.get(), gp);
      dx.copy_out(a.dx);
      dgamma.copy_out(a.dgamma);
      dbeta.copy_out(a.dbeta);
    };
    gnc::check<T, XF, YF>(e, groups, offset, params, forward, backward);
  }
};

TEST(CudnnGroupNormKernels, AgainstTheReferenceEveryTypeAndFormat) {
  if (cudnn::device_count() == 0) GTEST_SKIP() << "no CUDA device: the group norm kernels not run";
  cudnn::backend_options o;
  o.group_norm = cudnn::cuda_group_norm();
  cudnn::backend be(o);
  op_query q;
  q.op = layer_kind::group_norm;
  q.type = dtype::float16;
  q.format = format_family::channels_first;
  EXPECT_TRUE(be.support(q));
  const on_device run{be};
  memfmt_test::group_norm::check_all_cases<float>(run);
  memfmt_test::group_norm::check_all_cases<double>(run);
  memfmt_test::group_norm::check_all_cases<memfmt::half>(run);
  memfmt_test::group_norm::check_all_cases<memfmt::bfloat16>(run);
}

// An x with no elements (no samples, or no positions) calls no kernel: the forward leaves the
// statistics as they were; the backward reads none (null here) and sets dgamma and dbeta to zero,
// sums over nothing.
TEST(CudnnGroupNormKernels, EmptyXLaunchesNothingAndZeroesTheParameterGradients) {
  if (cudnn::device_count() == 0) GTEST_SKIP() << "no CUDA device: the group norm kernels not run";
  const cudnn::group_norm_kernels kernels = cudnn::cuda_group_norm();
  int calls = 0;
  cudnn::backend_options o;
  o.group_norm.forward = [&](const cudnn::group_norm_forward_args& a) {
    ++calls;
    kernels.forward(a);
  };
  o.group_norm.backward = [&](const cudnn::group_norm_backward_args& a) {
    ++calls;
    kernels.backward(a);
  };
  cudnn::backend be(o);
  const std::int64_t groups = 2;
  for (const std::array<std::int64_t, 4>& e : {std::array<std::int64_t, 4>{0, 4, 3, 3}, {2, 4, 0, 3}}) {
    const std::vector<float> stale_stats(static_cast<std::size_t>(e[0] * groups), 5.0f), stale_params(4, 7.0f);
    device_copy<float> x(be, {}), y(be, {}), mean(be, stale_stats), invstd(be, stale_stats), dgamma(be, stale_params),
        dbeta(be, stale_params);
    be.group_norm_forward(tensor_view<const float, nhwc>(x.get(), e), tensor_view<float, nhwc>(y.get(), e), nullptr,
                          nullptr, mean.get(), invstd.get(), group_norm_params{groups, 1e-5});
    be.group_norm_backward(tensor_view<const float, nchw>(x.get(), e), tensor_view<const float, nchw>(y.get(), e),
                           tensor_view<float, nchw>(y.get(), e), nullptr, nullptr, nullptr, dgamma.get(), dbeta.get(),
                           group_norm_params{groups, 1e-5});
    std::vector<float> got_stats(stale_stats.size()), got_dgamma(4), got_dbeta(4);
    mean.copy_out(got_stats);
    EXPECT_EQ(got_stats, stale_stats) << "N " << e[0];
    dgamma.copy_out(got_dgamma);
    dbeta.copy_out(got_dbeta);
    EXPECT_EQ(got_dgamma, std::vector<float>(4, 0.0f)) << "N " << e[0];
    EXPECT_EQ(got_dbeta, std::vector<float>(4, 0.0f)) << "N " << e[0];
  }
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Without the kernels the backend says so, and how to enable them, before any work.
TEST(CudnnGroupNormKernels, WithoutThemAClearError) {
  if (cudnn::device_count() == 0) GTEST_SKIP() << "no CUDA device: no backend to ask";
  cudnn::backend be;
  op_query q;
  q.op = layer_kind::group_norm;
  q.type = dtype::float32;
  EXPECT_FALSE(be.support(q));
  std::vector<float> host(2 * 4 * 3 * 3, 1.0f);
  device_copy<float> x(be, host), y(be, host), stats(be, std::vector<float>(4));
  const std::array<std::int64_t, 4> e{2, 4, 3, 3};
  const std::string msg = memfmt_test::error_message(
      [&] {
        be.group_norm_forward(tensor_view<const float, nhwc>(x.get(), e), tensor_view<float, nhwc>(y.get(), e), nullptr,
                              nullptr, stats.get(), stats.get(), group_norm_params{2, 1e-5});
      },
      errc::unsupported);
  EXPECT_NE(msg.find("cuda_group_norm()"), std::string::npos) << msg;
}

}  // namespace
