// The reference layers against PyTorch's fixtures in half and bfloat16 (layer_fixture.hpp).
#include "layer_fixture.hpp"

namespace {

template <class T>
class ReferenceLayerFixturesNarrow : public ::testing::Test {};
using ElementTypes = ::testing::Types<memfmt::half, memfmt::bfloat16>;
TYPED_TEST_SUITE(ReferenceLayerFixturesNarrow, ElementTypes);

TYPED_TEST(ReferenceLayerFixturesNarrow, EveryOpEveryFormatPair) { check_every_op_every_format_pair<TypeParam>(); }

}  // namespace
