// Example sentences of the Ding dictionary as a translation set, see tooling/ding.h.
#include "dtlab/tooling/ding.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <random>
#include <unordered_set>

#include "dtlab/core/error.h"
#include "dtlab/tokenizer/unicode.h"

namespace dtlab::tooling {
namespace {

constexpr std::string_view kSidesSeparator = " :: ";
constexpr std::string_view kSubEntrySeparator = " | ";
constexpr std::string_view kSynonymSeparator = "; ";

// Dictionary shorthand for an open slot ("jdm. etw. geben", "to give sb. sth."): such entries
// are templates, not sentences.
const std::unordered_set<std::string> kSlotAbbreviations = {
    "jd.", "jdm.", "jdn.", "jds.", "etw.", "sb.", "sth.", "sb's", "sb.'s"};

std::vector<std::string_view> split(std::string_view text, std::string_view separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t at = text.find(separator); at != std::string_view::npos;
       at = text.find(separator, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + separator.size();
  }
  parts.push_back(text.substr(start));
  return parts;
}

char closer_of(char c) {
  switch (c) {
    case '{': return '}';
    case '[': return ']';
    case '<': return '>';
    case '(': return ')';
    default: return 0;
  }
}

bool is_closer(char c) { return c == '}' || c == ']' || c == '>' || c == ')'; }

// Step 2: the text outside every bracket pair; nullopt when the brackets do not balance.
std::optional<std::string> without_annotations(std::string_view text) {
  std::string kept;
  std::vector<char> open;  // the closers we wait for, innermost last
  for (char c : text) {
    if (const char closer = closer_of(c)) {
      open.push_back(closer);
    } else if (is_closer(c)) {
      if (open.empty() || open.back() != c) return std::nullopt;
      open.pop_back();
    } else if (open.empty()) {
      kept += c;
    }
  }
  if (!open.empty()) return std::nullopt;
  return kept;
}

std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string> words;
  for (std::string_view w : split(text, " ")) {
    if (!w.empty()) words.emplace_back(w);
  }
  return words;
}

// Step 3: single spaces, none at the ends or before punctuation.
std::string tidy_spaces(std::string_view text) {
  std::string out;
  for (const std::string& w : words_of(text)) {
    const bool punctuation_only = w.find_first_not_of(",.;:!?") == std::string::npos;
    if (!out.empty() && !punctuation_only) out += ' ';
    out += w;
  }
  return out;
}

// Step 4.
bool is_template_or_alternatives(const std::string& text) {
  if (text.find('/') != std::string::npos || text.find("...") != std::string::npos ||
      text.find("\u2026") != std::string::npos) {
    return true;
  }
  for (std::string w : words_of(text)) {
    while (!w.empty() && std::string_view(",;:!?").find(w.back()) != std::string_view::npos) w.pop_back();
    if (kSlotAbbreviations.count(w)) return true;
  }
  return false;
}

bool looks_like_a_sentence(const std::string& text, const DingOptions& o) {
  if (text.empty()) return false;
  const std::u32string first = tokenizer::unicode::decode_utf8(std::string_view(text).substr(0, 4));
  if (first.empty() || !tokenizer::unicode::is_upper_case_letter(first[0])) return false;
  const char last = text.back();
  if (last != '.' && last != '!' && last != '?') return false;
  const int64_t words = static_cast<int64_t>(words_of(text).size());
  return words >= o.min_words && words <= o.max_words;
}

// Deterministic on every platform: std::mt19937_64 is specified exactly; std::shuffle is not.
void shuffle(std::vector<data::TranslationPair>& pairs, uint64_t seed) {
  std::mt19937_64 engine(seed);
  for (size_t i = pairs.size(); i > 1; --i) {
    std::swap(pairs[i - 1], pairs[engine() % i]);
  }
}

}  // namespace

std::string clean_ding_text(std::string_view text) {
  text = text.substr(0, text.find(kSynonymSeparator));
  const std::optional<std::string> bare = without_annotations(text);
  if (!bare) return {};
  std::string tidy = tidy_spaces(*bare);
  if (is_template_or_alternatives(tidy)) return {};
  return tidy;
}

std::vector<data::TranslationPair> read_ding_sentences(const DingOptions& options) {
  std::ifstream in(options.ding, std::ios::binary);
  if (!in) {
    throw Error("cannot open " + options.ding.string() + ": the Ding dictionary comes with "
                "Debian's trans-de-en package; install it with `sudo ./scripts/setup.sh "
                "--with-real-text`, or point --ding at a copy of the file");
  }
  std::vector<data::TranslationPair> pairs;
  std::unordered_set<std::string> seen;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string_view> sides = split(line, kSidesSeparator);
    if (sides.size() != 2) continue;
    const std::vector<std::string_view> de = split(sides[0], kSubEntrySeparator);
    const std::vector<std::string_view> en = split(sides[1], kSubEntrySeparator);
    if (de.size() != en.size()) continue;
    for (size_t k = 0; k < de.size(); ++k) {
      std::string d = clean_ding_text(de[k]);
      std::string e = clean_ding_text(en[k]);
      if (!looks_like_a_sentence(d, options) || !looks_like_a_sentence(e, options)) continue;
      if (!seen.insert(d).second) continue;
      pairs.push_back({std::move(d), std::move(e)});
    }
  }
  if (in.bad()) throw Error("cannot read " + options.ding.string());
  return pairs;
}

DingSplits make_ding_splits(const DingOptions& options) {
  if (options.train < 1 || options.validation < 1 || options.test < 1) {
    throw Error("--train, --validation and --test must be at least 1");
  }
  if (options.min_words < 1 || options.max_words < options.min_words) {
    throw Error("--min_words must be at least 1 and at most --max_words");
  }
  std::vector<data::TranslationPair> pairs = read_ding_sentences(options);
  DingSplits s;
  s.candidates = static_cast<int64_t>(pairs.size());
  const int64_t needed = options.train + options.validation + options.test;
  if (s.candidates < needed) {
    throw Error(options.ding.string() + " has " + std::to_string(s.candidates) +
                " sentence pairs of " + std::to_string(options.min_words) + " to " +
                std::to_string(options.max_words) + " words, but the splits need " +
                std::to_string(needed) +
                ": lower --min_words, raise --max_words or ask for smaller splits");
  }
  shuffle(pairs, options.seed);
  auto take = [&pairs](int64_t from, int64_t count) {
    return std::vector<data::TranslationPair>(pairs.begin() + from, pairs.begin() + from + count);
  };
  s.train = take(0, options.train);
  s.validation = take(options.train, options.validation);
  s.test = take(options.train + options.validation, options.test);
  return s;
}

}  // namespace dtlab::tooling
