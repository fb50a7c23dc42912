// Runs the memfmt binary (MEMFMT_CLI_PATH) with arguments and collects its exit code and output;
// expect_usage_errors checks that each of a list of argument lists is refused with the usage text.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#ifndef MEMFMT_CLI_PATH
#error "MEMFMT_CLI_PATH must name the memfmt binary"
#endif

namespace memfmt_test {

struct run_result {
  int exit_code = -1;
  std::string output;  // stdout, and stderr too unless it was dropped
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline run_result run_cli(const std::vector<std::string>& args, bool with_stderr = true) {
  std::string cmd = shell_quote(MEMFMT_CLI_PATH);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += with_stderr ? " 2>&1" : " 2>/dev/null";
  run_result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  std::size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Each argument list is a usage error: exit code 2 and the usage text.
inline void expect_usage_errors(const std::vector<std::vector<std::string>>& bad) {
  for (const auto& args : bad) {
    std::string line;
    for (const auto& a : args) line += " " + a;
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << "memfmt" << line << "\n" << r.output;
    EXPECT_NE(r.output.find("Usage"), std::string::npos) << "memfmt" << line << "\n" << r.output;
  }
}

}  // namespace memfmt_test
