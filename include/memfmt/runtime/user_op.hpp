// memfmt/runtime/user_op.hpp - the function an opaque layer runs, with the formats it declares.
//
// An opaque node (graph::network::opaque) is a layer memfmt knows nothing about: the executor reads
// its spatial inputs in the node's input format, hands them over, and expects the output back in
// the node's output format. The user attaches a user_op with network::set_callback. The op states
// its formats itself so that a mismatch with the node (a PyTorch op that "loses channels_last" but
// is declared channels_last) is found when the executor is built, before any work; `run` must
// also leave output.format at the format it wrote, which the executor checks after each call.
#pragma once

#include <functional>
#include <vector>

#include "../format/dispatch.hpp"
#include "tensor_ref.hpp"

namespace memfmt::runtime {

struct user_op {
  memfmt::format_family input_format = memfmt::format_family::channels_first;   // what run reads
  memfmt::format_family output_format = memfmt::format_family::channels_first;  // what run writes
  // inputs: the node's inputs in order (spatial ones in input_format). output: the node's dtype and
  // extents, format output_format and the buffer to fill; run sets output.format to what it wrote
  // if that differs, and must not change the other fields.
  std::function<void(const std::vector<tensor_ref>& inputs, tensor_ref& output)> run;
};

}  // namespace memfmt::runtime
