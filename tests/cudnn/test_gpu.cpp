// The cuDNN backend against the reference backend on a GPU: convolution forward (with bias, with
// and without channel padding), backward data, backward weights (with dbias), batch norm training,
// inference and backward, NCHW and NHWC, fp32 / fp16 / bf16 / fp64. Skips when there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <memfmt/backends/cudnn/backend.hpp>
#include <memfmt/backends/cudnn/channel_padding.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/tensor/host_tensor.hpp>

namespace {

using namespace memfmt;

class CudnnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudnn::device_count() == 0)
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none or fails): cuDNN GPU tests skipped";
  }
};

template <class T>
T from_float(float f) {
  return T(f);
}
template <>
float from_float<float>(float f) {
  return f;
}
template <class T>
double to_float(T v) {
  return static_cast<double>(static_cast<float>(v));
}
template <>
double to_float<double>(double v) {
  return v;
}

// Values exactly representable in bf16 and fp16, small enough that sums stay accurate.
template <class T>
void fill(T* p, std::int64_t n, std::uint32_t seed) {
  std::uint32_t s = seed;
  for (std::int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = from_float<T>(static_cast<float>(static_cast<int>((s >> 9) % 33) - 16) / 16.0f);
  }
}

// Device copy of a host array.
template <class T>
struct dev {
  T* p = nullptr;
  std::size_t n = 0;
  explicit dev(std::size_t count) : n(count) {
    cudnn::check_cuda(cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(n, 1) * sizeof(T)), "cudaMalloc");
  }
  dev(const T* host, std::size_t count) : dev(count) { upload(host); }
  ~dev() { cudaFree(p); }
  dev(const dev&) = delete;
  void upload(const T* host) {
    cudnn::check_cuda(cudaMemcpy(p, host, n * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<T> download() const {
    std::vector<T> h(n);
    cudnn::check_cuda(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return h;
  }
};

// A user allocator that records what the backend asks of it (every size, what is still held) and
// whether each pointer comes back with the size it was handed out with.
struct recording_allocator {
  std::map<void*, std::size_t> live;
  std::vector<std::size_t> sizes;
  std::size_t bad_frees = 0;

  cudnn::device_allocator make() {
    cudnn::device_allocator a;
    a.allocate = [this](std::size_t bytes) -> void* {
      void* p = nullptr;
      if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
      live[p] = bytes;
      sizes.push_back(bytes);
      return p;
    };
    a.deallocate = [this](void* p, std::size_t bytes) {
      const auto it = live.find(p);
      if (it == live.end() || it->second != bytes) ++bad_frees;
      else live.erase(it);
      cudaFree(p);
    };
    return a;
  }
};

template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-9;  // fp64 math: only summation order differs
  return std::is_same_v<T, float> ? 2e-3 : (std::is_same_v<T, half> ? 2e-2 : 8e-2);
}

// |got - want| <= tol * (1 + |want|) element-wise (TF32 / fp16 accumulation are allowed).
template <class A, class B>
void expect_close(const A* got, const B* want, std::int64_t n, double tol, const std::string& what) {
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double g = to_float(got[i]), w = to_float(want[i]);
    if (!(std::fabs(g - w) <= tol * (1.0 + std::fabs(w)))) {
      if (++bad <= 5) ADD_FAILURE() << what << " at " << i << ": cuDNN " << g << " vs reference " << w;
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

template <class T, class F>
void conv_case(cudnn::backend& be, std::array<std::int64_t, F::rank> xe, std::array<std::int64_t, F::rank> we,
               conv_params p) {
  const std::string what = std::string(F::name) + " " + std::string(to_string(dtype_of_v<T>)) + " x" +
                           memfmt::detail::dims_to_string(xe) + " w" + memfmt::detail::dims_to_string(we);
  SCOPED_TRACE(what);
  const auto ye = conv_output_extents(xe, we, p);
  host_tensor<T, F> x(xe), w(we), y(ye), dy(ye), dx(xe), dw(we), yref(ye), dxref(xe), dwref(we);
  fill(x.data(), x.numel(), 1u);
  fill(w.data(), w.numel(), 2u);
  fill(dy.data(), dy.numel(), 3u);
  std::vector<T> bias(static_cast<std::size_t>(we[0])), dbias(bias.size()), dbias_ref(bias.size());
  fill(bias.data(), static_cast<std::int64_t>(bias.size()), 4u);
  reference::backend ref;
  ref.conv_forward<T, F, F, F>(x.const_view(), w.const_view(), bias.data(), yref.view(), p);
  ref.conv_backward_data<T, F, F, F>(dy.const_view(), w.const_view(), dxref.view(), p);
  ref.conv_backward_weights<T, F, F, F>(x.const_view(), dy.const_view(), dwref.view(), dbias_ref.data(), p);

  dev<T> dx_in(x.data(), x.numel()), dw_in(w.data(), w.numel()), dy_in(dy.data(), dy.numel()),
      db(bias.data(), bias.size()), dout(y.numel()), ddx(dx.numel()), ddw(dw.numel()), ddb(bias.size());
  tensor_view<const T, F> vx(dx_in.p, x.mapping()), vw(dw_in.p, w.mapping()), vdy(dy_in.p, dy.mapping());
  be.conv_forward<T, F, F, F>(vx, vw, db.p, tensor_view<T, F>(dout.p, y.mapping()), p);
  auto hy = dout.download();
  expect_close(hy.data(), yref.data(), yref.numel(), tolerance<T>(), "conv_forward " + what);
  be.conv_backward_data<T, F, F, F>(vdy, vw, tensor_view<T, F>(ddx.p, dx.mapping()), p);
  auto hdx = ddx.download();
  expect_close(hdx.data(), dxref.data(), dxref.numel(), tolerance<T>(), "conv_backward_data " + what);
  be.conv_backward_weights<T, F, F, F>(vx, vdy, tensor_view<T, F>(ddw.p, dw.mapping()), ddb.p, p);
  auto hdw = ddw.download();
  auto hdb = ddb.download();
  expect_close(hdw.data(), dwref.data(), dwref.numel(), tolerance<T>() * 4, "conv_backward_weights " + what);
  expect_close(hdb.data(), dbias_ref.data(), static_cast<std::int64_t>(dbias_ref.size()), tolerance<T>() * 4,
               "dbias " + what);
  EXPECT_FALSE(be.last_engine().empty());
}

template <class T>
void conv_all(cudnn::backend& be) {
  conv_params p;
  p.padding = {1, 1, 1};
  conv_case<T, nhwc>(be, {2, 8, 9, 9}, {16, 8, 3, 3}, p);
  conv_case<T, nchw>(be, {2, 8, 9, 9}, {16, 8, 3, 3}, p);
  conv_params s2 = p;
  s2.stride = {2, 2, 2};
  conv_case<T, nhwc>(be, {2, 3, 16, 16}, {8, 3, 3, 3}, s2);  // 3-channel stem
  conv_params g = p;
  g.groups = 4;
  conv_case<T, nhwc>(be, {1, 16, 8, 8}, {16, 4, 3, 3}, g);
  conv_params dw = p;  // depthwise: the plan search that once died of SIGFPE in cuDNN (no device given)
  dw.groups = 16;
  conv_case<T, nhwc>(be, {2, 16, 8, 8}, {16, 1, 3, 3}, dw);
  conv_case<T, nchw>(be, {2, 16, 8, 8}, {16, 1, 3, 3}, dw);
  conv_case<T, ndhwc>(be, {1, 8, 4, 6, 6}, {8, 8, 3, 3, 3}, p);
}

TEST_F(CudnnGpu, ConvMatchesReferenceFp32) {
  cudnn::backend be;
  conv_all<float>(be);
  EXPECT_GT(be.cache().size(), 0u);
}
TEST_F(CudnnGpu, ConvMatchesReferenceFp16) {
  cudnn::backend be;
  conv_all<half>(be);
}
TEST_F(CudnnGpu, ConvMatchesReferenceBf16) {
  cudnn::backend be;
  conv_all<bfloat16>(be);
}

TEST_F(CudnnGpu, ConvMatchesReferenceFp64) {
  cudnn::backend be;
  conv_all<double>(be);
}

// The padded backend pads x and w (both through its scratch buffer, taken from the user allocator)
// and convolves the padded tensors; the result is the reference's. The scratch is read back: x and w
// with zero channels up to 8, where the unpadded backend asks for no scratch at all.
TEST_F(CudnnGpu, ChannelPaddingLeavesTheResultUnchanged) {
  recording_allocator padded_mem, plain_mem;
  cudnn::backend_options o;
  o.pad_channels_for_tensor_cores = true;
  o.allocator = padded_mem.make();
  cudnn::backend_options po;
  po.allocator = plain_mem.make();
  cudnn::backend padded(o), plain(po);
  conv_params p;
  p.stride = {2, 2, 2};
  p.padding = {3, 3, 3};
  host_tensor<half, nhwc> x({2, 3, 32, 32}), w({16, 3, 7, 7}), yref(conv_output_extents(x.extents(), w.extents(), p));
  fill(x.data(), x.numel(), 5u);
  fill(w.data(), w.numel(), 6u);
  reference::backend().conv_forward<half, nhwc, nhwc, nhwc>(x.const_view(), w.const_view(), nullptr, yref.view(), p);
  dev<half> dx(x.data(), x.numel()), dw(w.data(), w.numel()), dy1(yref.numel()), dy2(yref.numel());
  padded.conv_forward<half, nhwc, nhwc, nhwc>(nhwc_view<const half>(dx.p, x.mapping()),
                                              nhwc_view<const half>(dw.p, w.mapping()), nullptr,
                                              nhwc_view<half>(dy1.p, yref.mapping()), p);
  plain.conv_forward<half, nhwc, nhwc, nhwc>(nhwc_view<const half>(dx.p, x.mapping()),
                                             nhwc_view<const half>(dw.p, w.mapping()), nullptr,
                                             nhwc_view<half>(dy2.p, yref.mapping()), p);
  auto h1 = dy1.download(), h2 = dy2.download();
  expect_close(h1.data(), yref.data(), yref.numel(), tolerance<half>(), "padded stem vs reference");
  expect_close(h2.data(), yref.data(), yref.numel(), tolerance<half>(), "unpadded stem vs reference");

  // The padded copies: x at the scratch's start, w at the next 256-byte boundary.
  const std::size_t x_bytes = static_cast<std::size_t>(x.numel()) / 3 * 8 * sizeof(half);
  const std::size_t w_at = (x_bytes + 255) / 256 * 256;
  const std::size_t w_bytes = static_cast<std::size_t>(w.numel()) / 3 * 8 * sizeof(half);
  const std::size_t scratch_bytes = w_at + (w_bytes + 255) / 256 * 256;
  void* scratch = nullptr;
  for (const auto& [ptr, bytes] : padded_mem.live)
    if (bytes == scratch_bytes) scratch = ptr;
  ASSERT_NE(scratch, nullptr) << "the padded backend allocated no scratch of " << scratch_bytes
                              << " bytes (x and w padded to 8 channels)";
  for (const auto& [ptr, bytes] : plain_mem.live) EXPECT_NE(bytes, scratch_bytes) << "the unpadded backend padded too";
  host_tensor<half, nhwc> xp(cudnn::with_channels(x.extents(), 8)), wp(cudnn::with_channels(w.extents(), 8)),
      xp_ref(xp.extents()), wp_ref(wp.extents());
  padded.synchronize();
  cudnn::check_cuda(cudaMemcpy(xp.data(), scratch, x_bytes, cudaMemcpyDeviceToHost), "download padded x");
  cudnn::check_cuda(cudaMemcpy(wp.data(), static_cast<unsigned char*>(scratch) + w_at, w_bytes, cudaMemcpyDeviceToHost),
                    "download padded w");
  cudnn::pad_channels_reference<half, nhwc>(x.const_view(), xp_ref.view());
  cudnn::pad_channels_reference<half, nhwc>(w.const_view(), wp_ref.view());
  expect_close(xp.data(), xp_ref.data(), xp.numel(), 0.0, "padded x in the scratch");
  expect_close(wp.data(), wp_ref.data(), wp.numel(), 0.0, "padded w in the scratch");
}

// What each batch-norm call must do, as cuDNN 9.19 on an H100 did it: run and match the reference,
// or be refused (errc::unsupported) with a message naming the reason. cuDNN runs its pointwise
// steps (batch-norm inference, the residual / relu epilogue and its gradient) on channels-last
// tensors only, and has no float64 batch norm at all (training and backward: no engine config;
// the pointwise steps: runtime compilation fails). A tensor with one position is channels-last
// whatever its format. A call that departs from the table fails either way: a new refusal, or a
// refusal that no longer happens (then this table and the README's limitations change with it).
enum class bn_op { training, inference, backward };

struct bn_expectation {
  bool float64;
  bool channels_first;  // a channels-first tensor with more than one position
  bn_op op;
  bool epilogue;                     // residual and/or relu
  std::vector<std::string> refusal;  // words the refusal names; empty: the call must run
  bool may_run = false;              // the refusal depends on the shape: running is right too
};

const std::vector<bn_expectation>& bn_expectations() {
  const std::vector<std::string> runs;
  const std::vector<std::string> no_fp64{"no engine supports", "float64"};
  static const std::vector<bn_expectation> table = {
      // 16- and 32-bit types, channels-last: everything runs.
      {false, false, bn_op::training, false, runs},
      {false, false, bn_op::training, true, runs},
      {false, false, bn_op::inference, false, runs},
      {false, false, bn_op::inference, true, runs},
      {false, false, bn_op::backward, false, runs},
      {false, false, bn_op::backward, true, runs},
      // Channels-first: the norm itself runs; the pointwise steps are refused before anything runs
      // (training's fused epilogue for some shapes only).
      {false, true, bn_op::training, false, runs},
      // Training's fused residual / relu epilogue: cuDNN 9.19 on an H100 ran it for [2, 8, 5, 7] and
      // found no engine for [3, 24, 9, 11].
      {false, true, bn_op::training, true, {"batch_norm_forward (residual / relu)", "channels-first"}, true},
      {false, true, bn_op::inference, false, {"batch_norm_forward_inference", "channels-first"}},
      {false, true, bn_op::inference, true, {"batch_norm_forward_inference", "channels-first"}},
      {false, true, bn_op::backward, false, runs},
      {false, true, bn_op::backward, true, {"batch_norm_backward (relu / residual gradient)", "channels-first"}},
      // float64: no engine for any of it.
      {true, false, bn_op::training, false, no_fp64},
      {true, false, bn_op::training, true, no_fp64},
      {true, false, bn_op::inference, false, no_fp64},
      {true, false, bn_op::inference, true, no_fp64},
      {true, false, bn_op::backward, false, no_fp64},
      {true, false, bn_op::backward, true, no_fp64},
      {true, true, bn_op::training, false, no_fp64},
      {true, true, bn_op::training, true, no_fp64},
      {true, true, bn_op::inference, false, no_fp64},
      {true, true, bn_op::inference, true, no_fp64},
      {true, true, bn_op::backward, false, no_fp64},
      {true, true, bn_op::backward, true, no_fp64},
  };
  return table;
}

template <class T, class F>
const bn_expectation& expected_bn(const std::array<std::int64_t, F::rank>& e, bn_op op, bool epilogue) {
  std::int64_t positions = 1;
  for (int d = 2; d < F::rank; ++d) positions *= e[static_cast<std::size_t>(d)];
  const bool fp64 = std::is_same_v<T, double>, channels_first = !F::channels_last && positions > 1;
  for (const auto& x : bn_expectations())
    if (x.float64 == fp64 && x.channels_first == channels_first && x.op == op && x.epilogue == epilogue) return x;
  throw std::logic_error("no batch-norm expectation for this case");
}

// Runs `call` and checks it against the table; returns whether it ran (then the caller compares the
// results with the reference).
template <class Fn>
bool runs_as_expected(const bn_expectation& want, const std::string& what, Fn&& call) {
  try {
    call();
  } catch (const memfmt::error& err) {
    const std::string msg = err.what();
    if (want.refusal.empty()) {
      ADD_FAILURE() << what << " must run, but was refused: " << msg;
      return false;
    }
    EXPECT_EQ(err.code(), errc::unsupported) << what << ": " << msg;
    for (const auto& word : want.refusal)
      EXPECT_NE(msg.find(word), std::string::npos) << what << ": the refusal should name '" << word << "': " << msg;
    return false;
  }
  if (!want.refusal.empty() && !want.may_run)
    ADD_FAILURE() << what << " ran, but cuDNN 9.19 on an H100 refused it (" << want.refusal.front()
                  << "): update the expectation table and the README's limitations";
  return true;
}

template <class T, class F>
void bn_case(cudnn::backend& be, std::array<std::int64_t, F::rank> e, bool residual, bool relu) {
  using P = param_t<T>;
  SCOPED_TRACE(std::string(F::name) + " " + std::string(to_string(dtype_of_v<T>)) + (residual ? " +res" : "") +
               (relu ? " +relu" : ""));
  const auto c = static_cast<std::size_t>(e[1]);
  host_tensor<T, F> x(e), r(e), dy(e), y(e), yref(e), dxref(e), dresref(e), yinf_ref(e);
  fill(x.data(), x.numel(), 7u);
  fill(r.data(), r.numel(), 8u);
  fill(dy.data(), dy.numel(), 9u);
  std::vector<P> gamma(c), beta(c), rm(c, 0.5f), rv(c, 2.0f), sm(c), si(c), dg(c), dbt(c);
  for (std::size_t i = 0; i < c; ++i) {
    gamma[i] = P(1) + P(i) / P(8);
    beta[i] = P(i) / P(4) - P(1);
  }
  std::vector<P> rm_ref = rm, rv_ref = rv, sm_ref(c), si_ref(c), dg_ref(c), db_ref(c);
  batch_norm_params p;
  p.fuse_relu = relu;
  reference::backend ref;
  tensor_view<const T, F> rv_view = residual ? r.const_view() : tensor_view<const T, F>{};
  ref.batch_norm_forward_training<T, F>(x.const_view(), yref.view(), gamma.data(), beta.data(), rm_ref.data(),
                                        rv_ref.data(), sm_ref.data(), si_ref.data(), p, rv_view);
  ref.batch_norm_forward_inference<T, F>(x.const_view(), yinf_ref.view(), gamma.data(), beta.data(), rm.data(),
                                         rv.data(), p, rv_view);
  ref.batch_norm_backward<T, F>(x.const_view(), dy.const_view(), dxref.view(), gamma.data(), sm_ref.data(),
                                si_ref.data(), dg_ref.data(), db_ref.data(), p, yref.const_view(),
                                residual ? dresref.view() : tensor_view<T, F>{});

  const auto n = static_cast<std::size_t>(x.numel());
  dev<T> dxin(x.data(), n), dr(r.data(), n), ddy(dy.data(), n), dyout(n), dyinf(n), ddx(n), ddres(n);
  dev<P> dgam(gamma.data(), c), dbet(beta.data(), c), drm(rm.data(), c), drv(rv.data(), c), dsm(c), dsi(c), ddg(c),
      ddb(c), drm2(rm.data(), c), drv2(rv.data(), c);
  const tensor_view<const T, F> vr = residual ? tensor_view<const T, F>(dr.p, x.mapping()) : tensor_view<const T, F>{};
  const double tol = tolerance<T>();
  const bool epilogue = residual || relu;
  const auto expect = [&](bn_op op) -> const bn_expectation& { return expected_bn<T, F>(e, op, epilogue); };
  const std::string shape = memfmt::detail::dims_to_string(e);
  if (runs_as_expected(expect(bn_op::training), "bn training " + shape, [&] {
        be.batch_norm_forward_training<T, F>(tensor_view<const T, F>(dxin.p, x.mapping()),
                                             tensor_view<T, F>(dyout.p, x.mapping()), dgam.p, dbet.p, drm.p, drv.p,
                                             dsm.p, dsi.p, p, vr);
      })) {
    expect_close(dyout.download().data(), yref.data(), yref.numel(), tol, "bn training y");
    expect_close(dsm.download().data(), sm_ref.data(), static_cast<std::int64_t>(c), 1e-3, "saved mean");
    expect_close(dsi.download().data(), si_ref.data(), static_cast<std::int64_t>(c), 1e-3, "saved invstd");
    expect_close(drm.download().data(), rm_ref.data(), static_cast<std::int64_t>(c), 1e-3, "running mean");
    expect_close(drv.download().data(), rv_ref.data(), static_cast<std::int64_t>(c), 1e-3, "running var");
  }
  if (runs_as_expected(expect(bn_op::inference), "bn inference " + shape, [&] {
        be.batch_norm_forward_inference<T, F>(tensor_view<const T, F>(dxin.p, x.mapping()),
                                              tensor_view<T, F>(dyinf.p, x.mapping()), dgam.p, dbet.p, drm2.p, drv2.p,
                                              p, vr);
      }))
    expect_close(dyinf.download().data(), yinf_ref.data(), yinf_ref.numel(), tol, "bn inference y");
  // Backward from the reference's forward output and statistics (so only the backward is compared).
  dev<T> dyref(yref.data(), n);
  dev<P> dsmr(sm_ref.data(), c), dsir(si_ref.data(), c);
  if (runs_as_expected(expect(bn_op::backward), "bn backward " + shape, [&] {
        be.batch_norm_backward<T, F>(tensor_view<const T, F>(dxin.p, x.mapping()),
                                     tensor_view<const T, F>(ddy.p, x.mapping()), tensor_view<T, F>(ddx.p, x.mapping()),
                                     dgam.p, dsmr.p, dsir.p, ddg.p, ddb.p, p,
                                     tensor_view<const T, F>(dyref.p, x.mapping()),
                                     residual ? tensor_view<T, F>(ddres.p, x.mapping()) : tensor_view<T, F>{});
      })) {
    expect_close(ddx.download().data(), dxref.data(), dxref.numel(), tol * 4, "bn backward dx");
    expect_close(ddg.download().data(), dg_ref.data(), static_cast<std::int64_t>(c), tol * 4, "dgamma");
    expect_close(ddb.download().data(), db_ref.data(), static_cast<std::int64_t>(c), tol * 4, "dbeta");
    if (residual) expect_close(ddres.download().data(), dresref.data(), dresref.numel(), tol, "dresidual");
  }
}

template <class T>
void bn_all(cudnn::backend& be) {
  bn_case<T, nhwc>(be, {4, 16, 6, 6}, false, false);
  bn_case<T, nchw>(be, {4, 16, 6, 6}, false, false);
  bn_case<T, nhwc>(be, {4, 16, 6, 6}, true, true);
  bn_case<T, nchw>(be, {2, 8, 5, 7}, false, true);
  bn_case<T, nchw>(be, {3, 24, 9, 11}, true, false);
  // One position: the pointwise steps describe it with channels-last strides (pointwise_frame).
  // (One channel has no batch-norm engine in cuDNN 9.19: "c % elements_per_ldg != 0".)
  bn_case<T, nhwc>(be, {8, 16, 1, 1}, true, true);
  bn_case<T, nchw>(be, {8, 16, 1, 1}, false, true);
}

TEST_F(CudnnGpu, BatchNormMatchesReferenceFp32) {
  cudnn::backend be;
  bn_all<float>(be);
}
TEST_F(CudnnGpu, BatchNormMatchesReferenceFp16) {
  cudnn::backend be;
  bn_all<half>(be);
}
TEST_F(CudnnGpu, BatchNormMatchesReferenceBf16) {
  cudnn::backend be;
  bn_all<bfloat16>(be);
}

// float64 batch norm has no cuDNN engine: every call must be refused with that reason.
TEST_F(CudnnGpu, BatchNormFp64IsRefusedWithItsReason) {
  cudnn::backend be;
  bn_all<double>(be);
}

// Every device buffer the backend holds comes from the user allocator and goes back to it with
// its size: the batch-norm gradient through a fused relu takes a scratch of exactly dy's bytes.
TEST_F(CudnnGpu, PlanCacheHitsOnRepeatAndUserAllocatorIsUsed) {
  recording_allocator mem;
  {
    cudnn::backend_options o;
    o.allocator = mem.make();
    cudnn::backend be(o);
    conv_params p;
    p.padding = {1, 1, 1};
    conv_case<half, nhwc>(be, {2, 8, 9, 9}, {16, 8, 3, 3}, p);
    const auto size = be.cache().size(), misses = be.cache().misses();
    conv_case<half, nhwc>(be, {2, 8, 9, 9}, {16, 8, 3, 3}, p);
    EXPECT_EQ(be.cache().size(), size);
    EXPECT_EQ(be.cache().misses(), misses);
    EXPECT_GT(be.cache().hits(), 0u);

    bn_case<float, nhwc>(be, {4, 16, 6, 6}, false, true);
    const std::size_t grad_bytes = 4 * 16 * 6 * 6 * sizeof(float);
    EXPECT_NE(std::find(mem.sizes.begin(), mem.sizes.end(), grad_bytes), mem.sizes.end())
        << "no allocation of the relu gradient's " << grad_bytes << " bytes";
    if (be.workspace_bytes() > 0) {
      bool held = false;
      for (const auto& [ptr, bytes] : mem.live) held = held || bytes == be.workspace_bytes();
      EXPECT_TRUE(held) << "the " << be.workspace_bytes() << "-byte workspace is not from the user allocator";
    }
    EXPECT_FALSE(mem.live.empty());
  }
  EXPECT_TRUE(mem.live.empty()) << mem.live.size() << " buffers were not given back";
  EXPECT_EQ(mem.bad_frees, 0u);
}

// A moved backend keeps its handle, device properties and plans; the moved-from one owns nothing
// (a defaulted move once copied the raw handle, so both destructors destroyed it).
TEST_F(CudnnGpu, MovedBackendKeepsHandleAndPlans) {
  conv_params p;
  p.padding = {1, 1, 1};
  cudnn::backend first;
  const cudnnHandle_t handle = first.handle();
  conv_case<float, nhwc>(first, {2, 8, 9, 9}, {16, 8, 3, 3}, p);
  const auto misses = first.cache().misses();
  cudnn::backend second(std::move(first));
  EXPECT_EQ(first.handle(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_EQ(second.handle(), handle);
  conv_case<float, nhwc>(second, {2, 8, 9, 9}, {16, 8, 3, 3}, p);
  EXPECT_EQ(second.cache().misses(), misses);
  EXPECT_GT(second.cache().hits(), 0u);
}

}  // namespace
