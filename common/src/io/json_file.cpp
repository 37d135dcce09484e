#include "dtlab/io/json_file.h"

#include <algorithm>

#include "dtlab/core/error.h"
#include "dtlab/io/excerpt.h"
#include "dtlab/io/file.h"

namespace dtlab::io {
namespace {

// nlohmann's message ends with the token it last read, which in a damaged file may be megabytes.
constexpr size_t kParseErrorBytes = 400;

}  // namespace

nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json_text(read_file(path), path.string());
}

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based; turn it into line:column so an editor can jump there.
    const size_t byte = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    const size_t line = 1 + std::count(text.begin(), text.begin() + byte, '\n');
    const size_t line_start = text.rfind('\n', byte == 0 ? 0 : byte - 1);
    const size_t column = line_start == std::string::npos ? byte + 1 : byte - line_start;
    throw Error(source + ":" + std::to_string(line) + ":" + std::to_string(column) +
                ": invalid JSON (" + printable(e.what(), kParseErrorBytes) + ")");
  } catch (const nlohmann::json::exception& e) {
    // Valid syntax nlohmann cannot hold, such as a number beyond double (1e400): out_of_range.
    throw Error(source + ": invalid JSON (" + printable(e.what(), kParseErrorBytes) + ")");
  }
}

void write_json_file(const std::filesystem::path& path, const nlohmann::json& j) {
  write_file_atomically(path, j.dump(2) + "\n");
}

}  // namespace dtlab::io
