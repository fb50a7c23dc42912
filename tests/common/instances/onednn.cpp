#include "extern_onednn.hpp"

template class memfmt::runtime::executor<memfmt::onednn::backend>;
template class memfmt::runtime::trainer<memfmt::onednn::backend>;
