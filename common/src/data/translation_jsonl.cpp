// Translation JSON lines to sentence pairs, see data/translation_jsonl.h.
#include "dtlab/data/translation_jsonl.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "dtlab/core/error.h"
#include "dtlab/io/excerpt.h"

namespace dtlab::data {
namespace {

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](unsigned char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

std::string string_field(const nlohmann::json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) {
    throw Error(where + "no \"" + key + "\" key (each line must be {\"de\": ..., \"en\": ...})");
  }
  if (!it->is_string()) {
    throw Error(where + "\"" + key + "\" is a " + it->type_name() + ", expected a string");
  }
  return it->get<std::string>();
}

TranslationPair parse_line(std::string_view line, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(where + "not valid JSON at column " + std::to_string(e.byte) + " (" +
                io::printable(e.what(), 400) + ")");
  } catch (const nlohmann::json::exception& e) {
    // Valid syntax nlohmann cannot hold, such as a number beyond double (1e400): out_of_range.
    throw Error(where + "not valid JSON (" + io::printable(e.what(), 400) + ")");
  }
  if (!j.is_object()) {
    throw Error(where + "expected a JSON object {\"de\": ..., \"en\": ...}, found " + j.type_name());
  }
  // Hugging Face's Dataset.to_json keeps the pair under "translation".
  const auto wrapped = j.find("translation");
  if (wrapped != j.end() && wrapped->is_object()) j = *wrapped;
  return {string_field(j, "de", where), string_field(j, "en", where)};
}

}  // namespace

std::vector<TranslationPair> parse_translation_jsonl(std::string_view text, const std::string& source,
                                                     const std::string& empty_hint) {
  std::vector<TranslationPair> pairs;
  size_t line_number = 0;
  // Lines as std::getline gives them: each ends at "\n"; text after the last "\n" is a line.
  for (size_t start = 0; start < text.size();) {
    const size_t newline = text.find('\n', start);
    const size_t end = newline == std::string_view::npos ? text.size() : newline;
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (is_blank(line)) continue;
    pairs.push_back(parse_line(line, source + ":" + std::to_string(line_number) + ": "));
  }
  if (pairs.empty()) throw Error(source + ": no examples (the file is empty); " + empty_hint);
  return pairs;
}

}  // namespace dtlab::data
