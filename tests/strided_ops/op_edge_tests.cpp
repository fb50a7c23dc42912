// Hand-picked cases for op_rules.hpp, one per named rule or quirk. Every expected layout and
// message below is what PyTorch 1.13.1 (CPU) printed for the same call (see the comment on each
// test); the fixture tests cover the same rules on thousands of random cases.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../common/expect_error.hpp"
#include "memfmt/strided/op_rules.hpp"

namespace {

using memfmt::strided_desc;
using dims = std::vector<std::int64_t>;

strided_desc t(dims sizes, dims strides, memfmt::dtype type = memfmt::dtype::float32) {
  return strided_desc{std::move(sizes), std::move(strides), type};
}
const strided_desc scalar{};  // a Python scalar / 0-dim tensor

// x = torch.randn(2,3,4,5); xc = x.contiguous(memory_format=torch.channels_last)
const strided_desc x = t({2, 3, 4, 5}, {60, 20, 5, 1});
const strided_desc xc = t({2, 3, 4, 5}, {60, 1, 15, 3});

void expect_layout(const strided_desc& got, const dims& sizes, const dims& strides) {
  EXPECT_EQ(got.sizes, sizes);
  EXPECT_EQ(got.strides, strides);
}

template <class F>
void expect_error(F&& f, const std::string& message) {
  EXPECT_EQ(memfmt_test::error_text(f), message);
}

// ---- pointwise -----------------------------------------------------------------------------

TEST(PointwiseResult, MixedFormatsFollowTheFirstOperand) {
  expect_layout(memfmt::pointwise_result({x, xc}), {2, 3, 4, 5}, {60, 20, 5, 1});  // x + xc
  expect_layout(memfmt::pointwise_result({xc, x}), {2, 3, 4, 5}, {60, 1, 15, 3});  // xc + x
}

TEST(PointwiseResult, PerChannelBiasDefersToTheActivation) {
  const auto bias = t({1, 3, 1, 1}, {3, 1, 1, 1});  // torch.randn(1,3,1,1)
  expect_layout(memfmt::pointwise_result({xc, bias}), {2, 3, 4, 5}, {60, 1, 15, 3});
  expect_layout(memfmt::pointwise_result({bias, xc}), {2, 3, 4, 5}, {60, 1, 15, 3});
  expect_layout(memfmt::pointwise_result({x, bias}), {2, 3, 4, 5}, {60, 20, 5, 1});
}

TEST(PointwiseResult, ScalarsAndZeroDim) {
  expect_layout(memfmt::pointwise_result({xc, scalar}), {2, 3, 4, 5}, {60, 1, 15, 3});  // xc + 2.0
  expect_layout(memfmt::pointwise_result({scalar, xc}), {2, 3, 4, 5}, {60, 1, 15, 3});  // tensor(2.) + xc
  expect_layout(memfmt::pointwise_result({scalar, scalar}), {}, {});
}

TEST(PointwiseResult, ExpandedStrideZeroViews) {
  // torch.randn(4,1).expand(4,3) + torch.randn(4,3)
  expect_layout(memfmt::pointwise_result({t({4, 3}, {1, 0}), t({4, 3}, {3, 1})}), {4, 3}, {3, 1});
  // torch.randn(3,1).expand(3,4).t() + torch.randn(4,3)
  expect_layout(memfmt::pointwise_result({t({4, 3}, {0, 1}), t({4, 3}, {3, 1})}), {4, 3}, {3, 1});
}

TEST(PointwiseResult, SizeZeroDimsGiveZeroStridesOutsideCOrder) {
  // z = torch.randn(2,0,3).permute(2,0,1): z + z keeps the (dense) strides; z + 1.0 re-sorts and
  // the "compatible" strides stop growing after the size-0 dimension.
  const auto z = t({3, 2, 0}, {1, 3, 3});
  expect_layout(memfmt::pointwise_result({z, z}), {3, 2, 0}, {2, 1, 1});
  expect_layout(memfmt::pointwise_result({z, scalar}), {3, 2, 0}, {1, 0, 3});
}

TEST(PointwiseResult, AmbiguousShapesStayContiguous) {
  const auto c1 = t({2, 1, 4, 4}, {16, 16, 4, 1}), c1_cl = t({2, 1, 4, 4}, {16, 1, 4, 1});
  expect_layout(memfmt::pointwise_result({c1_cl, c1}), {2, 1, 4, 4}, {16, 16, 4, 1});
  expect_layout(memfmt::pointwise_result({c1, c1_cl}), {2, 1, 4, 4}, {16, 16, 4, 1});
  const auto hw1 = t({2, 3, 1, 1}, {3, 1, 1, 1}), hw1_cl = t({2, 3, 1, 1}, {3, 1, 3, 3});
  expect_layout(memfmt::pointwise_result({hw1_cl, hw1}), {2, 3, 1, 1}, {3, 1, 1, 1});
  expect_layout(memfmt::pointwise_result({hw1, hw1_cl}), {2, 3, 1, 1}, {3, 1, 1, 1});
}

TEST(PointwiseResult, UnaryAndDtypePromotion) {
  // torch.neg(x.permute(3,1,0,2)): a dense permutation is kept
  expect_layout(memfmt::pointwise_result({t({5, 3, 2, 4}, {1, 20, 60, 5})}), {5, 3, 2, 4}, {1, 20, 60, 5});
  // x.double().contiguous(channels_last) + a W/H-transposed float view
  const auto r = memfmt::pointwise_result(
      {t({2, 3, 4, 5}, {60, 1, 15, 3}, memfmt::dtype::float64), t({2, 3, 4, 5}, {60, 20, 1, 4})});
  expect_layout(r, {2, 3, 4, 5}, {60, 1, 15, 3});
  EXPECT_EQ(r.type, memfmt::dtype::float64);
}

TEST(PointwiseResult, BroadcastErrorNamesTheSizes) {
  expect_error(
      [] {
        memfmt::pointwise_result({t({2, 3}, {3, 1}), t({4, 3}, {3, 1})});
      },
      "The size of tensor a (2) must match the size of tensor b (4) at non-singleton dimension 0");
  expect_error(
      [] {
        memfmt::pointwise_result({t({2, 3}, {3})});
      },
      "strided_desc: sizes [2, 3] and strides [3] differ in length");
}

// ---- cat -----------------------------------------------------------------------------------

TEST(CatResult, MemoryFormatVote) {
  expect_layout(memfmt::cat_result({xc, xc}, 1), {2, 6, 4, 5}, {120, 1, 30, 6});
  expect_layout(memfmt::cat_result({xc, x}, 0), {4, 3, 4, 5}, {60, 20, 5, 1});
  const auto x5 = t({2, 3, 2, 2, 2}, {24, 1, 12, 6, 3});  // channels_last_3d
  expect_layout(memfmt::cat_result({x5, x5}, 2), {2, 3, 4, 2, 2}, {48, 1, 12, 6, 3});
}

TEST(CatResult, LegacyEmptyInputsAreSkippedButVoteContiguous) {
  const auto legacy = t({0}, {1});
  expect_layout(memfmt::cat_result({legacy, xc}, 1), {2, 3, 4, 5}, {60, 20, 5, 1});
  expect_layout(memfmt::cat_result({xc, legacy}, -1), {2, 3, 4, 5}, {60, 20, 5, 1});
  expect_layout(memfmt::cat_result({legacy, legacy}, 0), {0}, {1});
}

TEST(CatResult, Errors) {
  expect_error(
      [] {
        memfmt::cat_result({xc, xc}, 4);
      },
      "Dimension out of range (expected to be in range of [-4, 3], but got 4)");
  expect_error(
      [] {
        memfmt::cat_result({x, t({2, 4, 4, 5}, {80, 20, 5, 1})}, 0);
      },
      "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor number 1 "
      "in the list.");
  expect_error(
      [] {
        memfmt::cat_result({x, t({3, 5}, {5, 1})}, 0);
      },
      "Tensors must have same number of dimensions: got 4 and 2");
  expect_error([] { memfmt::cat_result({scalar}, 0); },
               "zero-dimensional tensor (at position 0) cannot be concatenated");
  expect_error([] { memfmt::cat_result({}, 0); }, "torch.cat(): expected a non-empty list of Tensors");
}

// ---- conv ----------------------------------------------------------------------------------

const strided_desc w = t({6, 3, 3, 3}, {27, 9, 3, 1});
const strided_desc w_cl = t({6, 3, 3, 3}, {27, 1, 9, 3});

strided_desc as_f64(strided_desc d) {
  d.type = memfmt::dtype::float64;
  return d;
}

TEST(ConvResult, ChannelsLastInputOrWeightGivesChannelsLast) {
  const memfmt::torch_conv_args plain;
  expect_layout(memfmt::conv_result(xc, w, plain), {2, 6, 2, 3}, {36, 1, 18, 6});                  // oneDNN
  expect_layout(memfmt::conv_result(as_f64(xc), as_f64(w), plain), {2, 6, 2, 3}, {36, 1, 18, 6});  // thnn
  expect_layout(memfmt::conv_result(x, w_cl, plain), {2, 6, 2, 3}, {36, 1, 18, 6});
  memfmt::torch_conv_args dilated;
  dilated.dilation = {2};
  dilated.padding = {1};
  expect_layout(memfmt::conv_result(as_f64(xc), as_f64(w), dilated), {2, 6, 2, 3}, {36, 1, 18, 6});
  memfmt::torch_conv_args strided;
  strided.stride = {2, 1};
  strided.padding = {1, 2};
  expect_layout(memfmt::conv_result(x, w, strided), {2, 6, 2, 7}, {84, 14, 7, 1});
}

TEST(ConvResult, Conv3dIsAlwaysContiguousIn113) {
  const auto x3 = t({2, 3, 4, 5, 6}, {360, 1, 90, 18, 3});  // channels_last_3d
  const auto w3 = t({4, 3, 2, 2, 2}, {24, 8, 4, 2, 1});
  expect_layout(memfmt::conv_result(x3, w3, {}), {2, 4, 3, 4, 5}, {240, 60, 20, 5, 1});
  expect_layout(memfmt::conv_result(as_f64(x3), as_f64(w3), {}), {2, 4, 3, 4, 5}, {240, 60, 20, 5, 1});
}

TEST(ConvResult, Conv1dWithPermutedWeightComesOutChannelsLastLike) {
  // F.conv1d(randn(2,3,5), randn(4,3,3).permute(0,2,1).contiguous().permute(0,2,1))
  expect_layout(memfmt::conv_result(t({2, 3, 5}, {15, 5, 1}), t({4, 3, 3}, {9, 1, 3}), {}), {2, 4, 3}, {12, 1, 4});
}

TEST(ConvResult, UnbatchedInputAndGroups) {
  // F.conv2d(xc[0], w_cl)
  expect_layout(memfmt::conv_result(t({3, 4, 5}, {1, 15, 3}), w_cl, {}), {6, 2, 3}, {1, 18, 6});
  // grouped float64 (per-group thnn + cat): randn(1,4,5,5).to(channels_last), randn(4,2,3,3), groups=2
  memfmt::torch_conv_args g2;
  g2.groups = 2;
  expect_layout(
      memfmt::conv_result(as_f64(t({1, 4, 5, 5}, {100, 1, 20, 4})), as_f64(t({4, 2, 3, 3}, {18, 9, 3, 1})), g2),
      {1, 4, 3, 3}, {36, 1, 12, 4});
}

TEST(ConvResult, EmptyBatchGoesThroughTheViewPath) {
  expect_layout(memfmt::conv_result(t({0, 3, 5, 5}, {75, 1, 15, 3}), w, {}), {0, 6, 3, 3}, {54, 9, 3, 1});
  // no input channels: the output has no channels either, whatever the weight says
  expect_layout(memfmt::conv_result(t({2, 0, 5, 5}, {25, 25, 5, 1}), t({3, 0, 3, 3}, {9, 9, 3, 1}), {}), {2, 0, 3, 3},
                {9, 9, 3, 1});
  expect_layout(memfmt::conv_result(t({2, 0, 5}, {5, 5, 1}), t({3, 0, 3}, {3, 3, 1}), {}), {2, 0, 3}, {3, 3, 1});
  // weight.view(-1) cannot flatten this weight: PyTorch 1.13 fails the same way
  memfmt::torch_conv_args s;
  s.stride = {2, 3};
  expect_error(
      [&] {
        memfmt::conv_result(t({0, 3, 9, 8}, {216, 72, 8, 1}), t({2, 3, 3, 1}, {9, 1, 3, 3}), s);
      },
      "view size is not compatible with input tensor's size and stride (at least one dimension spans across "
      "two contiguous subspaces). Use .reshape(...) instead.");
}

TEST(ConvResult, ShapeErrorsCarryPyTorchsMessages) {
  expect_error(
      [] {
        memfmt::conv_result(t({2, 5, 5, 5}, {125, 25, 5, 1}), w, {});
      },
      "Given groups=1, weight of size [6, 3, 3, 3], expected input[2, 5, 5, 5] to have 3 channels, but got 5 "
      "channels instead");
  expect_error(
      [] {
        memfmt::conv_result(t({2, 3, 5}, {15, 5, 1}), w, {});
      },
      "Given groups=1, weight of size [6, 3, 3, 3], expected input[1, 2, 3, 5] to have 3 channels, but got 2 "
      "channels instead");
  // F.conv2d(x, randn(6,3,3)): conv2d's own output_padding has two entries
  memfmt::torch_conv_args s2;
  s2.stride = {1, 1};
  memfmt::torch_conv_context conv2d;
  conv2d.spatial_dims = 2;
  expect_error(
      [&] {
        memfmt::conv_result(x, t({6, 3, 3}, {9, 3, 1}), s2, conv2d);
      },
      "expected stride to be a single integer value or a list of 1 values to match the convolution "
      "dimensions, but got stride=[1, 1]");
  memfmt::torch_conv_args g4;
  g4.groups = 4;
  expect_error([&] { memfmt::conv_result(x, w, g4); },
               "Given groups=4, expected weight to be divisible by 4 at dimension 0, but got weight of size [[6, 3, 3, "
               "3]] instead");
  expect_error(
      [] {
        memfmt::conv_result(t({2, 3, 2, 2}, {12, 4, 2, 1}), w, {});
      },
      "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size can't be greater "
      "than actual input size");
}

// ---- batch_norm ----------------------------------------------------------------------------

TEST(BatchNormResult, LayoutRules) {
  for (bool training : {false, true})
    for (bool affine : {false, true}) {
      expect_layout(memfmt::batch_norm_result(xc, training, affine), {2, 3, 4, 5}, {60, 1, 15, 3});
      // sliced channels_last_3d: dense in the suggested format
      expect_layout(memfmt::batch_norm_result(t({2, 3, 1, 2, 2}, {24, 1, 12, 6, 3}), training, affine), {2, 3, 1, 2, 2},
                    {12, 1, 12, 6, 3});
      // W/H transposed: not dense in a named format -> contiguous
      expect_layout(memfmt::batch_norm_result(t({2, 3, 5, 4}, {60, 20, 1, 5}), training, affine), {2, 3, 5, 4},
                    {60, 20, 4, 1});
    }
  // a channels_last_3d contiguous input takes the slow path and its suggested format
  expect_layout(memfmt::batch_norm_result(t({1, 2, 2, 1, 1}, {4, 1, 2, 2, 2}), false, true), {1, 2, 2, 1, 1},
                {4, 1, 2, 2, 2});
}

TEST(BatchNormResult, EmptyInputIsClonedThenScaled) {
  const auto e = t({3, 3, 1, 0}, {2, 1, 2, 2});
  expect_layout(memfmt::batch_norm_result(e, false, true), {3, 3, 1, 0}, {0, 1, 3, 3});
  expect_layout(memfmt::batch_norm_result(e, false, false), {3, 3, 1, 0}, {2, 1, 2, 2});
  expect_layout(memfmt::batch_norm_result(e), {3, 3, 1, 0}, {0, 1, 3, 3});
}

TEST(BatchNormResult, TrainingNeedsMoreThanOneValuePerChannel) {
  expect_error(
      [] {
        memfmt::batch_norm_result(t({1, 3, 1, 1}, {3, 1, 1, 1}), true, true);
      },
      "Expected more than 1 value per channel when training, got input size torch.Size([1, 3, 1, 1])");
  EXPECT_NO_THROW(memfmt::batch_norm_result(t({1, 3, 1, 1}, {3, 1, 1, 1}), false, true));
}

}  // namespace

