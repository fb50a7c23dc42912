// The reference layers against PyTorch's fixtures in double and float (layer_fixture.hpp).
#include "layer_fixture.hpp"

namespace {

template <class T>
class ReferenceLayerFixtures : public ::testing::Test {};
using ElementTypes = ::testing::Types<double, float>;
TYPED_TEST_SUITE(ReferenceLayerFixtures, ElementTypes);

TYPED_TEST(ReferenceLayerFixtures, EveryOpEveryFormatPair) { check_every_op_every_format_pair<TypeParam>(); }

}  // namespace
