// onednn::support_for against oneDNN itself: an element type is reported supported exactly when
// oneDNN can build a convolution and a batch norm in it on this CPU (tried directly, without the
// backend). Run under DNNL_MAX_CPU_ISA=AVX2 too (scripts/test.sh), so both answers are checked.
#include <gtest/gtest.h>

#include <string>

#include <memfmt/backends/onednn/cpu_support.hpp>

namespace {

using namespace memfmt;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// Whether oneDNN builds a 3x3 convolution and a batch norm on NHWC data of this type.
bool onednn_builds(dt type) {
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const dnnl::memory::desc x({2, 16, 8, 8}, type, tag::nhwc), w({16, 16, 3, 3}, type, tag::any);
  try {
    dnnl::convolution_forward::desc c(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x, w,
                                      dnnl::memory::desc(), x, {1, 1}, {0, 0}, {1, 1}, {1, 1});
    dnnl::convolution_forward::primitive_desc cpd(c, eng);
    dnnl::batch_normalization_forward::desc n(dnnl::prop_kind::forward_training, x, 1e-5f,
                                              dnnl::normalization_flags::use_scale);
    dnnl::batch_normalization_forward::primitive_desc npd(n, eng);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

TEST(OnednnCpuSupport, AgreesWithWhatOneDnnBuilds) {
  const std::string isa = onednn::isa_name(onednn::effective_isa());
  EXPECT_TRUE(onednn::supports(dtype::float32));
  EXPECT_TRUE(onednn_builds(dt::f32)) << isa;
  EXPECT_EQ(onednn::supports(dtype::bfloat16), onednn_builds(dt::bf16)) << isa;
  EXPECT_EQ(onednn::supports(dtype::float16), onednn_builds(dt::f16)) << isa;
  EXPECT_FALSE(onednn::supports(dtype::float64));
}

TEST(OnednnCpuSupport, ReasonNamesTheMissingIsa) {
  const onednn::dtype_support bf = onednn::support_for(dtype::bfloat16);
  if (bf.supported) {
    EXPECT_TRUE(bf.reason.empty()) << bf.reason;
    EXPECT_TRUE(onednn::isa_includes(onednn::effective_isa(), dnnl::cpu_isa::avx512_core));
  } else {
    EXPECT_EQ(bf.needs, "avx512_core");
    EXPECT_NE(bf.reason.find("bfloat16 needs avx512_core"), std::string::npos) << bf.reason;
    EXPECT_NE(bf.reason.find(std::string("oneDNN uses ") + onednn::isa_name(onednn::effective_isa())),
              std::string::npos)
        << bf.reason;
  }
  const onednn::dtype_support f16 = onednn::support_for(dtype::float16);
  EXPECT_FALSE(f16.supported);
  EXPECT_NE(f16.reason.find("float16"), std::string::npos) << f16.reason;
}

TEST(OnednnCpuSupport, IsaInclusion) {
  using isa = dnnl::cpu_isa;
  EXPECT_TRUE(onednn::isa_includes(isa::avx512_core_amx, isa::avx512_core));
  EXPECT_TRUE(onednn::isa_includes(isa::avx512_core_bf16, isa::avx512_core));
  EXPECT_TRUE(onednn::isa_includes(isa::avx512_core, isa::avx2));
  EXPECT_FALSE(onednn::isa_includes(isa::avx2, isa::avx512_core));
  EXPECT_FALSE(onednn::isa_includes(isa::avx2_vnni, isa::avx512_core));
  EXPECT_TRUE(onednn::isa_includes(isa::avx2_vnni, isa::avx2));
}

}  // namespace
