// The memfmt command line as a function, so that the binary and the in-process fuzzer run the same
// code with their own argv and streams.
#pragma once

#include <iosfwd>

namespace memfmt_cli {

// Runs `memfmt argv[1] ...`, answering on `out` and reporting problems on `err`. Returns the exit
// code: 0 answered, 1 the operation has no answer (PyTorch rejects it, or it is past memfmt's
// limits; the reason is printed), 2 bad arguments (with usage), 3 an internal error (a bug).
int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace memfmt_cli
