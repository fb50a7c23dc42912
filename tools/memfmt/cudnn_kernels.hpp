// `memfmt run --backend cudnn`'s backend options: memfmt's kernels for the format conversions,
// group norm and the layers cuDNN has no engine for (global average pooling, pooling backward).
// Defined in cudnn_kernels.cu, the one file of the tool nvcc compiles.
#pragma once

#include <memfmt/backends/cudnn/backend.hpp>

namespace memfmt_cli {
memfmt::cudnn::backend_options cudnn_options();
}  // namespace memfmt_cli
