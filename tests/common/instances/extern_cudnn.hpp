// The executor and trainer for the cudnn backend, instantiated once per build (cudnn.cpp) and declared
// extern here for every translation unit of a target that links them.
#pragma once
#include "memfmt/backends/cudnn/backend.hpp"
#include "memfmt/runtime/executor.hpp"
#include "memfmt/runtime/training.hpp"

extern template class memfmt::runtime::executor<memfmt::cudnn::backend>;
extern template class memfmt::runtime::trainer<memfmt::cudnn::backend>;
