// Each public header compiles on its own.
#include "memfmt/backends/dnnl/backward.hpp"
