// Each public header compiles on its own.
#include "memfmt/runtime/select_plan.hpp"
