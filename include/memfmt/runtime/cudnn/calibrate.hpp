// memfmt/runtime/cudnn/calibrate.hpp - runtime::calibrate on the cuDNN backend.
//
// A cuDNN timing belongs to the GPU (its name and compute capability: engines are chosen per
// architecture) and to the cuDNN library actually loaded (cudnnGetVersion, not the headers':
// heuristics and engines change between releases). calibration_key gives that key;
// runtime::calibrate finds it by argument-dependent lookup, stages its data in device memory
// through the backend's hooks and times with the backend's stream synchronised.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "../../error.hpp"
#include "../../graph/timing_cache.hpp"
#include "../calibrate.hpp"
#include "../../backends/cudnn/backend.hpp"
#include "../../backends/cudnn/status.hpp"

namespace memfmt::cudnn {

// The key of timings on CUDA device `device` with the cuDNN library loaded in this process, e.g.
// {"NVIDIA H100 80GB HBM3 (sm_90)", "cudnn", "9.19.0"}. Needs no backend, so a tool can name the
// key (and refuse another device's cache file) before creating one. Without a CUDA device:
// memfmt::error(unsupported) naming what cudaGetDeviceCount returned.
inline graph::cache_key device_calibration_key(int device) {
  const int count = require_device("cuDNN calibration");
  if (device < 0 || device >= count)
    memfmt::detail::fail(errc::invalid_argument, "cuDNN calibration: CUDA device " + std::to_string(device) +
                                                     " does not exist (" + std::to_string(count) + " found)");
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  return {std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ")", backend::name,
          version::decode(cudnnGetVersion()).to_string()};
}

// The key for the current CUDA device, the one a backend created now would use.
inline graph::cache_key device_calibration_key() {
  require_device("cuDNN calibration");
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return device_calibration_key(device);
}

// The key of timings made through `b`: its device.
inline graph::cache_key calibration_key(const backend& b) { return device_calibration_key(b.device()); }

}  // namespace memfmt::cudnn
