// Each public header compiles on its own.
#include "memfmt/runtime/tensor_ref.hpp"
