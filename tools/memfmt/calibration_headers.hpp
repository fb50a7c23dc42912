// What --calibrate needs in this build of the CLI: runtime::calibrate, the timing cache file, and
// the calibration key of each backend the CLI was built with (found by argument-dependent lookup).
#pragma once

#ifdef MEMFMT_CLI_HAVE_GRAPH_IO
#include "memfmt/io/timing_cache_json.hpp"
#include "memfmt/runtime/calibrate.hpp"
#ifdef MEMFMT_CLI_HAVE_ONEDNN
#include "memfmt/runtime/onednn/calibrate.hpp"
#endif
#ifdef MEMFMT_CLI_HAVE_CUDNN
#include "memfmt/runtime/cudnn/calibrate.hpp"
#include "cudnn_kernels.hpp"  // calibration times the layers as `memfmt run` runs them
#endif
#endif
