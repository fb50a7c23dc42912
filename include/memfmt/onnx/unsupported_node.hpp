// memfmt/onnx/unsupported_node.hpp - an ONNX node the network cannot express.
//
// The importer plans around such a node as an opaque barrier and refuses to run it; this record
// says which node and why. It needs no ONNX library, so a program built without the importer (the
// CLI reading a network JSON) can hold and print the same list.
#pragma once

#include <string>

namespace memfmt::onnx {

struct unsupported_node {
  std::string node;       // the network's opaque node (one per output of the ONNX node); empty for an
                          // output that is no network value (rank 0, 1 or over 5, no static shape)
  std::string onnx_node;  // the ONNX node's name (or "#index" when it has none)
  std::string op;         // its op_type (domain-qualified outside the default domain)
  std::string reason;
};

}  // namespace memfmt::onnx
