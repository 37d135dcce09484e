// Note [A reference run made once], see reference_cache.h.
#include "reference_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "content_hash.h"

namespace fs = std::filesystem;

namespace dtlab::grader {

std::string reference_key(const std::string& id, const fs::path& binary, const std::vector<std::string>& args,
                          const std::vector<std::string>& environment) {
  ContentHash hash;
  hash.add_file(binary);
  for (const std::string& arg : args) {
    std::error_code ec;
    const fs::file_status status = arg.empty() || arg[0] != '/' ? fs::file_status{} : fs::status(arg, ec);
    if (fs::is_regular_file(status)) {
      hash.add(std::string("file\0", 5)).add_file(arg);
    } else if (fs::is_directory(status)) {
      hash.add(std::string("folder\0", 7)).add_tree(arg);
    } else {
      hash.add(std::string("arg\0", 4)).add(arg);
    }
    hash.add(std::string(1, '\0'));
  }
  std::vector<std::string> variables;
  for (const std::string& v : environment) {
    if (v.rfind("DTLAB_", 0) != 0) variables.push_back(v);
  }
  std::sort(variables.begin(), variables.end());
  for (const std::string& v : variables) hash.add(std::string("env\0", 4)).add(v).add(std::string(1, '\0'));
  return id + "-" + hash.hex();
}

bool restore_reference(const fs::path& cache, const std::string& key, const fs::path& run_dir) {
  std::error_code ec;
  const fs::path stored = cache / key;
  if (!fs::is_directory(stored, ec)) return false;
  fs::copy(stored, run_dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (!ec) {
    fs::last_write_time(stored, fs::file_time_type::clock::now(), ec);  // used now: evicted last
    return true;
  }
  // A cache folder removed or unreadable meanwhile: the run is made instead, from an empty folder.
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) fs::remove_all(entry.path(), ec);
  return false;
}

void store_reference(const fs::path& cache, const std::string& key, const fs::path& run_dir) {
  static std::atomic<int> serial{0};
  std::error_code ec;
  if (fs::is_directory(cache / key, ec)) return;
  fs::create_directories(cache, ec);
  const fs::path staging = cache / fmt::format(".{}.{}.{}", key, ::getpid(), serial++);
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  bool copied = !ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    if (!copied || entry.path().filename() == "run.json") continue;
    fs::copy(entry.path(), staging / entry.path().filename(), fs::copy_options::recursive, ec);
    copied = !ec;
  }
  // rename() of a folder onto one another grading stored meanwhile fails: that one stays.
  if (copied) fs::rename(staging, cache / key, ec);
  fs::remove_all(staging, ec);
  // The runs of binaries rebuilt since are never read again: past kMaxStoredRuns, the least
  // recently used go.
  std::vector<std::pair<fs::file_time_type, fs::path>> stored;
  for (const auto& entry : fs::directory_iterator(cache, ec)) {
    if (entry.path().filename().string().rfind('.', 0) == 0 || !entry.is_directory(ec)) continue;
    stored.emplace_back(entry.last_write_time(ec), entry.path());
  }
  if (stored.size() <= kMaxStoredRuns) return;
  std::sort(stored.begin(), stored.end());
  for (size_t i = 0; i + kMaxStoredRuns < stored.size(); ++i) fs::remove_all(stored[i].second, ec);
}

}  // namespace dtlab::grader
