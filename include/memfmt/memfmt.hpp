// memfmt/memfmt.hpp - the CPU umbrella header: formats, layouts, typed views and tensors,
// strided-tensor classification (PyTorch's rules) and the CPU conversion. It never includes CUDA,
// cuDNN or oneDNN headers; those live under memfmt/backends/ and memfmt/convert/cuda/.
#pragma once

#include "config.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "format/layout.hpp"
#include "format/memory_format.hpp"
#include "format/dispatch.hpp"
#include "format/tags.hpp"
#include "tensor/host_tensor.hpp"
#include "tensor/relabel.hpp"
#include "tensor/tensor_view.hpp"
#include "strided/descriptor.hpp"
