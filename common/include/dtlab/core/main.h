// The one place where exceptions become messages and exit codes, shared by every binary.
#pragma once

#include <functional>
#include <optional>

namespace CLI {
class App;
}

namespace dtlab {

// Runs body() and maps what it throws to one line on stderr and an ExitCode:
//   NotImplemented -> "TODO not done: <message>", kExitNotImplemented
//   Error          -> "error: <message>", kExitUsage
//   anything else  -> "internal error: <what>", kExitInternal (LibTorch's backtrace trimmed)
int run_main(const char* program, const std::function<int()>& body);

// Parses argv into app. Returns the exit code to stop with when parsing ends the program
// (kExitOk after --help, kExitUsage after a bad flag, CLI11's message printed), else nullopt.
std::optional<int> parse_flags(CLI::App& app, int argc, char** argv);

}  // namespace dtlab
