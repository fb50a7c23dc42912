// Each public header compiles on its own.
#include "memfmt/onnx/import.hpp"
