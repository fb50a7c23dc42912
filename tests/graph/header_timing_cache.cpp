// Each public header compiles on its own.
#include "memfmt/graph/timing_cache.hpp"
