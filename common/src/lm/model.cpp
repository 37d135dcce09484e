// Loading and saving the GPT-2 of a run, see lm/model.h.
#include "dtlab/lm/model.h"

#include <torch/utils.h>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"

namespace fs = std::filesystem;

namespace dtlab::lm {
namespace {

model::Gpt2LMHeadModel from_preset(const LmOptions& o, const tokenizer::Gpt2Tokenizer& tokenizer,
                                   const LmTokenIds& ids, const model::Gpt2Overrides& overrides) {
  model::Gpt2Config config = model::Gpt2Config::preset(o.model_config);
  if (o.n_layer) config.n_layer = *o.n_layer;  // --n_layer (options.cpp: presets only)
  // As the original exercise resizes the embeddings to len(tokenizer): one row per token.
  config.vocab_size = tokenizer.vocab_size();
  config.bos_token_id = std::nullopt;
  config.eos_token_id = ids.eos_target;
  config.pad_token_id = ids.pad;
  overrides.apply(config);
  return model::Gpt2LMHeadModel(config);
}

void check_fits(const model::Gpt2Config& config, const LmOptions& o,
                const tokenizer::Gpt2Tokenizer& tokenizer) {
  const std::string model = o.model_config.empty() ? o.model_name_or_path : o.model_config;
  if (tokenizer.vocab_size() > config.vocab_size) {
    throw Error("the tokenizer of " + tokenizer_folder(o) + " has " +
                std::to_string(tokenizer.vocab_size()) + " tokens but " + model + " has vocab_size " +
                std::to_string(config.vocab_size) + ": give the model's own tokenizer folder");
  }
  if (o.max_length - 1 > config.n_positions) {
    throw Error("--max_length " + std::to_string(o.max_length) + " makes rows of " +
                std::to_string(o.max_length - 1) + " positions but " + model + " has n_positions " +
                std::to_string(config.n_positions) + ": lower --max_length");
  }
}

}  // namespace

tokenizer::Gpt2Tokenizer load_tokenizer(const LmOptions& o) {
  return tokenizer::Gpt2Tokenizer::from_pretrained(tokenizer_folder(o));
}

model::Gpt2LMHeadModel load_model(const LmOptions& o, const tokenizer::Gpt2Tokenizer& tokenizer,
                                  const LmTokenIds& ids, model::LoadReport* report, Weights weights) {
  const model::Gpt2Overrides overrides =
      o.dropout ? model::Gpt2Overrides::dropout(*o.dropout) : model::Gpt2Overrides{};
  torch::manual_seed(o.seed);
  if (!o.model_config.empty()) {
    model::Gpt2LMHeadModel model = from_preset(o, tokenizer, ids, overrides);
    check_fits(model->config(), o, tokenizer);
    return model;
  }
  model::Gpt2LMHeadModel model = weights == Weights::kWhole
                                     ? model::gpt2_from_pretrained(o.model_name_or_path, overrides, report)
                                     : model::Gpt2LMHeadModel(model::gpt2_config_of(o.model_name_or_path, overrides));
  if (weights == Weights::kLater && report) *report = model::Gpt2Checkpoint(o.model_name_or_path, model).report();
  check_fits(model->config(), o, tokenizer);
  return model;
}

void save_model_folder(const model::Gpt2LMHeadModel& model, const fs::path& tokenizer_dir,
                       const fs::path& dir) {
  model::save_pretrained(model, dir);
  for (const char* file : {"vocab.json", "merges.txt", "tokenizer_config.json",
                           "special_tokens_map.json", "added_tokens.json"}) {
    if (fs::exists(tokenizer_dir / file)) {
      io::write_file_atomically(dir / file, io::read_file(tokenizer_dir / file));
    }
  }
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace dtlab::lm
