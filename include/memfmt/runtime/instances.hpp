// memfmt/runtime/instances.hpp - the executor, trainer and calibrate of a backend compiled once in
// a program, not once per translation unit.
//
// They are the heaviest templates of the library: a file that runs a network on one backend spends
// most of its compile time instantiating them (examples/run_network.cpp: docs/building.md gives the
// times). In a program of several such files, instantiate them in one file and declare them extern
// in the others, as memfmt's own build does (cmake/memfmt_instances.cmake):
//
//   // runtime_onednn.cpp, the one file that compiles them
//   #include <memfmt/backends/onednn/backend.hpp>
//   #include <memfmt/runtime/instances.hpp>
//   MEMFMT_INSTANTIATE_RUNTIME(memfmt::onednn::backend)
//
//   // every other file, after the same includes (or in a header they all include first)
//   MEMFMT_EXTERN_RUNTIME(memfmt::onednn::backend)
//
// A backend's calibration key (runtime/onednn/calibrate.hpp, runtime/cudnn/calibrate.hpp) must be
// included before either macro where the program calibrates on that backend, so that every file
// sees the same calibrate().
#pragma once

#include "../graph/network.hpp"
#include "../graph/timing_cache.hpp"
#include "calibrate.hpp"
#include "executor.hpp"
#include "training.hpp"

// Declares the executor, trainer and calibrate of `Backend` extern: this file does not compile them.
#define MEMFMT_EXTERN_RUNTIME(Backend)                                             \
  extern template class memfmt::runtime::executor<Backend>;                        \
  extern template class memfmt::runtime::trainer<Backend>;                         \
  extern template memfmt::graph::timing_cache memfmt::runtime::calibrate<Backend>( \
      const memfmt::graph::network&, Backend&, const memfmt::runtime::calibrate_options&);

// Compiles them, once in the program: all three, or each in its own file (the trainer alone takes
// about half of the three's compile time, so three files build in parallel in half the time).
#define MEMFMT_INSTANTIATE_RUNTIME(Backend) \
  MEMFMT_INSTANTIATE_EXECUTOR(Backend)      \
  MEMFMT_INSTANTIATE_TRAINER(Backend)       \
  MEMFMT_INSTANTIATE_CALIBRATE(Backend)
#define MEMFMT_INSTANTIATE_EXECUTOR(Backend) template class memfmt::runtime::executor<Backend>;
#define MEMFMT_INSTANTIATE_TRAINER(Backend) template class memfmt::runtime::trainer<Backend>;
#define MEMFMT_INSTANTIATE_CALIBRATE(Backend)                                                                       \
  template memfmt::graph::timing_cache memfmt::runtime::calibrate<Backend>(const memfmt::graph::network&, Backend&, \
                                                                           const memfmt::runtime::calibrate_options&);