namespace {

// Inputs PyTorch cannot even represent are rejected with the offending values in the message.
TEST(OpRulesValidation, RejectsNegativeStridesAndOverflow) {
  expect_error(
      [] {
        memfmt::pointwise_result({t({2, 3}, {3, -1})});
      },
      "pointwise_result: negative stride in strides [3, -1] (PyTorch tensors have none)");
  const std::int64_t big = std::int64_t{1} << 40;
  expect_error(
      [&] {
        memfmt::cat_result({t({big, big}, {big, 1})}, 0);
      },
      "cat_result: the dense strides of sizes [1099511627776, 1099511627776] overflow 64 bits");
  memfmt::torch_conv_args huge;
  huge.padding = {std::int64_t{1} << 62};
  try {
    memfmt::conv_result(x, w, huge);
    ADD_FAILURE() << "expected an overflow error";
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), memfmt::errc::overflow);
  }
  expect_error([] { memfmt::pointwise_result({}); }, "pointwise_result: no operands");
  expect_error([] { memfmt::batch_norm_result(t({3}, {1})); },
               "batch_norm_result: input of sizes [3] has no channel dimension");
}

// Sizes and strides past 64 bits: every rule refuses with errc::overflow (memfmt's limit) naming
// the values, where it used to answer wrapped strides.
template <class F>
std::string overflow_message(F&& f) {
  return memfmt_test::error_message(f, memfmt::errc::overflow);
}

