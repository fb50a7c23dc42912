// memfmt/graph/kinds/rearrange.hpp - the layer kind `rearrange`: channel shuffle, depth-to-space,
// space-to-depth and transposes of spatial dims.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kind_traits.hpp"

namespace memfmt::graph {

template <>
struct kind_traits<layer_kind::rearrange> {
  static constexpr enum_names<memfmt::rearrange_kind, 4> ops{
      {"channel_shuffle", "depth_to_space", "space_to_depth", "transpose"}};
  static constexpr enum_names<memfmt::block_order, 2> orders{{"crd", "dcr"}};
  // A transpose stores its permutation up to the rank; the others a factor, and a block order.
  struct attrs {
    memfmt::rearrange_params params;
    std::vector<std::int64_t> perm;
  };
  static constexpr int inputs = 1;
  static attrs of(const node& n) {
    const auto& r = n.get<memfmt::rearrange_params>();
    return {r,
            std::vector<std::int64_t>(r.perm.begin(), r.perm.begin() + static_cast<std::ptrdiff_t>(n.extents.size()))};
  }
  template <class Codec>
  static void codec(Codec& c, attrs& a) {
    c.field("op", a.params.kind, ops);
    if (a.params.kind == memfmt::rearrange_kind::transpose) {
      c.field("perm", a.perm, int_range{0, 4, "dims 0 to 4"});
      return;
    }
    c.field("factor", a.params.factor);
    if (a.params.kind != memfmt::rearrange_kind::channel_shuffle) c.field("order", a.params.order, orders);
  }
  static node_id build(network& net, const node_args& n, const attrs& a) {
    if (a.params.kind == memfmt::rearrange_kind::transpose)
      return net.transpose(n.name, n.inputs[0], std::vector<int>(a.perm.begin(), a.perm.end()));
    return net.rearrange(n.name, n.inputs[0], a.params);
  }
  static void signature(const node& n, std::size_t, std::string& s) {
    const auto& r = n.get<memfmt::rearrange_params>();
    s += " " + std::string(memfmt::to_string(r.kind)) + " " + std::to_string(r.factor) + " " +
         memfmt::to_string(r.order);
    if (r.kind == memfmt::rearrange_kind::transpose) s += " " + memfmt::perm_to_string(r.perm, n.extents.size());
  }
  static placed eager(const eager_context& e) {
    const memfmt::rearrange_kind k = e.layer().get<memfmt::rearrange_params>().kind;
    if (k == memfmt::rearrange_kind::channel_shuffle)
      return e.contiguous("torchvision's channel_shuffle (view, transpose, contiguous) returns contiguous");
    if (k == memfmt::rearrange_kind::transpose) {
      // permute() is a view whose strides fit neither format; the layers after it keep them.
      placed p = e.keeps_input();
      p.reason = "permute of spatial dims is a view in its input's memory order";
      return p;
    }
    return e.keeps_input();
  }
};

}  // namespace memfmt::graph
