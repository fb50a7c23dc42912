// memfmt/backends/onednn/cpu_support.hpp - which element types oneDNN computes in on this CPU.
//
// oneDNN 2.6 builds its bfloat16 convolutions, batch norms and binary ops only where it may use
// avx512_core (AVX-512 F, CD, BW, VL and DQ; without AVX512_BF16 it emulates the bf16 arithmetic);
// on an AVX2-only CPU (AMD Zen 3, many desktop Intel parts) primitive creation fails with "could
// not create a primitive descriptor iterator". float16 it computes in on no x86-64 CPU. The
// backend asks here before it builds a primitive, so a caller gets errc::unsupported_dtype naming
// what is missing, and tests, benchmarks and planners can ask the same question up front.
//
// What counts is the instruction set oneDNN itself will use: dnnl::get_effective_cpu_isa(), the
// best one that both the CPU and the DNNL_MAX_CPU_ISA environment variable allow (so
// DNNL_MAX_CPU_ISA=AVX2 on an AVX-512 machine behaves exactly as an AVX2-only CPU).
#pragma once

#include <cstdlib>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "../../dtype.hpp"
#include "../../error.hpp"

namespace memfmt::onednn {

// oneDNN's own name of an instruction set (DNNL_MAX_CPU_ISA's spelling, lower case).
inline const char* isa_name(dnnl::cpu_isa isa) noexcept {
  switch (isa) {
    case dnnl::cpu_isa::all: return "all";
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    default: return "unknown";  // an ISA of a later oneDNN
  }
}

// The instruction set oneDNN uses on this CPU (the CPU's best, capped by DNNL_MAX_CPU_ISA).
inline dnnl::cpu_isa effective_isa() { return dnnl::get_effective_cpu_isa(); }

// oneDNN's ISA values are bit sets in which every ISA contains the ones it extends
// (avx512_core_bf16 contains avx512_core, avx2_vnni contains avx2 but not avx512_core).
inline bool isa_includes(dnnl::cpu_isa have, dnnl::cpu_isa need) noexcept {
  const unsigned h = static_cast<unsigned>(have), n = static_cast<unsigned>(need);
  return (h & n) == n;
}

// Whether this backend computes in an element type on this CPU, and if not, why.
struct dtype_support {
  bool supported = false;
  std::string needs;   // the ISA it would need ("avx512_core"); empty when none would do or none is needed
  std::string reason;  // empty when supported, else e.g. "bfloat16 needs avx512_core (...) on this CPU; ..."
};

inline dtype_support support_for(dtype t) {
  dtype_support s;
  const std::string name(to_string(t));
  if (t == dtype::float32) {
    s.supported = true;
  } else if (t == dtype::bfloat16) {
    const dnnl::cpu_isa have = effective_isa();
    s.supported = isa_includes(have, dnnl::cpu_isa::avx512_core);
    if (!s.supported) {
      s.needs = isa_name(dnnl::cpu_isa::avx512_core);
      s.reason =
          name + " needs " + s.needs + " (AVX-512 F, CD, BW, VL and DQ) on this CPU; oneDNN uses " + isa_name(have);
      if (const char* cap = std::getenv("DNNL_MAX_CPU_ISA")) s.reason += std::string(" (DNNL_MAX_CPU_ISA=") + cap + ")";
    }
  } else if (t == dtype::float16) {
    s.reason = name + ": oneDNN 2.6 has no float16 convolution, batch norm or binary op on x86-64 CPUs";
  } else {
    s.reason = name + ": the oneDNN backend computes in float32 and bfloat16 only";
  }
  return s;
}

inline bool supports(dtype t) { return support_for(t).supported; }

namespace detail {

// Throws errc::unsupported_dtype naming `op` when this backend cannot compute in `t` on this CPU.
inline void require_supported(dtype t, const char* op) {
  const dtype_support s = support_for(t);
  if (!s.supported) memfmt::detail::fail(errc::unsupported_dtype, std::string(op) + ": " + s.reason);
}

}  // namespace detail
}  // namespace memfmt::onednn
