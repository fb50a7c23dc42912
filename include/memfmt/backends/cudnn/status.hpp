// memfmt/backends/cudnn/status.hpp - cuDNN and CUDA errors as memfmt::error, and the version check.
//
// Every cuDNN call of the backend goes through check_cudnn(), every CUDA runtime call through
// check_cuda(): a failure becomes memfmt::error(errc::backend_failure) whose message names the call,
// the status (cudnnGetErrorString / cudaGetErrorString) and cuDNN's own diagnosis of the last
// error (cudnnGetLastErrorString), which is usually the only place the real reason is written.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

static_assert(CUDNN_VERSION >= 90800, "memfmt::cudnn needs cuDNN 9.8 or newer (device-properties descriptors)");

#include <cstddef>
#include <string>

#include "../../error.hpp"

namespace memfmt::cudnn {

namespace detail {

inline std::string last_cudnn_error_string() {
  char buf[1024] = {};
  cudnnGetLastErrorString(buf, sizeof(buf));
  return std::string(buf);
}

}  // namespace detail

// Throws memfmt::error(backend_failure) unless `s` is CUDNN_STATUS_SUCCESS. `what` names the call.
inline void check_cudnn(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  std::string msg = std::string("cuDNN: ") + what + " failed: " + cudnnGetErrorString(s) + " (" +
                    std::to_string(static_cast<int>(s)) + ")";
  const std::string last = detail::last_cudnn_error_string();
  if (!last.empty()) msg += "; cuDNN says: " + last;
  memfmt::detail::fail(errc::backend_failure, msg);
}

// Throws memfmt::error(backend_failure) unless `e` is cudaSuccess. Clears the sticky-free last error.
inline void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  memfmt::detail::fail(errc::backend_failure,
                       std::string("CUDA: ") + what + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

// cuDNN encodes versions as major * 10000 + minor * 100 + patch since 9.0.
struct version {
  int major = 0, minor = 0, patch = 0;
  static constexpr version decode(std::size_t v) noexcept {
    return version{static_cast<int>(v / 10000), static_cast<int>((v % 10000) / 100), static_cast<int>(v % 100)};
  }
  std::string to_string() const {
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }
};

struct version_report {
  version compiled;           // CUDNN_VERSION of the headers this code was built against
  version loaded;             // cudnnGetVersion() of the library actually loaded
  bool loaded_older = false;  // same major, but a smaller minor: features of the headers may be missing
  std::string warning;        // non-empty when loaded_older
};

// The pure comparison, separated from the library query so it can be tested with any pair.
// Throws memfmt::error(backend_failure) when the majors differ (cuDNN's ABI changes across majors).
inline version_report compare_versions(std::size_t compiled, std::size_t loaded) {
  version_report r{version::decode(compiled), version::decode(loaded), false, {}};
  if (r.compiled.major != r.loaded.major)
    memfmt::detail::fail(errc::backend_failure, "cuDNN version mismatch: memfmt was compiled against cuDNN " +
                                                    r.compiled.to_string() + " but cuDNN " + r.loaded.to_string() +
                                                    " is loaded (the major versions must match)");
  if (r.loaded.minor < r.compiled.minor) {
    r.loaded_older = true;
    r.warning = "cuDNN " + r.loaded.to_string() + " is loaded but memfmt was compiled against " +
                r.compiled.to_string() + "; attributes newer than the loaded library may be rejected";
  }
  return r;
}

// Heuristics and plans are built for a device-properties descriptor (plan.hpp), which cuDNN 9.8
// introduced. Throws memfmt::error(backend_failure) naming the loaded version when it is older.
inline void require_device_properties(const version& loaded) {
  if (loaded.major == 9 && loaded.minor < 8)
    memfmt::detail::fail(errc::backend_failure, "cuDNN " + loaded.to_string() +
                                                    " is loaded; memfmt::cudnn needs cuDNN 9.8 or newer "
                                                    "(device-properties descriptors)");
}

// Checks the loaded library against the headers (CUDNN_VERSION). Needs no GPU.
inline version_report check_version() { return compare_versions(CUDNN_VERSION, cudnnGetVersion()); }

// Number of CUDA devices, 0 when there is none or the driver cannot be used (so callers can skip).
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

// The number of CUDA devices; without one, memfmt::error(unsupported) saying `who` needs one and
// what cudaGetDeviceCount returned (an error such as cudaErrorNoDevice, or zero devices).
inline int require_device(const std::string& who) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return n;
  (void)cudaGetLastError();
  memfmt::detail::fail(errc::unsupported,
                       who + ": no CUDA device (cudaGetDeviceCount returned " +
                           (e != cudaSuccess ? std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e)
                                             : std::string("0 devices")) +
                           ")");
}

}  // namespace memfmt::cudnn
