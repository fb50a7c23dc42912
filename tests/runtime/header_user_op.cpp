// Each public header compiles on its own.
#include "memfmt/runtime/user_op.hpp"
