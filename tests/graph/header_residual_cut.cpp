// Each public header compiles on its own.
#include "memfmt/graph/detail/residual_cut.hpp"
