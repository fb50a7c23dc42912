// tests/common/expect_error.hpp - checks on the memfmt::error a call throws: its code and what its
// message names.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "memfmt/error.hpp"

namespace memfmt_test {

// The message of the memfmt::error fn() throws, after checking its code; "" (and a test failure)
// when it throws none.
template <class Fn>
std::string error_message(Fn&& fn, memfmt::errc expected) {
  try {
    fn();
  } catch (const memfmt::error& e) {
    EXPECT_EQ(e.code(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no memfmt::error thrown";
  return {};
}

// The code of the memfmt::error fn() throws, or nullopt when it throws none.
template <class Fn>
std::optional<memfmt::errc> error_code(Fn&& fn) {
  try {
    fn();
  } catch (const memfmt::error& e) {
    return e.code();
  }
  return std::nullopt;
}

// The message of the memfmt::error fn() throws, whatever its code, or "<no error>" when it throws
// none (so a message check fails showing that).
template <class Fn>
std::string error_text(Fn&& fn) {
  try {
    fn();
  } catch (const memfmt::error& e) {
    return e.what();
  }
  return "<no error>";
}

// fn() throws a memfmt::error with this code whose message contains every fragment.
template <class Fn>
void expect_error(Fn&& fn, memfmt::errc expected, const std::vector<std::string>& fragments) {
  const std::string what = error_message(fn, expected);
  if (what.empty()) return;
  for (const auto& f : fragments) EXPECT_NE(what.find(f), std::string::npos) << "'" << f << "' not in: " << what;
}

}  // namespace memfmt_test
