#include "extern_cudnn.hpp"

template class memfmt::runtime::executor<memfmt::cudnn::backend>;
template class memfmt::runtime::trainer<memfmt::cudnn::backend>;
