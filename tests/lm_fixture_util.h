// The small language-model fixture the GPT-2 suites train on: a generated German->English set in
// dir/translation and, in dir/gpt2, a GPT-2 far smaller than gpt2-tiny (width 32, 2 heads, 128
// positions) whose BPE is learnt from the set's training split. Small enough that a suite trains
// it on several ranks in seconds; the same generators as `dtlab-fixtures`.
#pragma once

#include <cstdint>
#include <filesystem>

#include "dtlab/data/translation.h"
#include "dtlab/tooling/gpt2_fixtures.h"
#include "dtlab/tooling/translation_fixtures.h"

namespace dtlab::test {

// One block; change n_layer for more stages.
inline tooling::Gpt2FixtureOptions small_gpt2(uint64_t seed = 0) {
  tooling::Gpt2FixtureOptions g;
  g.seed = seed;
  g.n_embd = 32;
  g.n_layer = 1;
  g.n_head = 2;
  g.n_positions = 128;
  return g;
}

inline void write_small_lm_fixture(const std::filesystem::path& dir, int64_t train, int64_t validation, int64_t test,
                                   const tooling::Gpt2FixtureOptions& gpt2 = small_gpt2()) {
  tooling::TranslationFixtureOptions t;
  t.train = train;
  t.validation = validation;
  t.test = test;
  tooling::write_translation_fixture(dir / "translation", t);
  tooling::write_gpt2_fixture(dir / "gpt2", data::read_translation_split(dir / "translation", "train"), gpt2);
}

}  // namespace dtlab::test
