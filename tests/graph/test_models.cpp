// The models header against torchvision: every state_dict entry (name, dtype, shape) and the
// parameter count recorded from torchvision 0.14 (fixtures/record_state_dicts.py), output shapes
// and layer counts of the published architectures; every model plans and verifies.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "memfmt/graph/models.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/verify.hpp"

#include "../common/expect_error.hpp"

namespace {

using namespace memfmt::graph;
using memfmt::layer_kind;
using memfmt_test::expect_error;

struct entry {
  std::string dtype;
  std::vector<std::int64_t> shape;
  bool operator==(const entry& o) const { return dtype == o.dtype && shape == o.shape; }
};
struct recorded {
  std::map<std::string, entry> state_dict;
  std::int64_t parameters = -1;
};

std::map<std::string, recorded> read_fixture() {
  std::ifstream in(MEMFMT_GRAPH_FIXTURES "/torchvision_state_dicts.txt");
  EXPECT_TRUE(in.good()) << MEMFMT_GRAPH_FIXTURES;
  std::map<std::string, recorded> r;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    std::string model, key;
    s >> model >> key;
    if (key == "parameters") {
      s >> r[model].parameters;
      continue;
    }
    entry e;
    s >> e.dtype;
    for (std::int64_t d; s >> d;) e.shape.push_back(d);
    r[model].state_dict[key] = e;
  }
  return r;
}

std::map<std::string, entry> state_dict_of(const network& net) {
  std::map<std::string, entry> m;
  for (const node& n : net.nodes())
    for (const parameter_spec& p : net.parameters(n.id)) {
      EXPECT_EQ(p.trainable,
                p.name.find("running_") == std::string::npos && p.name.find("num_batches") == std::string::npos)
          << p.name;
      EXPECT_TRUE(m.emplace(p.name, entry{std::string(memfmt::to_string(p.type)), p.extents}).second) << p.name;
    }
  return m;
}

std::size_t count(const network& net, layer_kind k) {
  std::size_t c = 0;
  for (const node& n : net.nodes()) c += n.kind == k;
  return c;
}

std::vector<std::int64_t> extents_of(const network& net, const char* name) {
  const auto id = net.find(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id ? net.at(*id).extents : std::vector<std::int64_t>{};
}

TEST(GraphModels, StateDictsAndParameterCountsAreTorchvisions) {
  const auto truth = read_fixture();
  models::options video;
  video.resolution = 112;
  const std::pair<const char*, network> nets[] = {{"resnet18", models::resnet18()},
                                                  {"resnet50", models::resnet50()},
                                                  {"resnext50_32x4d", models::resnext50_32x4d()},
                                                  {"mobilenet_v2", models::mobilenet_v2()},
                                                  {"vgg16_bn", models::vgg16_bn()},
                                                  {"r3d_18", models::r3d_18(video)},
                                                  {"shufflenet_v2_x1_0", models::shufflenet_v2_x1_0()}};
  ASSERT_EQ(truth.size(), std::size(nets));
  for (const auto& [name, net] : nets) {
    SCOPED_TRACE(name);
    const recorded& r = truth.at(name);
    EXPECT_EQ(net.parameter_count(), r.parameters);
    const auto mine = state_dict_of(net);
    EXPECT_EQ(mine.size(), r.state_dict.size());
    for (const auto& [key, e] : r.state_dict) {
      const auto it = mine.find(key);
      if (it == mine.end()) {
        ADD_FAILURE() << "missing " << key;
        continue;
      }
      EXPECT_EQ(it->second.dtype, e.dtype) << key;
      EXPECT_EQ(it->second.shape, e.shape) << key;
    }
  }
  // Published parameter counts (torchvision's documentation), beside the recording.
  EXPECT_EQ(models::resnet50().parameter_count(), 25'557'032);
  EXPECT_EQ(models::mobilenet_v2().parameter_count(), 3'504'872);
  EXPECT_EQ(models::shufflenet_v2_x1_0().parameter_count(), 2'278'604);
}

// ConvNeXt-T's linears run as 1x1 convs and its layer scales as [1, C, 1, 1] constants, so its
// state_dict differs from torchvision's in those shapes; the count is torchvision's
// (sum(p.numel() for p in convnext_tiny().parameters())), and the names follow the module paths.
TEST(GraphModels, ConvNeXtTiny) {
  models::options o;
  o.batch = 2;
  const network net = models::convnext_tiny(o);
  EXPECT_EQ(net.parameter_count(), 28'589'128);
  EXPECT_EQ(count(net, layer_kind::layer_norm), 18u + 3u + 2u);  // one per block, 3 downsamples, stem, classifier
  EXPECT_EQ(count(net, layer_kind::conv), 18u * 3u + 4u);        // 3 per block, stem, 3 downsamples
  EXPECT_EQ(extents_of(net, "features.0.1"), (std::vector<std::int64_t>{2, 96, 56, 56}));
  EXPECT_EQ(extents_of(net, "features.1.2.block.3"), (std::vector<std::int64_t>{2, 384, 56, 56}));
  EXPECT_EQ(extents_of(net, "features.7.2.add"), (std::vector<std::int64_t>{2, 768, 7, 7}));
  EXPECT_EQ(extents_of(net, "output"), (std::vector<std::int64_t>{2, 1000}));
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& n : net.nodes())
    for (const auto& p : net.parameters(n.id)) shapes[p.name] = p.extents;
  EXPECT_EQ(shapes.at("features.0.1.weight"), (std::vector<std::int64_t>{96}));
  EXPECT_EQ(shapes.at("features.5.8.block.3.weight"), (std::vector<std::int64_t>{1536, 384, 1, 1}));
  EXPECT_EQ(shapes.at("features.6.1.weight"), (std::vector<std::int64_t>{768, 384, 2, 2}));
  EXPECT_EQ(shapes.at("features.7.2.layer_scale.value"), (std::vector<std::int64_t>{1, 768, 1, 1}));
  EXPECT_EQ(shapes.at("classifier.2.weight"), (std::vector<std::int64_t>{1000, 768}));
  // Layer norms are memory-bound: each runs in its producer's format, whatever the priors make of
  // the 1x1 convs around it.
  const plan p = solve(net, cost_model{});
  EXPECT_EQ(verify(net, cost_model{}, p), std::vector<std::string>{});
  for (const auto& n : net.nodes()) {
    if (n.kind != layer_kind::layer_norm) continue;
    EXPECT_EQ(p.format(n.id), p.format(n.inputs[0])) << n.name;
  }
}

