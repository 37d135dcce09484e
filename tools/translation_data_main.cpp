// dtlab-translation-data: a real German->English set of the original exercise's sizes, built
// offline from the Ding dictionary's example sentences (see common/include/dtlab/tooling/ding.h).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/data/translation.h"
#include "dtlab/tooling/ding.h"

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
    return dtlab::kExitOk;
  });
}
