// Each public header compiles on its own.
#include "memfmt/runtime/random_parameters.hpp"
