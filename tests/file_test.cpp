#include <gtest/gtest.h>

#include <filesystem>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace file_test {

namespace fs = std::filesystem;

TEST(AtomicWrite, ReplacesTheTargetAndLeavesNoTemporaryFile) {
  const fs::path dir = dtlab::test::fresh_temp_dir("atomic");
  const fs::path target = dir / "sub" / "out.txt";
  dtlab::io::write_file_atomically(target, "first");
  dtlab::io::write_file_atomically(target, "second");
  EXPECT_EQ(dtlab::io::read_file(target), "second");
  int files = 0;
  for (const auto& e : fs::directory_iterator(target.parent_path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1) << "a temporary file was left behind";
}

TEST(AtomicWrite, FailureNamesThePathAndKeepsTheOldFile) {
  const fs::path dir = dtlab::test::fresh_temp_dir("atomic_fail");
  const fs::path blocker = dir / "file";
  dtlab::io::write_file_atomically(blocker, "x");
  // A path below a regular file cannot be created.
  EXPECT_THROW_WITH(dtlab::io::write_file_atomically(blocker / "child.txt", "y"), dtlab::Error,
                    "file");
  EXPECT_EQ(dtlab::io::read_file(blocker), "x");
}

TEST(JsonFile, SyntaxErrorNamesFileLineAndColumn) {
  const fs::path dir = dtlab::test::fresh_temp_dir("json");
  dtlab::io::write_file_atomically(dir / "bad.json", "{\n  \"a\": 1,\n  \"b\": ]\n}\n");
  EXPECT_THROW_WITH(dtlab::io::read_json_file(dir / "bad.json"), dtlab::Error, "bad.json:3:");
}

TEST(JsonFile, MissingFileIsAnErrorNamingIt) {
  EXPECT_THROW_WITH(dtlab::io::read_json_file("/nonexistent/dtlab/config.json"), dtlab::Error,
                    "/nonexistent/dtlab/config.json");
}

}  // namespace file_test
