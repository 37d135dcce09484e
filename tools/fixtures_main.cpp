// dtlab-fixtures: writes the offline models and data sets (see common/include/dtlab/tooling/fixtures.h,
// tooling/translation_fixtures.h and tooling/gpt2_fixtures.h).
#include <CLI/CLI.hpp>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/data/translation.h"
#include "dtlab/tooling/fixtures.h"
#include "dtlab/tooling/gpt2_fixtures.h"
#include "dtlab/tooling/translation_fixtures.h"

int main(int argc, char** argv) {
  return dtlab::run_main("dtlab-fixtures", [&]() -> int {
    std::string out = "fixtures";
    dtlab::tooling::FixtureOptions o;
    CLI::App app{"Writes a tiny random BERT (Hugging Face format), a learnable RTE-format data "
                 "set, a learnable German->English set and a tiny random GPT-2 with a BPE trained on it, "
                 "deterministically from --seed"};
    app.add_option("--out", out, "Output folder (gets bert-tiny/, RTE/, translation/ and gpt2-tiny/)")->capture_default_str();
    app.add_option("--seed", o.seed, "Seed of the words, the examples and the weights")->capture_default_str();
    app.add_option("--train_examples", o.train_examples, "Examples in train.tsv")->capture_default_str();
    app.add_option("--dev_examples", o.dev_examples, "Examples in dev.tsv")->capture_default_str();
    app.add_option("--hidden_size", o.hidden_size, "Model width")->capture_default_str();
    app.add_option("--num_hidden_layers", o.num_hidden_layers, "Model depth")->capture_default_str();
    app.add_option("--num_attention_heads", o.num_attention_heads, "Attention heads")->capture_default_str();
    app.add_option("--vocab_size", o.vocab_size,
                   "BERT's vocabulary, padded with [unused<k>] entries as BERT-base's (0: the words' own size)")
        ->capture_default_str();
    std::vector<int64_t> translation_sizes = {5000, 1000, 100};
    app.add_option("--translation_sizes", translation_sizes,
                   "Pairs in translation/ train, validation and test")
        ->expected(3)->capture_default_str();
    dtlab::tooling::Gpt2FixtureOptions g;
    app.add_option("--gpt2_vocab_size", g.vocab_size, "Most entries of gpt2-tiny's BPE vocabulary")
        ->capture_default_str();
    if (auto stop = dtlab::parse_flags(app, argc, argv)) return *stop;
    dtlab::tooling::write_fixtures(out, o);
    dtlab::tooling::TranslationFixtureOptions t;
    t.seed = o.seed;
    t.train = translation_sizes[0];
    t.validation = translation_sizes[1];
    t.test = translation_sizes[2];
    const std::filesystem::path translation = std::filesystem::path(out) / "translation";
    dtlab::tooling::write_translation_fixture(translation, t);
    g.seed = o.seed;
    dtlab::tooling::write_gpt2_fixture(std::filesystem::path(out) / "gpt2-tiny",
                                       dtlab::data::read_translation_split(translation, "train"), g);
    std::printf("wrote %s/bert-tiny (model), %s/RTE (data), %s/translation (data) and %s/gpt2-tiny "
                "(model and tokenizer)\n", out.c_str(), out.c_str(), out.c_str(), out.c_str());
    return dtlab::kExitOk;
  });
}
