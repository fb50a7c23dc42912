// Test helpers over the models header: options for a dtype and size, priors with an indifferent
// batch norm, and a greedy local pusher to compare plans with.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/network.hpp"
#include "memfmt/graph/plan.hpp"

namespace zoo {

using namespace memfmt::graph;
using memfmt::format_family;

inline models::options sized(memfmt::dtype type, std::int64_t batch, std::int64_t resolution = 224) {
  models::options o;
  o.type = type;
  o.batch = batch;
  o.resolution = resolution;
  return o;
}

// Priors with batch norm indifferent to the format (its default NCHW penalty off), for tests of
// the tie rules, where memory-bound layers must be free to inherit.
inline cost_priors indifferent_batch_norm() {
  cost_priors p;
  p.batch_norm_channels_last_speedup_fp32 = p.batch_norm_channels_last_speedup_low_precision = 1.0;
  return p;
}

// An ORT-style greedy pusher: start from the naive per-layer choice and flip one layer at a time, in
// id order, whenever that strictly lowers the total; stop when no single flip helps.
inline plan greedy_plan(const network& net, const cost_model& model, const plan& start) {
  std::vector<std::optional<format_family>> formats;
  for (const auto& d : start.nodes) formats.push_back(d.format);
  cost_t best = start.total();
  for (bool improved = true; improved;) {
    improved = false;
    for (node_id id = 0; id < net.size(); ++id) {
      if (!formats[id] || !model.allowed(net, id, other(*formats[id]))) continue;
      formats[id] = other(*formats[id]);
      const cost_t t = make_plan(net, model, formats).total();
      if (t < best) {
        best = t;
        improved = true;
      } else {
        formats[id] = other(*formats[id]);
      }
    }
  }
  return make_plan(net, model, formats);
}

inline memfmt::pad_params padding(memfmt::pad_mode mode, std::int64_t p) {
  memfmt::pad_params q;
  q.mode = mode;
  q.begin = q.end = {p, p, p};
  return q;
}

// The Mixed module of fixtures/record_eager_formats.py, layer for layer and name for name: layers
// with and without channels_last support in torch 1.13, operand orders, a barrier, a gate, a
// reduction.
inline network eager_mixed() {
  using memfmt::activation;
  network net;
  node_id h = net.input("x", {2, 8, 16, 16}, memfmt::dtype::float32, format_family::channels_last);
  h = net.relu("relu", net.batch_norm("bn", net.conv("stem", h, conv_spec(16, 3, 1, 1, 1, true))));
  h = net.conv_transpose("up", h, conv_transpose_spec(16, 2, 2, 0, 0, 1, true));
  h = net.activation("silu", net.batch_norm("bn_up", h), activation::silu);
  h = net.instance_norm("inorm", net.conv("pw", h, conv_spec(16, 1, 1, 0, 1, true)));
  h = net.pad("rpad", net.conv("dw", h, conv_spec(16, 3, 1, 1, 16, true)), padding(memfmt::pad_mode::reflect, 1));
  h = net.pad("rep", net.conv("conv3", h, conv_spec(16, 3, 1, 0, 1, true)), padding(memfmt::pad_mode::replicate, 1));
  h = net.pad("zpad", net.conv("conv4", h, conv_spec(16, 3, 1, 0, 1, true)), padding(memfmt::pad_mode::constant, 1));
  h = net.max_pool("pool", net.group_norm("gn", net.conv("conv5", h, conv_spec(16, 3, 1, 0, 1, true)), 4), 2, 2);
  const node_id u = net.upsample("upsample", h, 2);
  const node_id s = net.softmax("softmax", u);
  const node_id a = net.add("add_cf_first", s, u);
  const node_id b = net.add("add_cl_first", u, s);
  const node_id m = net.concat("cat_mixed", {b, a});
  net.output("out_cat", net.concat("cat_cf_first", {a, b}), format_family::channels_first);
  const node_id c = net.concat("cat_cl", {b, u});
  const node_id shuffled =
      net.opaque("shuffle", {c}, {2, 32, 32, 32}, format_family::channels_first, format_family::channels_last);
  h = net.avg_pool("avgpool", net.conv("conv6", shuffled, conv_spec(16, 3, 1, 1, 1, true)), 3, 1, 1);
  const node_id g = net.activation("gate", net.conv("fc", net.global_pool("gap", h), conv_spec(16, 1, 1, 0, 1, true)),
                                   activation::sigmoid);
  const node_id y = net.mul("scale_gate_first", g, net.mul("scale_cl", h, g));
  const node_id z = net.instance_norm("inorm2", net.conv("conv7", m, conv_spec(16, 3, 1, 1, 1, true)));
  net.output("out_y", y, format_family::channels_last);
  net.output("out_z", net.mul("scale_cf", z, g), format_family::channels_first);
  net.output("out_h", net.reduce("pool_h", y, {memfmt::reduce_op::mean, memfmt::axis_bit(2)}),
             format_family::channels_first);
  return net;
}

// record_eager_formats.py's ConvNeXtStyle: layer norm over C after a channels_last conv and after
// a contiguous instance norm (both give channels_last in PyTorch), GELU.
inline network eager_convnext() {
  network net;
  node_id h = net.input("x", {2, 8, 8, 8}, memfmt::dtype::float32, format_family::channels_last);
  h = net.layer_norm("norm1", net.conv("stem", h, conv_spec(16, 3, 1, 1, 1, true)), 1e-6);
  h = net.instance_norm("inorm", net.activation("gelu", h, memfmt::activation::gelu));
  h = net.conv("dw", net.layer_norm("norm2", h, 1e-6), conv_spec(16, 3, 1, 1, 16, true));
  net.output("y", net.conv("pw", h, conv_spec(32, 1, 1, 0, 1, true)), format_family::channels_last);
  return net;
}

}  // namespace zoo
