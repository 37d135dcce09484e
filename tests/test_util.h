// Small helpers shared by the test suites.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "dtlab/core/sanitizer.h"  // DTLAB_ADDRESS_SANITIZER, DTLAB_THREAD_SANITIZER
#include "dtlab/tooling/build_paths.h"  // DTLAB_SOURCE_DIR, DTLAB_BINARY_DIR, DTLAB_PROGRAM

namespace dtlab::test {

// Note [Sanitized tests]: a sanitized build (docs/SANITIZERS.md) runs several times slower, a
// rank binary's start included (LibTorch loaded under ThreadSanitizer takes seconds). A time bound
// that counts a process's start is multiplied by kSlowdown, so the sanitizers check the same
// paths while the normal build keeps its bound; what a test asserts about which path was taken
// (the message) is unchanged.
#if defined(DTLAB_THREAD_SANITIZER)
inline constexpr double kSlowdown = 6;
#elif defined(DTLAB_ADDRESS_SANITIZER)
inline constexpr double kSlowdown = 3;
#else
inline constexpr double kSlowdown = 1;
#endif

// A new, empty folder under the build tree's test scratch area, unique to this process.
inline std::filesystem::path fresh_temp_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(DTLAB_BINARY_DIR) / "test-scratch" /
                                    (name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// "c3a9" -> the bytes 0xc3 0xa9: the golden files carry invalid UTF-8 as hex.
inline std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

}  // namespace dtlab::test

// Expects `statement` to throw `type` whose what() contains `needle`.
#define EXPECT_THROW_WITH(statement, type, needle)                                    \
  do {                                                                                \
    try {                                                                             \
      statement;                                                                      \
      ADD_FAILURE() << "expected " #type " containing \"" << (needle) << "\"";        \
    } catch (const type& e) {                                                         \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)                \
          << "message was: " << e.what();                                             \
    }                                                                                 \
  } while (0)
