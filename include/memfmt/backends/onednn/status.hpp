// memfmt/backends/onednn/status.hpp - oneDNN exceptions -> memfmt::error(backend_failure).
//
// Every call into oneDNN goes through guarded(), so the user sees one exception type whose
// message carries oneDNN's status name and text next to what the library was doing.
#pragma once

#include <string>
#include <utility>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include "../../error.hpp"

namespace memfmt::onednn::detail {

// `what` is a string literal: no string is built per call, only for the message.
template <class Fn>
decltype(auto) guarded(const char* what, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const dnnl::error& e) {
    memfmt::detail::fail(errc::backend_failure, std::string("oneDNN ") + what + ": status " +
                                                    std::string(dnnl_status2str(e.status)) + ": " + e.what());
  }
}

}  // namespace memfmt::onednn::detail
