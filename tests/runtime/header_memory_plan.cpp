// Each public header compiles on its own.
#include "memfmt/runtime/memory_plan.hpp"
