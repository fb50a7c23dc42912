// Each public header compiles on its own.
#include "memfmt/convert/convert.hpp"
