// onednn_conv_bn - an NHWC convolution + batch norm (+ ReLU) on the CPU through oneDNN.
//
// Data often arrives NCHW (PyTorch's default); oneDNN's fast CPU kernels want NHWC. This program
// converts the input (and the weights) once, runs conv -> batch norm -> ReLU in NHWC through
// memfmt::onednn::backend, and checks the result against the reference backend run on the
// original NCHW data. Exit code 0 = match, 1 = mismatch.
#include <cmath>
#include <cstdio>
#include <vector>

#include <memfmt/backends/onednn/backend.hpp>
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/convert/convert.hpp>
#include <memfmt/tensor/host_tensor.hpp>

using namespace memfmt;

int main() {
  const std::int64_t n = 2, c = 16, hw = 28, k = 32;
  conv_params conv;
  conv.padding = {1, 1, 0};  // 3x3, "same" output size
  batch_norm_params bn;
  bn.fuse_relu = true;

  // Inputs as a PyTorch program would have them: NCHW activations, KCRS weights.
  host_tensor<float, nchw> x_nchw({n, c, hw, hw});
  host_tensor<float, nchw> w_kcrs({k, c, 3, 3});
  for (std::int64_t i = 0; i < x_nchw.numel(); ++i) x_nchw.data()[i] = std::sin(0.37f * static_cast<float>(i));
  for (std::int64_t i = 0; i < w_kcrs.numel(); ++i) w_kcrs.data()[i] = 0.1f * std::cos(0.11f * static_cast<float>(i));
  std::vector<float> bias(k), gamma(k), beta(k), mean(k), var(k);
  for (std::int64_t i = 0; i < k; ++i) {
    bias[i] = 0.01f * static_cast<float>(i);
    gamma[i] = 1.0f + 0.02f * static_cast<float>(i);
    beta[i] = -0.05f * static_cast<float>(i % 5);
    mean[i] = 0.03f * static_cast<float>(i % 7);
    var[i] = 0.5f + 0.04f * static_cast<float>(i);
  }

  // NCHW -> NHWC once (weights: KCRS -> KRSC), then everything stays NHWC.
  host_tensor<float, nhwc> x({n, c, hw, hw});
  host_tensor<float, nhwc> w({k, c, 3, 3});
  convert(x_nchw.const_view(), x.view());
  convert(w_kcrs.const_view(), w.view());

  onednn::backend dnn;
  host_tensor<float, nhwc> y({n, k, hw, hw}), out({n, k, hw, hw});
  dnn.conv_forward(x.view(), w.view(), bias.data(), y.view(), conv);
  const std::string conv_impl = dnn.last_impl_name();
  dnn.batch_norm_forward_inference(y.view(), out.view(), gamma.data(), beta.data(), mean.data(), var.data(), bn);

  // The same computation by the reference backend, on the original NCHW data.
  host_tensor<float, nchw> y_ref({n, k, hw, hw}), out_ref({n, k, hw, hw});
  reference::conv_forward<float, nchw, nchw, nchw>(x_nchw.view(), w_kcrs.view(), bias.data(), y_ref.view(), conv);
  reference::batch_norm_forward_inference<float, nchw>(y_ref.view(), out_ref.view(), gamma.data(), beta.data(),
                                                       mean.data(), var.data(), bn);

  double max_err = 0.0;
  bool ok = true;
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t ik = 0; ik < k; ++ik)
      for (std::int64_t ih = 0; ih < hw; ++ih)
        for (std::int64_t iw = 0; iw < hw; ++iw) {
          const double got = out(in, ik, ih, iw), want = out_ref(in, ik, ih, iw);
          const double err = std::fabs(got - want);
          max_err = err > max_err ? err : max_err;
          if (!(err <= 1e-4 * (1.0 + std::fabs(want)))) ok = false;  // fp32, 145-term sums
        }
  std::printf(
      "onednn_conv_bn: NHWC conv3x3 %lld->%lld + batch norm + ReLU on %lldx%lldx%lldx%lld (conv: %s): "
      "max |diff| vs reference %.3g -> %s\n",
      static_cast<long long>(c), static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(c),
      static_cast<long long>(hw), static_cast<long long>(hw), conv_impl.c_str(), max_err, ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
