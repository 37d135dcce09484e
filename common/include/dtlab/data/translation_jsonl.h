// The LibTorch-free half of the translation reader: a JSON-lines split to sentence pairs.
// data/translation.h reads the files and builds the model's examples; fuzz/translation_jsonl.cpp
// fuzzes this half alone.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dtlab::data {

struct TranslationPair {
  std::string de;  // source
  std::string en;  // target

  bool operator==(const TranslationPair& o) const { return de == o.de && en == o.en; }
  bool operator!=(const TranslationPair& o) const { return !(*this == o); }
};

// The text of one split file (`source` names it in errors), in the format of data/translation.h:
// one {"de": ..., "en": ...} (or {"translation": {...}}) per line, blank lines skipped. A bad
// line is a dtlab::Error "SOURCE:LINE: ..."; a text without any example is one too, ending with
// `empty_hint` (what the folder must hold).
std::vector<TranslationPair> parse_translation_jsonl(std::string_view text, const std::string& source,
                                                     const std::string& empty_hint);

}  // namespace dtlab::data
