// memfmt/format/memory_format.hpp - PyTorch's runtime memory-format vocabulary.
//
// As in PyTorch, a memory_format is not a property of a tensor: it is a request to an operation
// ("lay the result out like this"). `preserve` means "follow the input".
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace memfmt {

enum class memory_format : std::uint8_t { contiguous, channels_last, channels_last_3d, preserve };

constexpr std::string_view to_string(memory_format f) noexcept {
  switch (f) {
    case memory_format::contiguous: return "contiguous";
    case memory_format::channels_last: return "channels_last";
    case memory_format::channels_last_3d: return "channels_last_3d";
    case memory_format::preserve: return "preserve";
  }
  return "?";
}

constexpr std::optional<memory_format> parse_memory_format(std::string_view s) noexcept {
  if (s == "contiguous") return memory_format::contiguous;
  if (s == "channels_last") return memory_format::channels_last;
  if (s == "channels_last_3d") return memory_format::channels_last_3d;
  if (s == "preserve") return memory_format::preserve;
  return std::nullopt;
}

inline constexpr memory_format all_memory_formats[] = {memory_format::contiguous, memory_format::channels_last,
                                                       memory_format::channels_last_3d, memory_format::preserve};

}  // namespace memfmt
