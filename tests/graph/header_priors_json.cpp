// Each public header compiles on its own.
#include "memfmt/io/priors_json.hpp"
