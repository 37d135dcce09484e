#include "dtlab/core/main.h"

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <malloc.h>

#include <cstdio>
#include <exception>

#include "dtlab/core/error.h"

namespace dtlab {

void keep_freed_memory() {
  constexpr int kKeep = 1 << 30;  // Note [Keeping freed memory]
  mallopt(M_MMAP_THRESHOLD, kKeep);
  mallopt(M_TRIM_THRESHOLD, kKeep);
}

int run_main(const char* program, const std::function<int()>& body, bool keep_memory) {
  if (keep_memory) keep_freed_memory();
  try {
    return body();
  } catch (const NotImplemented& e) {
    std::fprintf(stderr, "%s: TODO not done: %s\n", program, e.what());
    return kExitNotImplemented;
  } catch (const DesyncError& e) {
    std::fprintf(stderr, "%s: ranks disagree: %s\n", program, e.what());
    return kExitDesync;
  } catch (const DistError& e) {
    std::fprintf(stderr, "%s: distributed error: %s\n", program, e.what());
    return kExitDistributed;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return kExitUsage;
  } catch (const c10::Error& e) {
    // what() carries a C++ backtrace; the first line without it is the message a person needs.
    std::fprintf(stderr, "%s: internal error (LibTorch): %s\n", program,
                 e.what_without_backtrace());
    return kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
    return kExitInternal;
  }
}

std::optional<int> parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  return std::nullopt;
}

}  // namespace dtlab