TEST(GraphModels, ShapesAndLayerCounts) {
  models::options o;
  o.batch = 2;
  const network r50 = models::resnet50(o);
  EXPECT_EQ(count(r50, layer_kind::conv), 53u);  // 49 in the blocks and stem + 4 downsample
  EXPECT_EQ(count(r50, layer_kind::batch_norm), 53u);
  EXPECT_EQ(extents_of(r50, "maxpool"), (std::vector<std::int64_t>{2, 64, 56, 56}));
  EXPECT_EQ(extents_of(r50, "layer4.2.relu3"), (std::vector<std::int64_t>{2, 2048, 7, 7}));
  EXPECT_EQ(extents_of(r50, "output"), (std::vector<std::int64_t>{2, 1000}));
  EXPECT_EQ(count(models::resnet18(o), layer_kind::conv), 20u);
  const network mb = models::mobilenet_v2(o);
  EXPECT_EQ(count(mb, layer_kind::conv), 52u);
  EXPECT_EQ(count(mb, layer_kind::binary), 10u);  // the residual inverted blocks
  EXPECT_EQ(extents_of(mb, "features.18.2"), (std::vector<std::int64_t>{2, 1280, 7, 7}));
  const network vgg = models::vgg16_bn(o);
  EXPECT_EQ(count(vgg, layer_kind::conv), 13u);
  EXPECT_EQ(count(vgg, layer_kind::linear), 3u);
  EXPECT_EQ(extents_of(vgg, "features.43"), (std::vector<std::int64_t>{2, 512, 7, 7}));
  EXPECT_FALSE(vgg.find("avgpool"));  // 7x7 already: the adaptive pool is the identity
  o.resolution = 112;
  o.frames = 16;
  const network r3d = models::r3d_18(o);
  EXPECT_EQ(extents_of(r3d, "stem.2"), (std::vector<std::int64_t>{2, 64, 16, 56, 56}));
  EXPECT_EQ(extents_of(r3d, "layer4.1.relu"), (std::vector<std::int64_t>{2, 512, 2, 7, 7}));
  EXPECT_EQ(extents_of(r3d, "output"), (std::vector<std::int64_t>{2, 400}));
  o.resolution = 224;
  const network sn = models::shufflenet_v2_x1_0(o);
  EXPECT_EQ(count(sn, layer_kind::rearrange), 16u);  // one channel shuffle per unit
  EXPECT_EQ(count(sn, layer_kind::conv), 56u);       // 3 per unit, 2 more in the 3 downsampling ones, stem, conv5
  EXPECT_EQ(extents_of(sn, "stage2.0.shuffle"), (std::vector<std::int64_t>{2, 116, 28, 28}));
  EXPECT_EQ(extents_of(sn, "stage4.3.shuffle"), (std::vector<std::int64_t>{2, 464, 7, 7}));
  EXPECT_EQ(extents_of(sn, "output"), (std::vector<std::int64_t>{2, 1000}));
}

