// What every harness shares: a reader's dtlab::Error is a normal outcome, but its message must
// be one short line; any other exception escapes, and libFuzzer reports it as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "dtlab/core/error.h"

namespace dtlab::fuzz {

// Longer than any message the readers write for a hostile input (their quotes are cut at
// io::kExcerptBytes), shorter than a file pasted whole.
constexpr size_t kMaxErrorBytes = 2000;

inline void check_error_message(const char* message) {
  const size_t n = std::strlen(message);
  if (n == 0 || n > kMaxErrorBytes || std::strpbrk(message, "\n\r") != nullptr) {
    std::fprintf(stderr, "dtlab::Error is not one short line (%zu bytes):\n%s\n", n, message);
    std::abort();
  }
}

// Runs f, accepting a dtlab::Error whose message is one short line.
template <typename F>
void expect_error_or_success(F&& f) {
  try {
    f();
  } catch (const dtlab::Error& e) {
    check_error_message(e.what());
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Several files in one input: the parts between separator lines "\n@@\n" (docs/FUZZING.md).
inline std::vector<std::string_view> split_parts(std::string_view text) {
  constexpr std::string_view kSeparator = "\n@@\n";
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t at = text.find(kSeparator, start);
    if (at == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, at - start));
    start = at + kSeparator.size();
  }
}

}  // namespace dtlab::fuzz
