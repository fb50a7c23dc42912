// Each public header compiles on its own.
#include "memfmt/onnx/backend_test.hpp"
