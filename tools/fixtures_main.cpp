// dtlab-fixtures: writes the offline model and data sets (see common/include/dtlab/tooling/fixtures.h
// and common/include/dtlab/tooling/translation_fixtures.h).
#include <CLI/CLI.hpp>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/tooling/fixtures.h"
#include "dtlab/tooling/translation_fixtures.h"

int main(int argc, char** argv) {
  return dtlab::run_main("dtlab-fixtures", [&]() -> int {
    std::string out = "fixtures";
    dtlab::tooling::FixtureOptions o;
    CLI::App app{"Writes a tiny random BERT (Hugging Face format), a learnable RTE-format data "
                 "set and a learnable German->English set, deterministically from --seed"};
    app.add_option("--out", out, "Output folder (gets bert-tiny/, RTE/ and translation/)")->capture_default_str();
    app.add_option("--seed", o.seed, "Seed of the words, the examples and the weights")->capture_default_str();
    app.add_option("--train_examples", o.train_examples, "Examples in train.tsv")->capture_default_str();
    app.add_option("--dev_examples", o.dev_examples, "Examples in dev.tsv")->capture_default_str();
    app.add_option("--hidden_size", o.hidden_size, "Model width")->capture_default_str();
    app.add_option("--num_hidden_layers", o.num_hidden_layers, "Model depth")->capture_default_str();
    app.add_option("--num_attention_heads", o.num_attention_heads, "Attention heads")->capture_default_str();
    std::vector<int64_t> translation_sizes = {5000, 1000, 100};
    app.add_option("--translation_sizes", translation_sizes,
                   "Pairs in translation/ train, validation and test")
        ->expected(3)->capture_default_str();
    if (auto stop = dtlab::parse_flags(app, argc, argv)) return *stop;
    dtlab::tooling::write_fixtures(out, o);
    dtlab::tooling::TranslationFixtureOptions t;
    t.seed = o.seed;
    t.train = translation_sizes[0];
    t.validation = translation_sizes[1];
    t.test = translation_sizes[2];
    dtlab::tooling::write_translation_fixture(std::filesystem::path(out) / "translation", t);
    std::printf("wrote %s/bert-tiny (model), %s/RTE (data) and %s/translation (data)\n", out.c_str(),
                out.c_str(), out.c_str());
    return dtlab::kExitOk;
  });
}
