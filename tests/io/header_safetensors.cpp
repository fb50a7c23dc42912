// Each public header compiles on its own.
#include "memfmt/io/safetensors.hpp"
