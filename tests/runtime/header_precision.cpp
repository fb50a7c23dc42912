// Each public header compiles on its own.
#include "memfmt/runtime/precision.hpp"
