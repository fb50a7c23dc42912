// No ResNet-50 layer, in either format, fp32 or bf16 (where the CPU supports it), forward or
// backward, may run oneDNN's `ref` (reference loop) convolution: in oneDNN 2.6 that is what plain
// NHWC weights would give (~0.1 GFLOP/s). The implementation is queried without running (building
// the primitive only).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <memfmt/backends/onednn/backend.hpp>
#include <memfmt/tensor/host_tensor.hpp>

#include "onednn_test_util.hpp"

namespace {

using namespace memfmt;
using onednn::conv_op;

struct layer {
  const char* name;
  std::int64_t c, hw, k, kernel, stride;
};

// ResNet-50 (torchvision v1.5: the stride is on the 3x3) layers, batch 8.
const std::vector<layer>& resnet50_layers() {
  static const std::vector<layer> l = {
      {"stem7x7s2", 3, 224, 64, 7, 2},          {"56_1x1_64_64", 64, 56, 64, 1, 1},
      {"56_3x3_64_64", 64, 56, 64, 3, 1},       {"56_1x1_64_256", 64, 56, 256, 1, 1},
      {"56_1x1_256_64", 256, 56, 64, 1, 1},     {"56_1x1_256_128", 256, 56, 128, 1, 1},
      {"56_3x3s2_128", 128, 56, 128, 3, 2},     {"56_1x1s2_256_512", 256, 56, 512, 1, 2},
      {"28_3x3_128", 128, 28, 128, 3, 1},       {"28_1x1_128_512", 128, 28, 512, 1, 1},
      {"28_1x1_512_128", 512, 28, 128, 1, 1},   {"28_3x3s2_256", 256, 28, 256, 3, 2},
      {"14_3x3_256", 256, 14, 256, 3, 1},       {"14_1x1_256_1024", 256, 14, 1024, 1, 1},
      {"14_1x1_1024_256", 1024, 14, 256, 1, 1}, {"14_3x3s2_512", 512, 14, 512, 3, 2},
      {"7_3x3_512", 512, 7, 512, 3, 1},         {"7_1x1_512_2048", 512, 7, 2048, 1, 1},
      {"7_1x1_2048_512", 2048, 7, 512, 1, 1},
  };
  return l;
}

template <class T, class F>
void check_no_ref(onednn::backend& b, conv_op op) {
  for (const auto& l : resnet50_layers()) {
    conv_params p;
    p.stride = {l.stride, l.stride, 1};
    p.padding = {l.kernel / 2, l.kernel / 2, 0};
    const std::string name = b.conv_impl_name<T, F>(op, {8, l.c, l.hw, l.hw}, {l.k, l.c, l.kernel, l.kernel}, p,
                                                    op != conv_op::backward_data);
    EXPECT_EQ(name.find("ref"), std::string::npos) << l.name << " " << F::name << " " << to_string(dtype_of_v<T>)
                                                   << " op " << static_cast<int>(op) << ": " << name;
  }
}

// Every element type the CPU supports; the others must be refused with the clear error.
template <class T>
void check_no_ref_if_supported(const std::vector<conv_op>& ops) {
  onednn::backend b;
  const conv_params p;
  const std::string unsupported = onednn_test::refused_on_this_cpu<T>("onednn::conv_impl_name", [&] {
    b.conv_impl_name<T, nhwc>(ops.front(), {8, 64, 56, 56}, {64, 64, 3, 3}, p);
  });
  if (!unsupported.empty()) GTEST_SKIP() << unsupported;
  for (conv_op op : ops) {
    check_no_ref<T, nchw>(b, op);
    check_no_ref<T, nhwc>(b, op);
  }
}

const std::vector<conv_op> forward{conv_op::forward};
const std::vector<conv_op> backward{conv_op::backward_data, conv_op::backward_weights};

TEST(OnednnImpl, ResNet50ForwardNeverRefFloat) { check_no_ref_if_supported<float>(forward); }
TEST(OnednnImpl, ResNet50ForwardNeverRefBfloat16) { check_no_ref_if_supported<bfloat16>(forward); }
TEST(OnednnImpl, ResNet50BackwardNeverRefFloat) { check_no_ref_if_supported<float>(backward); }
TEST(OnednnImpl, ResNet50BackwardNeverRefBfloat16) { check_no_ref_if_supported<bfloat16>(backward); }

// The query and a real call report the same implementation; an NHWC fp32 3x3 conv on this
// AVX2 or AVX-512 CPU is a JIT kernel (brgconv or jit), never `ref`.
TEST(OnednnImpl, QueryMatchesExecution) {
  onednn::backend b;
  conv_params p;
  p.padding = {1, 1, 0};
  host_tensor<float, nhwc> x({2, 16, 8, 8}), w({32, 16, 3, 3}), y({2, 32, 8, 8});
  onednn_test::fill(x, 51);
  onednn_test::fill(w, 52);
  EXPECT_TRUE(b.last_impl_name().empty());
  b.conv_forward(x.view(), w.view(), nullptr, y.view(), p);
  const std::string ran = b.last_impl_name();
  EXPECT_EQ(ran, (b.conv_impl_name<float, nhwc>(conv_op::forward, x.extents(), w.extents(), p)));
  EXPECT_EQ(ran.find("ref"), std::string::npos) << ran;
}

}  // namespace
