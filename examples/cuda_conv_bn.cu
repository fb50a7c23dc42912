// cuda_conv_bn: an NCHW activation converted to NHWC on the GPU, then an NHWC convolution + batch
// norm (training, fused ReLU) through the cuDNN backend, checked against the CPU reference.
// Exits 0 with a message when there is no GPU; non-zero when the GPU result disagrees.
#include <cmath>
#include <cstdio>
#include <vector>

#include <memfmt/backends/cudnn/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/convert/cuda/convert.cuh>
#include <memfmt/tensor/host_tensor.hpp>

using namespace memfmt;

namespace {
template <class T>
struct device_array {
  T* p = nullptr;
  explicit device_array(std::size_t n) {
    cudnn::check_cuda(cudaMalloc(reinterpret_cast<void**>(&p), (n ? n : 1) * sizeof(T)), "cudaMalloc");
  }
  ~device_array() { cudaFree(p); }
};
}  // namespace

int main() {
  if (cudnn::device_count() == 0) {
    std::printf("cuda_conv_bn: no CUDA device found (cudaGetDeviceCount reports none or fails); nothing to run.\n");
    return 0;
  }
  try {
    const std::array<std::int64_t, 4> xe{2, 16, 14, 14}, we{32, 16, 3, 3};
    conv_params cp;
    cp.padding = {1, 1, 1};
    const auto ye = conv_output_extents(xe, we, cp);
    host_tensor<float, nchw> x_nchw(xe);
    host_tensor<float, nhwc> w(we);
    for (std::int64_t i = 0; i < x_nchw.numel(); ++i) x_nchw.data()[i] = static_cast<float>((i * 37) % 29 - 14) / 16.0f;
    for (std::int64_t i = 0; i < w.numel(); ++i) w.data()[i] = static_cast<float>((i * 11) % 13 - 6) / 32.0f;
    const std::size_t c = static_cast<std::size_t>(ye[1]);
    std::vector<float> gamma(c, 1.0f), beta(c, 0.1f), rm(c, 0.0f), rv(c, 1.0f), sm(c), si(c);

    // CPU reference: convert on the host by coordinates, conv, batch norm + relu.
    host_tensor<float, nhwc> x_ref(xe), y_ref(ye), z_ref(ye);
    for (std::int64_t n = 0; n < xe[0]; ++n)
      for (std::int64_t ch = 0; ch < xe[1]; ++ch)
        for (std::int64_t h = 0; h < xe[2]; ++h)
          for (std::int64_t ww = 0; ww < xe[3]; ++ww) x_ref(n, ch, h, ww) = x_nchw(n, ch, h, ww);
    batch_norm_params bp;
    bp.fuse_relu = true;
    std::vector<float> rm_ref = rm, rv_ref = rv, sm_ref(c), si_ref(c);
    reference::backend ref;
    ref.conv_forward<float, nhwc, nhwc, nhwc>(x_ref.const_view(), w.const_view(), nullptr, y_ref.view(), cp);
    ref.batch_norm_forward_training<float, nhwc>(y_ref.const_view(), z_ref.view(), gamma.data(), beta.data(),
                                                 rm_ref.data(), rv_ref.data(), sm_ref.data(), si_ref.data(), bp);

    // GPU: upload NCHW, convert to NHWC on the device, conv + batch norm through cuDNN.
    device_array<float> dx_nchw(x_nchw.numel()), dx(x_nchw.numel()), dw(w.numel()), dy(y_ref.numel()),
        dz(y_ref.numel());
    device_array<float> dg(c), db(c), drm(c), drv(c), dsm(c), dsi(c);
    cudnn::check_cuda(cudaMemcpy(dx_nchw.p, x_nchw.data(), x_nchw.size_bytes(), cudaMemcpyHostToDevice), "upload x");
    cudnn::check_cuda(cudaMemcpy(dw.p, w.data(), w.size_bytes(), cudaMemcpyHostToDevice), "upload w");
    cudnn::check_cuda(cudaMemcpy(dg.p, gamma.data(), c * 4, cudaMemcpyHostToDevice), "upload gamma");
    cudnn::check_cuda(cudaMemcpy(db.p, beta.data(), c * 4, cudaMemcpyHostToDevice), "upload beta");
    cudnn::check_cuda(cudaMemcpy(drm.p, rm.data(), c * 4, cudaMemcpyHostToDevice), "upload running mean");
    cudnn::check_cuda(cudaMemcpy(drv.p, rv.data(), c * 4, cudaMemcpyHostToDevice), "upload running var");

    cudnn::backend be;
    memfmt::cuda::convert<float, nchw, nhwc>(nchw_view<const float>(dx_nchw.p, xe), nhwc_view<float>(dx.p, xe),
                                             be.stream());
    be.conv_forward<float, nhwc, nhwc, nhwc>(nhwc_view<const float>(dx.p, xe), nhwc_view<const float>(dw.p, we),
                                             nullptr, nhwc_view<float>(dy.p, ye), cp);
    const std::string conv_engine = be.last_engine();
    be.batch_norm_forward_training<float, nhwc>(nhwc_view<const float>(dy.p, ye), nhwc_view<float>(dz.p, ye), dg.p,
                                                db.p, drm.p, drv.p, dsm.p, dsi.p, bp);
    be.synchronize();
    std::vector<float> z(static_cast<std::size_t>(z_ref.numel()));
    cudnn::check_cuda(cudaMemcpy(z.data(), dz.p, z.size() * 4, cudaMemcpyDeviceToHost), "download z");

    double max_err = 0;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < z.size(); ++i) {
      const double err = std::fabs(z[i] - z_ref.data()[i]);
      max_err = std::max(max_err, err);
      if (err > 1e-2 * (1.0 + std::fabs(z_ref.data()[i]))) ++bad;  // TF32 convolution is allowed
    }
    std::printf(
        "cuda_conv_bn: NCHW->NHWC on GPU, conv (%s) + batch norm + relu (%s): max |gpu - cpu| = %.3g, %zu mismatches\n",
        conv_engine.c_str(), be.last_engine().c_str(), max_err, bad);
    return bad == 0 ? 0 : 1;
  } catch (const memfmt::error& e) {
    std::fprintf(stderr, "cuda_conv_bn: %s\n", e.what());
    return 1;
  }
}
