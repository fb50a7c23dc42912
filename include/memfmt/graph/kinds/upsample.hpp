// memfmt/graph/kinds/upsample.hpp - the layer kind `upsample`: nearest or linear resampling to a size
// (PyTorch's Upsample, ONNX's Resize with its coordinate modes).
#pragma once

#include <string>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::upsample> : stored_attrs<memfmt::upsample_params> {
  static constexpr enum_names<memfmt::resample_mode, 2> modes{{"nearest", "linear"}};
  static constexpr enum_names<memfmt::resample_coordinates, 6> coordinates{
      {"pytorch", "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"}};
  static constexpr enum_names<memfmt::nearest_rounding, 4> roundings{
      {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}};
  static constexpr int inputs = 1;
  // ONNX's coordinates only where set: PyTorch's upsamples keep their JSON.
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("mode", a.mode, modes);
    c.field("output", a.output);
    if (c.present("coordinates", a.coordinates != memfmt::resample_coordinates::pytorch)) {
      c.field("coordinates", a.coordinates, coordinates);
      c.field("rounding", a.rounding, roundings);
      c.field("scale", a.scale);
    }
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    return net.upsample(n.name, n.inputs[0], a);
  }
  static void signature(const node& n, std::size_t, std::string& s) {
    const auto& u = n.get<memfmt::upsample_params>();
    s += " mode " + std::to_string(static_cast<int>(u.mode));
    if (u.coordinates != memfmt::resample_coordinates::pytorch)
      s += " coordinates " + std::to_string(static_cast<int>(u.coordinates)) + " rounding " +
           std::to_string(static_cast<int>(u.rounding)) + " scale " + std::to_string(u.scale[0]) + " " +
           std::to_string(u.scale[1]) + " " + std::to_string(u.scale[2]);
  }
  static void query(const node& n, op_query& q) {
    q.resample = n.get<memfmt::upsample_params>().mode;
    q.coordinates = n.get<memfmt::upsample_params>().coordinates;
  }
};

}  // namespace memfmt::graph
