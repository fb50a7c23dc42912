// Each public header compiles on its own.
#include "memfmt/runtime/backend_support.hpp"
