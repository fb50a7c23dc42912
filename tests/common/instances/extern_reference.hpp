// The executor and trainer for the reference backend, instantiated once per build (reference.cpp)
// and declared extern here for every translation unit of a target that links them.
#pragma once
#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/runtime/executor.hpp"
#include "memfmt/runtime/training.hpp"

extern template class memfmt::runtime::executor<memfmt::reference::backend>;
extern template class memfmt::runtime::trainer<memfmt::reference::backend>;
