// runtime/instances.hpp's extern declarations name the templates as they are: an extern template
// declaration that matches no template does not compile. (The instance libraries of memfmt's own
// build use MEMFMT_INSTANTIATE_RUNTIME, cmake/memfmt_instances.cmake.)
#include <memfmt/backends/reference/backend.hpp>
#include <memfmt/runtime/instances.hpp>

MEMFMT_EXTERN_RUNTIME(memfmt::reference::backend)
