// Fuzz target: the safetensors reader (io/safetensors.hpp) on arbitrary bytes. Properties, besides
// "no crash, no sanitizer report, only memfmt::error": every tensor of a file it accepts holds
// exactly shape x dtype bytes; and writing the store back and reading that again gives the same
// tensors and metadata (a round trip, the independent truth), and the same bytes when written again.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "memfmt/io/safetensors.hpp"

namespace {

using memfmt::graph::parameter_store;
using memfmt_fuzz::require;

void require_same(const parameter_store& a, const parameter_store& b) {
  require(a.size() == b.size(),
          "a round trip changed the tensor count from " + std::to_string(a.size()) + " to " + std::to_string(b.size()));
  require(a.metadata == b.metadata, "a round trip changed __metadata__");
  for (const auto& [name, p] : a) {
    const memfmt::graph::parameter* q = b.find(name);
    require(q != nullptr, "a round trip lost tensor '" + name + "'");
    require(q->type == p.type && q->shape == p.shape && q->bytes == p.bytes,
            "a round trip changed tensor '" + name + "' (" + memfmt::graph::describe(p.type, p.shape) + " -> " +
                memfmt::graph::describe(q->type, q->shape) + ")");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto store = memfmt_fuzz::accepted(
      [&] { return memfmt::io::read_safetensors(reinterpret_cast<const std::byte*>(data), size, "fuzz input"); });
  if (!store) return 0;
  for (const auto& [name, p] : *store) {
    const std::int64_t n = memfmt::detail::checked_numel(p.shape, name.c_str());
    require(p.bytes.size() == memfmt::detail::checked_bytes(n, memfmt::size_of(p.type), name.c_str()),
            "tensor '" + name + "' holds " + std::to_string(p.bytes.size()) + " bytes for " +
                memfmt::graph::describe(p.type, p.shape));
  }
  const std::vector<std::byte> written =
      memfmt_fuzz::must("writing the tensors read", [&] { return memfmt::io::write_safetensors(*store); });
  const parameter_store again = memfmt_fuzz::must(
      "reading the written file back", [&] { return memfmt::io::read_safetensors(written, "written back"); });
  require_same(*store, again);
  require(memfmt::io::write_safetensors(again) == written, "writing the same store twice gave different bytes");
  return 0;
}
