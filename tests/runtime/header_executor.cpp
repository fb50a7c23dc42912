// Each public header compiles on its own.
#include "memfmt/runtime/executor.hpp"
