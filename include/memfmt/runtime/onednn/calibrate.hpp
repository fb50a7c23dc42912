// memfmt/runtime/onednn/calibrate.hpp - runtime::calibrate on the oneDNN backend.
//
// A oneDNN timing belongs to the CPU model, the instruction set oneDNN dispatches to (its effective
// ISA: DNNL_MAX_CPU_ISA=AVX2 on an AVX-512 machine runs other kernels, so it is another device)
// and the oneDNN version. calibration_key gives that key; runtime::calibrate finds it by
// argument-dependent lookup and times the conv and batch-norm signatures, the kinds this backend
// runs (the memory-bound rest keeps its priors, which cost both formats the same).
#pragma once

#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "../../graph/timing_cache.hpp"
#include "../calibrate.hpp"
#include "../../backends/onednn/backend.hpp"
#include "../../backends/onednn/cpu_support.hpp"

namespace memfmt::onednn {

inline std::string library_version() {
  const dnnl_version_t* v = dnnl::version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

inline graph::cache_key calibration_key(const backend&) {
  return {runtime::host_cpu_model() + " (isa " + isa_name(effective_isa()) + ")", backend::name, library_version()};
}

}  // namespace memfmt::onednn
