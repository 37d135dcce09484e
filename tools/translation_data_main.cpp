// dtlab-translation-data: a real German->English set of the original exercise's sizes, built
// offline from the Ding dictionary's example sentences (see common/include/dtlab/tooling/ding.h).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/data/translation.h"
#include "dtlab/tooling/ding.h"
#include "dtlab/tooling/gpt2_fixtures.h"

namespace {

constexpr int kExamplesShown = 3;

}  // namespace

int main(int argc, char** argv) {
  return dtlab::run_main("dtlab-translation-data", [&]() -> int {
    std::string out = "data/ding-de-en";
    std::string ding = dtlab::tooling::kDingDefaultPath;
    dtlab::tooling::DingOptions o;
    CLI::App app{"Writes train/validation/test.jsonl of German->English sentence pairs taken from "
                 "the Ding dictionary (Debian package trans-de-en), deterministically from --seed"};
    app.add_option("--ding", ding, "The Ding dictionary file")->capture_default_str();
    app.add_option("--out", out, "Output folder")->capture_default_str();
    app.add_option("--train", o.train, "Pairs in train.jsonl")->capture_default_str();
    app.add_option("--validation", o.validation, "Pairs in validation.jsonl")->capture_default_str();
    app.add_option("--test", o.test, "Pairs in test.jsonl")->capture_default_str();
    app.add_option("--seed", o.seed, "Seed of the shuffle before the split")->capture_default_str();
    app.add_option("--min_words", o.min_words, "Fewest words per side (sentences, not headwords)")
        ->capture_default_str();
    app.add_option("--max_words", o.max_words, "Most words per side")->capture_default_str();
    // As the original exercise trains its tokenizer on its training pairs: a GPT-2 folder whose
    // BPE is learnt from this set's train split, with a random model of that vocabulary, ready
    // for dtlab-gpt2 --model_name_or_path.
    std::string gpt2_out;
    dtlab::tooling::Gpt2FixtureOptions g;
    g.vocab_size = 8000;
    app.add_option("--gpt2_out", gpt2_out,
                   "Also write a GPT-2 folder here: a BPE trained on train.jsonl and a random small "
                   "GPT-2 of its vocabulary");
    app.add_option("--gpt2_vocab_size", g.vocab_size, "Most BPE entries of --gpt2_out")->capture_default_str();
    if (auto stop = dtlab::parse_flags(app, argc, argv)) return *stop;
    o.ding = ding;

    const dtlab::tooling::DingSplits s = dtlab::tooling::make_ding_splits(o);
    dtlab::data::write_translation_split(out, "train", s.train);
    dtlab::data::write_translation_split(out, "validation", s.validation);
    dtlab::data::write_translation_split(out, "test", s.test);
    std::printf("%s: %lld sentence pairs of %lld to %lld words; wrote %s/{train,validation,test}.jsonl "
                "with %zu / %zu / %zu\n",
                ding.c_str(), static_cast<long long>(s.candidates), static_cast<long long>(o.min_words),
                static_cast<long long>(o.max_words), out.c_str(), s.train.size(), s.validation.size(),
                s.test.size());
    for (size_t i = 0; i < s.test.size() && i < kExamplesShown; ++i) {
      std::printf("  test: %s => %s\n", s.test[i].de.c_str(), s.test[i].en.c_str());
    }
    if (!gpt2_out.empty()) {
      g.seed = o.seed;
      dtlab::tooling::write_gpt2_fixture(gpt2_out, s.train, g);
      std::printf("wrote %s: a BPE trained on the %zu training pairs and a random GPT-2 of its vocabulary\n",
                  gpt2_out.c_str(), s.train.size());
    }
    return dtlab::kExitOk;
  });
}
