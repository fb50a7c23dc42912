#include "extern_reference.hpp"

template class memfmt::runtime::executor<memfmt::reference::backend>;
template class memfmt::runtime::trainer<memfmt::reference::backend>;
