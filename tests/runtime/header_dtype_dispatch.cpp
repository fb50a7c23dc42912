// Each public header compiles on its own.
#include "memfmt/dtype_dispatch.hpp"
