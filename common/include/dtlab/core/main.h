// The one place where exceptions become messages and exit codes, shared by every binary.
#pragma once

#include <functional>

namespace dtlab {

// Runs body() and maps what it throws to one line on stderr and an ExitCode:
//   NotImplemented -> "TODO not done: <message>", kExitNotImplemented
//   Error          -> "error: <message>", kExitUsage
//   anything else  -> "internal error: <what>", kExitInternal (LibTorch's backtrace trimmed)
int run_main(const char* program, const std::function<int()>& body);

}  // namespace dtlab
