// Error types every part of dtlab throws. Drivers turn them into one line and an exit code;
// see run_main in core/main.h.
#pragma once

#include <stdexcept>
#include <string>

namespace dtlab {

// A problem the user can fix (bad flag, missing file, malformed input). The message names the
// file, line, flag or rank and, where it helps, what to try.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Thrown by an exercise region a student has not written yet. The message is the TODO's own
// text, starting with "TODO(<exercise>):".
class NotImplemented : public Error {
 public:
  explicit NotImplemented(const std::string& todo) : Error(todo) {}
};

// A distributed operation that did not complete: another rank stopped, the network failed, or a
// rendezvous or collective timed out. The message names this rank and the operation.
class DistError : public Error {
 public:
  explicit DistError(const std::string& message) : Error(message) {}
};

// The ranks called different collectives (desync detection, dist/group.h): every rank stops with
// one line that says what each rank called.
class DesyncError : public DistError {
 public:
  explicit DesyncError(const std::string& message) : DistError(message) {}
};

// Exit codes of every dtlab binary, so the grader can tell outcomes apart.
enum ExitCode : int {
  kExitOk = 0,
  kExitInternal = 1,        // a bug or an unexpected library error
  kExitUsage = 2,           // a dtlab::Error: bad input, flag or file
  kExitNotImplemented = 3,  // a TODO is not done
  kExitDistributed = 4,     // another rank failed, or a rendezvous or collective timed out
  kExitDesync = 5,          // the ranks called different collectives (desync detection)
};

}  // namespace dtlab
