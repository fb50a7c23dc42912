// Each public header compiles on its own.
#include "memfmt/backends/op_query.hpp"
