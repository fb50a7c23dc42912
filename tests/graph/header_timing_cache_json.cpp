// Each public header compiles on its own.
#include "memfmt/io/timing_cache_json.hpp"
