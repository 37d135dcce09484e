#include "dtlab/io/json_file.h"

#include <algorithm>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"

namespace dtlab::io {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based; turn it into line:column so an editor can jump there.
    const size_t byte = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    const size_t line = 1 + std::count(text.begin(), text.begin() + byte, '\n');
    const size_t line_start = text.rfind('\n', byte == 0 ? 0 : byte - 1);
    const size_t column = line_start == std::string::npos ? byte + 1 : byte - line_start;
    throw Error(path.string() + ":" + std::to_string(line) + ":" + std::to_string(column) +
                ": invalid JSON (" + e.what() + ")");
  }
}

void write_json_file(const std::filesystem::path& path, const nlohmann::json& j) {
  write_file_atomically(path, j.dump(2) + "\n");
}

}  // namespace dtlab::io
