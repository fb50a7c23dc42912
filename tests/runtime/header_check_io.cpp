// Each public header compiles on its own.
#include "memfmt/runtime/check_io.hpp"
