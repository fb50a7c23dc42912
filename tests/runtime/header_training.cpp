// Each public header compiles on its own.
#include "memfmt/runtime/training.hpp"
