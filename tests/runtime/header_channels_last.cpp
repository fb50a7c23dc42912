// Each public header compiles on its own.
#include "memfmt/runtime/channels_last.hpp"
