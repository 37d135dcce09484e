// A real German->English set built offline from the Ding dictionary (Debian's trans-de-en,
// /usr/share/trans/de-en): its example sentences, cleaned, shuffled from a seed and split like
// the original exercise's IWSLT14 subset. Tooling behind dtlab-translation-data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "dtlab/data/translation.h"

namespace dtlab::tooling {

constexpr const char* kDingDefaultPath = "/usr/share/trans/de-en";

// The Ding format (UTF-8, one entry per line; "#" starts a comment line):
//   German :: English
// Each side is a list of sub-entries separated by " | ", sub-entry k of one side translating
// sub-entry k of the other (a headword, its plural or inflections, then phrases and example
// sentences); within a sub-entry "; " separates synonyms. Annotations are {f} {m} {n} {pl} {adj}
// {vt} (gender, part of speech), [ugs.] [Br.] [techn.] (usage, region, field), <...> (other
// spellings, search keys) and (...) (explanations, optional words).
//
// Cleaning, applied to each side of each sub-entry:
//   1. Keep the first synonym (text before the first "; ").
//   2. Remove every {...}, [...], <...> and (...) with its contents; a sub-entry with an
//      unbalanced bracket is dropped.
//   3. Collapse runs of spaces, trim, and remove a space left before , . ; : ! ?
//   4. Drop the sub-entry if the text still holds a "/" (alternatives: "bin/war"), "..." or "…"
//      (placeholders), or a dictionary abbreviation for an open slot (jd. jdm. jdn. jds. etw.
//      sb. sth. sb's).
// A pair is kept when both sides look like a sentence: start with an upper-case letter, end with
// ". ! or ?", and have min_words to max_words space-separated words. The German side must be new
// (the dictionary repeats example sentences under several headwords; the first is kept).
//
// clean_ding_text is steps 1 to 4 on one side of one sub-entry: the cleaned text, or "" when
// the sub-entry is dropped.
std::string clean_ding_text(std::string_view text);

struct DingOptions {
  std::filesystem::path ding = kDingDefaultPath;
  uint64_t seed = 0;
  int64_t train = 5000;  // the original's sizes
  int64_t validation = 1000;
  int64_t test = 100;
  int64_t min_words = 4;   // prefer sentences over headwords and short phrases
  int64_t max_words = 30;  // keeps a pair well inside GPT-2's 128-token sequences
};

// Every kept pair of the file, in file order. A missing file is a dtlab::Error that says how to
// install it.
std::vector<data::TranslationPair> read_ding_sentences(const DingOptions& options);

struct DingSplits {
  int64_t candidates = 0;  // pairs kept from the file, before the split
  std::vector<data::TranslationPair> train, validation, test;
};

// The kept pairs shuffled with the seed, then the first `train` for train, the next
// `validation`, the next `test`. Throws dtlab::Error when the file has too few.
DingSplits make_ding_splits(const DingOptions& options);

}  // namespace dtlab::tooling
