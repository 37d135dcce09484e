// 64-bit FNV-1a, see content_hash.h.
#include "content_hash.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "dtlab/io/file.h"

namespace fs = std::filesystem;

namespace dtlab::grader {

ContentHash& ContentHash::add(const std::string& bytes) {
  constexpr uint64_t kPrime = 1099511628211ull;
  for (unsigned char c : bytes) h_ = (h_ ^ c) * kPrime;
  return *this;
}

ContentHash& ContentHash::add_file(const fs::path& file) { return add(io::read_file(file)); }

size_t ContentHash::add_tree(const fs::path& folder) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    if (entry.is_regular_file()) files.push_back(fs::relative(entry.path(), folder).generic_string());
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    const std::string bytes = io::read_file(folder / f);
    add(f + '\0' + std::to_string(bytes.size()) + '\0').add(bytes);
  }
  return files.size();
}

std::string ContentHash::hex() const { return fmt::format("{:016x}", h_); }

std::string fnv1a64_hex(const std::string& bytes) { return ContentHash().add(bytes).hex(); }

}  // namespace dtlab::grader
