// memfmt/memfmt.hpp - the CPU umbrella header: formats, layouts, typed views and tensors, checked
// views of foreign strided memory, PyTorch's rules for strided tensors, and the CPU conversion.
// It never includes CUDA, cuDNN, oneDNN or DLPack headers: those live in memfmt/backends/,
// memfmt/convert/cuda/ and memfmt/interop/, included on their own.
#pragma once

#include "config.hpp"
#include "convert/convert.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "format/dispatch.hpp"
#include "format/layout.hpp"
#include "format/memory_format.hpp"
#include "format/tags.hpp"
#include "strided/classify.hpp"
#include "strided/descriptor.hpp"
#include "strided/format_requests.hpp"
#include "strided/op_rules.hpp"
#include "tensor/from_strided.hpp"
#include "tensor/host_tensor.hpp"
#include "tensor/relabel.hpp"
#include "tensor/tensor_view.hpp"
