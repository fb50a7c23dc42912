// Each public header compiles on its own.
#include "memfmt/runtime/parameter_store.hpp"
