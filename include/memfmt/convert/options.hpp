// memfmt/convert/options.hpp - knobs of the CPU conversion.
#pragma once

namespace memfmt {

struct convert_options {
  // 0 = OpenMP's default (all cores); 1 = single thread; n = at most n threads. Small tensors use
  // fewer threads than asked: a thread must have enough bytes to be worth waking.
  int num_threads = 0;
  // Large outputs are written with non-temporal stores: they skip the read-for-ownership a normal
  // store pays, which otherwise caps a transpose near 55 % of memcpy.
  bool allow_streaming_stores = true;
};

}  // namespace memfmt
