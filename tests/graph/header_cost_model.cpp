// Each public header compiles on its own.
#include "memfmt/graph/cost_model.hpp"
