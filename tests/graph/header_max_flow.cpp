// Each public header compiles on its own.
#include "memfmt/graph/detail/max_flow.hpp"
