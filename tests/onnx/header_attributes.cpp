// Each public header compiles on its own.
#include "memfmt/onnx/detail/attributes.hpp"
