// dtlab-fixtures: writes the offline model and data set (see common/include/dtlab/tooling/fixtures.h).
#include <CLI/CLI.hpp>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/tooling/fixtures.h"

int main(int argc, char** argv) {
  return dtlab::run_main("dtlab-fixtures", [&]() -> int {
    std::string out = "fixtures";
    dtlab::tooling::FixtureOptions o;
    CLI::App app{"Writes a tiny random BERT (Hugging Face format) and a learnable RTE-format data "
                 "set, deterministically from --seed"};
    app.add_option("--out", out, "Output folder (gets bert-tiny/ and RTE/)")->capture_default_str();
    app.add_option("--seed", o.seed, "Seed of the words, the examples and the weights")->capture_default_str();
    app.add_option("--train_examples", o.train_examples, "Examples in train.tsv")->capture_default_str();
    app.add_option("--dev_examples", o.dev_examples, "Examples in dev.tsv")->capture_default_str();
    app.add_option("--hidden_size", o.hidden_size, "Model width")->capture_default_str();
    app.add_option("--num_hidden_layers", o.num_hidden_layers, "Model depth")->capture_default_str();
    app.add_option("--num_attention_heads", o.num_attention_heads, "Attention heads")->capture_default_str();
    if (auto stop = dtlab::parse_flags(app, argc, argv)) return *stop;
    dtlab::tooling::write_fixtures(out, o);
    std::printf("wrote %s/bert-tiny (model) and %s/RTE (data)\n", out.c_str(), out.c_str());
    return dtlab::kExitOk;
  });
}
