// The language-model benchmarks' data (bench_dp_gpt2, bench_pp): the translation fixture's pairs
// joined six at a time, so that rows fill max_length 128 (the fixture's own rows are about 30
// tokens), and the tokenizer gpt2_fixtures.h trains on them.
#pragma once

#include <filesystem>
#include <vector>

#include "dtlab/data/translation.h"
#include "dtlab/tooling/gpt2_fixtures.h"
#include "dtlab/tooling/translation_fixtures.h"

namespace dtlab::bench {

// Pairs joined `n` at a time: rows longer than max_length, cut to it.
inline std::vector<data::TranslationPair> joined(const std::vector<data::TranslationPair>& pairs, size_t n) {
  std::vector<data::TranslationPair> out;
  for (size_t i = 0; i + n <= pairs.size(); i += n) {
    data::TranslationPair p;
    for (size_t j = i; j < i + n; ++j) {
      p.de += (j > i ? " " : "") + pairs[j].de;
      p.en += (j > i ? " " : "") + pairs[j].en;
    }
    out.push_back(std::move(p));
  }
  return out;
}

// DIR/data (train, 8 validation rows, 1 test row) and DIR/tokenizer.
inline void write_joined_pairs(const std::filesystem::path& dir) {
  const tooling::TranslationFixture f = tooling::make_translation_fixture({});
  const std::vector<data::TranslationPair> train = joined(f.train, 6), validation = joined(f.validation, 6);
  data::write_translation_split(dir / "data", "train", train);
  data::write_translation_split(dir / "data", "validation", {validation.begin(), validation.begin() + 8});
  data::write_translation_split(dir / "data", "test", {validation.begin(), validation.begin() + 1});
  tooling::write_gpt2_fixture(dir / "tokenizer", f.train, {});
}

}  // namespace dtlab::bench