const std::int64_t q62 = std::int64_t{1} << 62;
const std::int64_t max64 = INT64_MAX;

TEST(OpRulesOverflow, BroadcastOutputPast64Bits) {
  // [2, 2, 1] + [1, 1, 2^62]: an output of 2^64 elements (it answered strides [2^62, -2^63, 1]).
  auto m = overflow_message([] { memfmt::pointwise_result({t({2, 2, 1}, {1, 2, 1}), t({1, 1, q62}, {1, 1, 1})}); });
  EXPECT_NE(m.find("[2, 2, 4611686018427387904]"), std::string::npos) << m;
  m = overflow_message([] { memfmt::pointwise_result({t({4, 1}, {1, 1}), t({1, q62}, {1, 1})}); });
  EXPECT_NE(m.find("[4, 4611686018427387904]"), std::string::npos) << m;
  // At the limit it still answers: 2^62 elements, C order.
  expect_layout(memfmt::pointwise_result({t({2, 1}, {1, 1}), t({1, q62 / 2}, {1, 1})}), {2, q62 / 2}, {q62 / 2, 1});
}

TEST(OpRulesOverflow, EmptyBatchNormInputWithHugeSizes) {
  // numel 0, but the dense strides of [2, 2, 0, 2^62] pass 2^63 (it answered [2^62, -2^63, 0, 1]).
  const auto m = overflow_message([] { memfmt::batch_norm_result(t({2, 2, 0, q62}, {1, 2, 4, 4})); });
  EXPECT_NE(m.find("[2, 2, 0, 4611686018427387904]"), std::string::npos) << m;
  // Training mode with the same kind of sizes: the one-value-per-channel check multiplies nothing.
  overflow_message([] { memfmt::batch_norm_result(t({q62, 0, q62, 4}, {1, 1, 1, 1}), true, true); });
}

