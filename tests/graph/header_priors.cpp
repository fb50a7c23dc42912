// Each public header compiles on its own.
#include "memfmt/graph/priors.hpp"
