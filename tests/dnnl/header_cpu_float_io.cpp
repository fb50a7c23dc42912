// Each public header compiles on its own.
#include "memfmt/backends/cpu/float_io.hpp"
