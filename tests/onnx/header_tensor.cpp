// Each public header compiles on its own.
#include "memfmt/onnx/tensor.hpp"
