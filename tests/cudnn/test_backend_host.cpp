// The parts of the cuDNN backend's executor service that need no GPU: which layers it says it
// runs (support.hpp), and the 2-D copy plans of concatenation, channel slices and format
// conversion (strided_copy.hpp), replayed on host memory with the semantics of cudaMemcpy2D and
// compared with the reference backend and memfmt::convert.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include <memfmt/backends/cudnn/strided_copy.hpp>
#include <memfmt/backends/cudnn/support.hpp>
#include <memfmt/backends/reference/concat.hpp>
#include <memfmt/convert/convert.hpp>
#include <memfmt/graph/models.hpp>
#include <memfmt/graph/solve.hpp>
#include <memfmt/runtime/backend_support.hpp>
#include <memfmt/tensor/host_tensor.hpp>

namespace {

using namespace memfmt;

// cudaMemcpy2D on host memory: `height` rows of `width` bytes.
void replay(const cudnn::copy_2d& k, void* dst, const void* src) {
  for (std::size_t r = 0; r < k.height; ++r)
    std::memcpy(static_cast<unsigned char*>(dst) + k.dst_offset + r * k.dst_pitch,
                static_cast<const unsigned char*>(src) + k.src_offset + r * k.src_pitch, k.width);
}

template <class T, class F>
cudnn::packed_shape shape_of(const host_tensor<T, F>& t) {
  cudnn::packed_shape s;
  s.n = t.view().extent(0);
  s.c = t.view().extent(1);
  for (int d = 2; d < F::rank; ++d) s.s *= t.view().extent(d);
  s.element_bytes = sizeof(T);
  s.channels_last = F::channels_last;
  return s;
}

template <class T, class F>
void fill_counting(host_tensor<T, F>& t, float start) {
  T* p = t.view().data();
  for (std::int64_t i = 0; i < t.view().numel(); ++i) p[i] = static_cast<T>(start + static_cast<float>(i));
}

template <class T, class F>
bool same_bytes(const host_tensor<T, F>& a, const host_tensor<T, F>& b) {
  return std::memcmp(a.view().data(), b.view().data(), static_cast<std::size_t>(a.view().numel()) * sizeof(T)) == 0;
}

template <class F>
void check_concat_and_slice(const std::array<std::int64_t, F::rank>& whole_e, const std::vector<std::int64_t>& parts) {
  SCOPED_TRACE(F::name);
  std::vector<host_tensor<float, F>> xs;
  std::vector<tensor_view<const float, F>> views;
  float start = 0;
  for (std::int64_t c : parts) {
    auto e = whole_e;
    e[1] = c;
    xs.emplace_back(e);
    fill_counting(xs.back(), start);
    start += 1000;
  }
  for (auto& x : xs) views.push_back(x.const_view());
  host_tensor<float, F> want(whole_e), got(whole_e);
  reference::concat_forward(views, want.view());
  std::int64_t c0 = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    replay(cudnn::channel_block_copy(shape_of(got), parts[i], c0, true), got.view().data(), xs[i].view().data());
    // The slice back out of the whole equals the part.
    host_tensor<float, F> back(xs[i].view().extents()), ref(xs[i].view().extents());
    reference::channel_slice_forward(want.const_view(), c0, ref.view());
    replay(cudnn::channel_block_copy(shape_of(want), parts[i], c0, false), back.view().data(), want.view().data());
    EXPECT_TRUE(same_bytes(back, ref)) << "slice " << i;
    c0 += parts[i];
  }
  EXPECT_TRUE(same_bytes(got, want));
}

TEST(CudnnStridedCopy, ConcatAndSliceEqualTheReference) {
  check_concat_and_slice<nchw>({2, 9, 3, 4}, {2, 4, 3});
  check_concat_and_slice<nhwc>({2, 9, 3, 4}, {2, 4, 3});
  check_concat_and_slice<ncdhw>({2, 5, 2, 3, 2}, {1, 4});
  check_concat_and_slice<ndhwc>({2, 5, 2, 3, 2}, {1, 4});
  check_concat_and_slice<nhwc>({1, 3, 1, 1}, {3});
}

template <class From, class To>
void check_conversion(const std::array<std::int64_t, From::rank>& e) {
  SCOPED_TRACE(std::string(From::name) + " -> " + To::name + " " + memfmt::detail::dims_to_string(e));
  host_tensor<half, From> src(e);
  fill_counting(src, 1);
  host_tensor<half, To> want(e), got(e);
  memfmt::convert(src.const_view(), want.view());
  const auto copies = cudnn::format_conversion_copies(shape_of(src));
  std::int64_t positions = 1;
  for (int d = 2; d < From::rank; ++d) positions *= e[static_cast<std::size_t>(d)];
  EXPECT_EQ(static_cast<std::int64_t>(copies.size()), e[0] * std::min(e[1], positions));  // N * min(C, S) copies
  for (const auto& k : copies) replay(k, got.view().data(), src.view().data());
  EXPECT_TRUE(same_bytes(got, want));
}

TEST(CudnnStridedCopy, FormatConversionEqualsConvert) {
  check_conversion<nchw, nhwc>({2, 3, 4, 5});   // fewer channels than positions
  check_conversion<nhwc, nchw>({2, 3, 4, 5});
  check_conversion<nchw, nhwc>({2, 40, 2, 3});  // more channels than positions
  check_conversion<nhwc, nchw>({2, 40, 2, 3});
  check_conversion<ncdhw, ndhwc>({1, 3, 2, 3, 2});
  check_conversion<ndhwc, ncdhw>({1, 7, 1, 2, 2});
}

// ------------------------------------------------------------------ support

op_query query(op_kind op, dtype t, format_family f, int rank = 4) {
  op_query q;
  q.op = op;
  q.type = t;
  q.format = f;
  q.rank = rank;
  return q;
}

