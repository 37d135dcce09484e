// Quoting input in error messages, see io/excerpt.h.
#include "dtlab/io/excerpt.h"

#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

namespace dtlab::io {
namespace {

// nlohmann's dump() recurses once per level; a forged header of 100 MB of "[" would overflow
// the stack long before the parser (which does not recurse) objects.
constexpr size_t kMaxDumpDepth = 64;

bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Whether j nests deeper than limit, walked with an explicit stack (no recursion).
bool nests_deeper_than(const nlohmann::json& j, size_t limit) {
  std::vector<std::pair<const nlohmann::json*, size_t>> stack = {{&j, 1}};
  while (!stack.empty()) {
    const auto [value, depth] = stack.back();
    stack.pop_back();
    if (!value->is_structured()) continue;
    if (depth > limit) return true;
    for (const nlohmann::json& child : *value) stack.emplace_back(&child, depth + 1);
  }
  return false;
}

}  // namespace

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  for (; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    char escaped[8] = {static_cast<char>(c), '\0'};
    if (c == '\n') {
      std::snprintf(escaped, sizeof escaped, "\\n");
    } else if (c == '\r') {
      std::snprintf(escaped, sizeof escaped, "\\r");
    } else if (c == '\t') {
      std::snprintf(escaped, sizeof escaped, "\\t");
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(escaped, sizeof escaped, "\\x%02X", c);
    }
    const size_t n = std::strlen(escaped);
    if (out.size() + n > max_bytes) break;
    out.append(escaped, n);
  }
  if (i < text.size()) {
    // Not in the middle of a UTF-8 character: drop the started one.
    while (!out.empty() && is_utf8_continuation(out.back())) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    out += "...";
  }
  return out;
}

std::string json_excerpt(const nlohmann::json& j, size_t max_bytes) {
  if (nests_deeper_than(j, kMaxDumpDepth))
    return std::string(j.is_array() ? "an array" : "an object") + " nested over " +
           std::to_string(kMaxDumpDepth) + " levels deep";
  // error_handler::replace: never throws on invalid UTF-8 in a string.
  return printable(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), max_bytes);
}

}  // namespace dtlab::io