TEST(GraphModels, UNet) {
  models::options o;
  o.resolution = 256;
  const network net = models::unet(o);
  EXPECT_EQ(extents_of(net, "down4.maxpool_conv.1.double_conv.5"), (std::vector<std::int64_t>{1, 1024, 16, 16}));
  EXPECT_EQ(extents_of(net, "up1.up"), (std::vector<std::int64_t>{1, 512, 32, 32}));
  EXPECT_EQ(extents_of(net, "up1.cat"), (std::vector<std::int64_t>{1, 1024, 32, 32}));
  EXPECT_EQ(extents_of(net, "output"), (std::vector<std::int64_t>{1, 2, 256, 256}));
  EXPECT_EQ(count(net, layer_kind::conv_transpose), 4u);
  EXPECT_EQ(count(net, layer_kind::concat), 4u);
  // Counted by hand: DoubleConv(i, o) has 9io + 9oo conv weights and 2 x 2o batch-norm ones; an up
  // step a -> b a 2x2 transposed conv (4ab + b) and DoubleConv(2b, b); outc 64 x 2 + 2.
  const auto dc = [](std::int64_t i, std::int64_t out) { return 9 * i * out + 9 * out * out + 4 * out; };
  std::int64_t expected = dc(3, 64) + dc(64, 128) + dc(128, 256) + dc(256, 512) + dc(512, 1024) + 64 * 2 + 2;
  for (std::int64_t a : {1024, 512, 256, 128}) expected += 4 * a * (a / 2) + a / 2 + dc(a, a / 2);
  EXPECT_EQ(net.parameter_count(), expected);
  EXPECT_EQ(expected, 31'037'698);
}

TEST(GraphModels, EveryModelSolvesAndVerifiesSmallAndFull) {
  for (const bool small : {true, false})
    for (memfmt::dtype type : {memfmt::dtype::float32, memfmt::dtype::bfloat16}) {
      models::options o;
      o.type = type;
      o.batch = small ? 1 : 8;
      o.width = small ? 0.25 : 1.0;
      o.resolution = small ? 32 : 224;  // 32: VGG's last map 1x1, upsampled to 7x7 as the adaptive pool does
      o.frames = small ? 4 : 16;
      const std::pair<const char*, network> nets[] = {{"resnet18", models::resnet18(o)},
                                                      {"resnet50", models::resnet50(o)},
                                                      {"resnext50", models::resnext50_32x4d(o)},
                                                      {"mobilenet_v2", models::mobilenet_v2(o)},
                                                      {"vgg16_bn", models::vgg16_bn(o)},
                                                      {"unet", models::unet(o)},
                                                      {"r3d_18", models::r3d_18(o)},
                                                      {"shufflenet_v2", models::shufflenet_v2_x1_0(o)},
                                                      {"convnext_tiny", models::convnext_tiny(o)}};
      for (const auto& [name, net] : nets) {
        SCOPED_TRACE(std::string(name) + (small ? " small " : " full ") + std::string(memfmt::to_string(type)));
        const cost_model model;
        const plan p = solve(net, model);
        EXPECT_EQ(verify(net, model, p), std::vector<std::string>{});
        EXPECT_GT(p.total(), 0);
      }
    }
}

TEST(GraphModels, OptionsAreChecked) {
  models::options o;
  o.resolution = 100;
  expect_error([&] { models::vgg16_bn(o); }, memfmt::errc::invalid_argument, {"vgg16_bn", "resolution 100"});
  expect_error([&] { models::unet(o); }, memfmt::errc::invalid_argument, {"unet", "resolution 100", "16"});
  o.resolution = 224;
  o.width = 0;
  expect_error([&] { models::resnet50(o); }, memfmt::errc::invalid_argument, {"resnet50", "width 0"});
  o.width = 1;
  o.batch = -1;
  expect_error([&] { models::mobilenet_v2(o); }, memfmt::errc::invalid_argument, {"mobilenet_v2", "batch -1"});
}

}  // namespace