TEST(CudnnSupport, AnswersWhatTheGraphsCover) {
  const auto cl = format_family::channels_last, cf = format_family::channels_first;
  for (op_kind op : {op_kind::conv, op_kind::pool, op_kind::global_average_pool, op_kind::upsample, op_kind::linear,
                     op_kind::concat, op_kind::channel_slice})
    for (format_family f : {cl, cf})
      for (dtype t : {dtype::float32, dtype::float16, dtype::bfloat16})
        EXPECT_TRUE(cudnn::layer_support(query(op, t, f))) << to_string(op) << " " << to_string(f);
  for (op_kind op : {op_kind::activation, op_kind::binary, op_kind::batch_norm, op_kind::conv_transpose}) {
    EXPECT_TRUE(cudnn::layer_support(query(op, dtype::float16, cl))) << to_string(op);
    const op_support s = cudnn::layer_support(query(op, dtype::float16, cf));
    EXPECT_FALSE(s) << to_string(op);
    EXPECT_EQ(s.code, errc::unsupported);
    EXPECT_NE(s.reason.find("channels-last"), std::string::npos) << s.reason;
  }
  for (op_kind op : {op_kind::group_norm, op_kind::pad, op_kind::softmax}) {
    const op_support s = cudnn::layer_support(query(op, dtype::float32, cl));
    EXPECT_FALSE(s);
    EXPECT_NE(s.reason.find(to_string(op)), std::string::npos) << s.reason;
  }
  // float64: convolution and batch norm only.
  EXPECT_TRUE(cudnn::layer_support(query(op_kind::conv, dtype::float64, cf)));
  const op_support d = cudnn::layer_support(query(op_kind::pool, dtype::float64, cl));
  EXPECT_EQ(d.code, errc::unsupported_dtype);
  EXPECT_NE(d.reason.find("float64"), std::string::npos) << d.reason;
  EXPECT_EQ(cudnn::layer_support(query(op_kind::conv, dtype::int32, cl)).code, errc::unsupported_dtype);
  // Bilinear in 2-D, nearest in 2-D and 3-D.
  op_query up = query(op_kind::upsample, dtype::float32, cl, 5);
  up.resample = resample_mode::linear;
  EXPECT_FALSE(cudnn::layer_support(up));
  up.resample = resample_mode::nearest;
  EXPECT_TRUE(cudnn::layer_support(up));
  EXPECT_FALSE(cudnn::layer_support(query(op_kind::conv, dtype::float32, cl, 3)));
}

// The trainer asks with `backward` set: every layer whose forward runs has its backward graphs
// (backward.hpp), so the answers are the forward's, refusals and reasons included.
TEST(CudnnSupport, BackwardAnswersAreTheForwards) {
  int asked = 0;
  for (op_kind op : {op_kind::activation, op_kind::binary, op_kind::pool, op_kind::global_average_pool,
                     op_kind::upsample, op_kind::linear, op_kind::concat, op_kind::channel_slice})
    for (format_family f : {format_family::channels_last, format_family::channels_first})
      for (dtype t : {dtype::float32, dtype::float16, dtype::bfloat16, dtype::float64})
        for (int rank : {4, 5})
          for (int variant = 0; variant < 8; ++variant) {
            op_query q = query(op, t, f, rank);
            q.function = static_cast<activation>(variant);
            q.pool = variant % 2 ? pool_kind::average : pool_kind::max;
            q.resample = variant % 2 ? resample_mode::linear : resample_mode::nearest;
            const op_support fwd = cudnn::layer_support(q);
            q.backward = true;
            const op_support bwd = cudnn::layer_support(q);
            EXPECT_EQ(bwd.supported, fwd.supported) << to_string(op) << " " << to_string(f) << " " << to_string(t);
            EXPECT_EQ(bwd.code, fwd.code);
            EXPECT_EQ(bwd.reason, fwd.reason);
            asked += bwd.supported ? 1 : 0;
          }
  EXPECT_GT(asked, 100);
  // Each activation's backward, hardswish's composition included, in channels-last.
  for (activation a : {activation::identity, activation::relu, activation::relu6, activation::silu,
                       activation::sigmoid, activation::hardsigmoid, activation::hardswish, activation::tanh}) {
    op_query q = query(op_kind::activation, dtype::float16, format_family::channels_last);
    q.function = a;
    q.backward = true;
    EXPECT_TRUE(cudnn::layer_support(q)) << static_cast<int>(a);
  }
}

// The planner with the cuDNN backend's answers (no backend object: that needs a GPU) keeps every
// layer with a pointwise step channels-last, as executor<cudnn::backend> requires.
struct cudnn_answers {
  op_support support(const op_query& q) const { return cudnn::layer_support(q); }
};

TEST(CudnnSupport, PlannerKeepsPointwiseLayersChannelsLast) {
  graph::models::options o;
  o.batch = 2;
  o.resolution = 32;
  o.width = 0.125;
  o.classes = 10;
  const graph::network net = graph::models::resnet18(o);
  const cudnn_answers answers;
  graph::cost_model costs;
  costs.set_support_query(runtime::support_query_for(answers));
  const graph::plan plan = graph::solve(net, costs);
  int checked = 0;
  for (const graph::node& n : net.nodes()) {
    const auto f = plan.format(n.id);
    if (!f) continue;
    const auto q = runtime::op_query_of(n, *f);
    if (!q) continue;
    EXPECT_TRUE(cudnn::layer_support(*q)) << n.name << " planned " << graph::to_string(*f);
    if (q->op == op_kind::activation || q->op == op_kind::binary || q->op == op_kind::batch_norm) {
      EXPECT_EQ(*f, format_family::channels_last) << n.name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

}  // namespace
