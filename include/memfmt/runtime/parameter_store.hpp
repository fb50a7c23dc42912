// memfmt/runtime/parameter_store.hpp - the runtime's names for a network's parameters.
//
// The store is a graph-level type (graph/parameter_store.hpp): the ONNX importer and the
// safetensors reader fill it, the executor and trainer read it, and neither side includes the other.
#pragma once

#include "../graph/parameter_store.hpp"

namespace memfmt::runtime {

using graph::describe;
using graph::parameter;
using graph::parameter_store;

}  // namespace memfmt::runtime
