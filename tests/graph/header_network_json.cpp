// Each public header compiles on its own.
#include "memfmt/io/network_json.hpp"
