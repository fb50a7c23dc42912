// Each public header compiles on its own.
#include "memfmt/io/plan_json.hpp"
