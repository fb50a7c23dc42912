// Each public header compiles on its own.
#include "memfmt/onnx/run.hpp"