TEST(OpRulesOverflow, ConvOperandsWhoseSpanOrStridesPass64Bits) {
  // Unbatched input with a stride of 2^62: unsqueeze's new stride 3 * 2^62 used to wrap.
  auto m = overflow_message([] { memfmt::conv_result(t({3, 8, 8}, {q62, 24, 3}), w, {}); });
  EXPECT_NE(m.find("[4611686018427387904, 24, 3]"), std::string::npos) << m;
  // An empty input of extents near 2^63: its view's strides used to come out as [1, 1, MAX, 1].
  m = overflow_message([] {
    memfmt::conv_result(t({2, 0, max64, max64}, {1, 1, 1, 1}), t({4, 0, 1, 1}, {1, 1, 1, 1}), {});
  });
  EXPECT_NE(m.find("[2, 0, 9223372036854775807, 9223372036854775807]"), std::string::npos) << m;
  memfmt::torch_conv_args dilated;
  dilated.dilation = {max64, 1};
  m = overflow_message([&] { memfmt::conv_result(x, w, dilated); });
  EXPECT_NE(m.find("9223372036854775807"), std::string::npos) << m;
  // An output extent of 2^63 (input 2^63 - 1, kernel of size 0): the "+ 1" of the formula.
  m = overflow_message([] { memfmt::conv_result(t({1, 1, max64}, {max64, max64, 1}), t({1, 1, 0}, {1, 1, 1}), {}); });
  EXPECT_NE(m.find("conv_result: output size"), std::string::npos) << m;
}

