// prefetch.hpp compiles on its own (first include of its translation unit).
#include "memfmt/convert/detail/prefetch.hpp"
