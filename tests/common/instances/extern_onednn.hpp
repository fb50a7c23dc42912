// The executor and trainer for the onednn backend, instantiated once per build (onednn.cpp) and declared
// extern here for every translation unit of a target that links them.
#pragma once
#include "memfmt/backends/dnnl/backend.hpp"
#include "memfmt/runtime/executor.hpp"
#include "memfmt/runtime/training.hpp"

extern template class memfmt::runtime::executor<memfmt::onednn::backend>;
extern template class memfmt::runtime::trainer<memfmt::onednn::backend>;