// A grouped convolution on the slow path used to describe every group (time and memory linear in
// groups); all groups are alike, so the answer now costs the same for any count, and equals the
// dense layout of the concatenated output (float64 never takes oneDNN: contiguous).
TEST(OpRulesOverflow, GroupCountDoesNotCostTime) {
  for (const std::int64_t g : {std::int64_t{3}, std::int64_t{4000000}, std::int64_t{1} << 40}) {
    memfmt::torch_conv_args args;
    args.groups = g;
    const auto out = memfmt::conv_result(t({1, g, 1, 1}, {g, 1, 1, 1}, memfmt::dtype::float64),
                                         t({g, 1, 1, 1}, {1, 1, 1, 1}, memfmt::dtype::float64), args);
    expect_layout(out, {1, g, 1, 1}, memfmt::dense_strides({1, g, 1, 1}, memfmt::memory_format::contiguous));
  }
  // Channels-last groups: every group's output is channels last, so is the concatenation
  // (PyTorch 1.13: stride (54, 1, 18, 6)).
  memfmt::torch_conv_args args;
  args.groups = 2;
  const auto out = memfmt::conv_result(t({1, 4, 5, 5}, {100, 1, 20, 4}, memfmt::dtype::float64),
                                       t({6, 2, 3, 3}, {18, 1, 6, 2}, memfmt::dtype::float64), args);
  expect_layout(out, {1, 6, 3, 3}, {54, 1, 18, 6});
}

}  // namespace
