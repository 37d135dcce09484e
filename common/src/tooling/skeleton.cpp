// Skeleton generation, see Note [Exercise regions] in tooling/skeleton.h.
#include "dtlab/tooling/skeleton.h"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <sstream>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"

namespace fs = std::filesystem;

namespace dtlab {
namespace {

const std::regex kBegin(R"(^(\s*)// BEGIN TODO\(([A-Za-z0-9_]+)\): (.+?)\s*$)");
const std::regex kEnd(R"(^\s*// END TODO\s*$)");
const std::regex kMalformed(R"(^\s*//\s*(BEGIN|END) TODO)");

constexpr const char* kBanner =
    "// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.\n"
    "// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)\n";

std::string c_string_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string make_skeleton(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  std::string out = kBanner, line;
  size_t number = 0, open_line = 0;
  bool inside = false;
  std::smatch m;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = source + ":" + std::to_string(number) + ": ";
    if (std::regex_match(line, m, kBegin)) {
      if (inside) {
        throw Error(where + "BEGIN TODO inside the region opened at line " + std::to_string(open_line));
      }
      inside = true;
      open_line = number;
      const std::string indent = m[1], todo = "TODO(" + m[2].str() + "): " + m[3].str();
      out += indent + "// " + todo + "\n";
      out += indent + "throw dtlab::NotImplemented(\"" + c_string_literal(todo) + "\");\n";
    } else if (std::regex_match(line, kEnd)) {
      if (!inside) throw Error(where + "END TODO without a BEGIN TODO");
      inside = false;
    } else if (std::regex_search(line, kMalformed)) {
      throw Error(where + "malformed exercise marker: expected \"// BEGIN TODO(<exercise>): <text>\"");
    } else if (!inside) {
      out += line + "\n";
    }
  }
  if (inside) throw Error(source + ":" + std::to_string(open_line) + ": BEGIN TODO is never closed");
  return out;
}

int count_exercise_regions(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += std::regex_match(line, kBegin);
  return n;
}

std::vector<ExerciseRegion> exercise_regions(const std::string& text, const std::string& source) {
  make_skeleton(text, source);  // the markers are well formed, or its error names the line
  std::istringstream in(text);
  std::vector<ExerciseRegion> regions;
  bool inside = false;
  size_t number = 0;
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (std::regex_match(line, m, kBegin)) {
      inside = true;
      regions.push_back({m[2].str(), number + 1, ""});
    } else if (std::regex_match(line, kEnd)) {
      inside = false;
    } else if (inside) {
      regions.back().body += line + "\n";
    }
  }
  return regions;
}

std::vector<SkeletonFile> plan_skeletons(const fs::path& solutions_dir, const fs::path& tasks_dir) {
  if (!fs::is_directory(solutions_dir)) throw Error(solutions_dir.string() + " is not a folder");
  std::vector<SkeletonFile> files;
  for (const auto& entry : fs::recursive_directory_iterator(solutions_dir)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
    const fs::path relative = fs::relative(entry.path(), solutions_dir);
    files.push_back({entry.path(), tasks_dir / relative,
                     make_skeleton(io::read_file(entry.path()), entry.path().string())});
  }
  std::sort(files.begin(), files.end(),
            [](const SkeletonFile& a, const SkeletonFile& b) { return a.solution < b.solution; });
  return files;
}

int write_skeletons(const std::filesystem::path& solutions_dir, const std::filesystem::path& tasks_dir,
                    bool check) {
  int stale = 0;
  for (const SkeletonFile& f : plan_skeletons(solutions_dir, tasks_dir)) {
    const bool same = std::filesystem::exists(f.task) && io::read_file(f.task) == f.expected;
    if (same) continue;
    if (check) {
      std::printf("out of date: %s (generated from %s)\n", f.task.c_str(), f.solution.c_str());
      ++stale;
    } else {
      io::write_file_atomically(f.task, f.expected);
      std::printf("wrote %s\n", f.task.c_str());
    }
  }
  if (stale) {
    std::printf("%d skeleton file(s) differ from solutions/: run `make skeletons` and commit\n", stale);
    return 1;
  }
  if (check) std::printf("tasks/ matches solutions/\n");
  return 0;
}

}  // namespace dtlab
