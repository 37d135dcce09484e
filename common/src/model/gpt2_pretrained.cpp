// GPT-2 checkpoint folders in and out, with transformers 4.40.2's key-matching rules
// (PreTrainedModel._load_pretrained_model) for the two key styles GPT-2 checkpoints come in.
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <map>
#include <set>

#include "dtlab/core/error.h"
#include "dtlab/io/json_file.h"
#include "dtlab/io/safetensors.h"
#include "dtlab/model/checkpoint.h"
#include "dtlab/model/gpt2.h"

namespace fs = std::filesystem;

namespace dtlab::model {
namespace {

// GPT2LMHeadModel.base_model_prefix. transformers tests a checkpoint for it without the dot.
constexpr const char* kPrefix = "transformer";
constexpr const char* kPrefixDot = "transformer.";
constexpr const char* kLmHead = "lm_head.weight";
constexpr const char* kGpt2WhatToTry =
    "point the model folder at a Hugging Face GPT-2 checkpoint (config.json and model.safetensors)";

std::string without_prefix(const std::string& key) {
  return key_starts_with(key, kPrefixDot) ? key.substr(std::string(kPrefixDot).size()) : key;
}

}  // namespace

Gpt2Config gpt2_config_of(const fs::path& dir, const Gpt2Overrides& overrides) {
  if (!fs::is_directory(dir)) {
    throw Error("model folder " + dir.string() + " does not exist: " + kGpt2WhatToTry);
  }
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) {
    throw Error(dir.string() + " has no config.json: is it a Hugging Face model folder?");
  }
  Gpt2Config config = Gpt2Config::from_file(config_path);
  overrides.apply(config);
  return config;
}

Gpt2Checkpoint::Gpt2Checkpoint(const fs::path& dir, const Gpt2LMHeadModel& model)
    : files_(dir, kGpt2WhatToTry) {
  const std::string source = dir.string();
  const Gpt2Config& config = model->config();
  const auto& checkpoint = files_.tensors();

  // The model's state dict as transformers names it: the parameters, and lm_head.weight too
  // when it is wte's tensor (filling wte's parameter). An original `gpt2` checkpoint has no
  // "transformer." prefix: its keys are compared with the model's keys with the prefix removed.
  struct Target {
    std::string key;        // transformers' name
    std::string parameter;  // the model's parameter it fills
    std::vector<int64_t> shape;
  };
  std::vector<Target> targets;
  for (const auto& item : model->named_parameters()) {
    targets.push_back({item.key(), item.key(), item.value().sizes().vec()});
  }
  if (config.tie_word_embeddings) {
    targets.push_back({kLmHead, "transformer.wte.weight", model->lm_head_weight().sizes().vec()});
  }
  const bool has_prefix = std::any_of(checkpoint.begin(), checkpoint.end(), [](const auto& kv) {
    return key_starts_with(kv.first, kPrefix);
  });
  auto checkpoint_name = [&](const std::string& key) {
    return has_prefix ? key : without_prefix(key);
  };
  if (!has_prefix && checkpoint.count(kLmHead)) {
    // transformers loads an unprefixed checkpoint into the base model alone and refuses one
    // that also holds the head ("The state dictionary of the model you are trying to load is
    // corrupted").
    throw Error(source + ": the checkpoint has lm_head.weight but its other keys lack the "
                "\"transformer.\" prefix; transformers refuses such a state dict as corrupted: "
                "save it again with every base-model key prefixed");
  }

  // Missing and unexpected keys, as transformers computes them. The attention's causal-mask
  // buffers (attn.bias, attn.masked_bias) that original checkpoints hold are the model's
  // non-persistent buffers in transformers, so they are not reported as unexpected.
  report_.model_class = "GPT2LMHeadModel";
  std::set<std::string> expected;
  for (const Target& t : targets) expected.insert(checkpoint_name(t.key));
  std::set<std::string> buffers;
  for (int64_t i = 0; i < config.n_layer; ++i) {
    const std::string layer = std::string(kPrefixDot) + "h." + std::to_string(i) + ".attn.";
    buffers.insert(checkpoint_name(layer + "bias"));
    buffers.insert(checkpoint_name(layer + "masked_bias"));
  }
  for (const auto& key : expected) {
    if (!checkpoint.count(key)) report_.missing_keys.push_back(key);
  }
  for (const auto& [key, located] : checkpoint) {
    if (!expected.count(key) && !buffers.count(key)) report_.unexpected_keys.push_back(key);
  }
  // A tied pair is missing only when both names are.
  if (config.tie_word_embeddings) {
    const std::set<std::string> group = {checkpoint_name("transformer.wte.weight"), kLmHead};
    auto& missing = report_.missing_keys;
    const auto n_missing = std::count_if(missing.begin(), missing.end(),
                                         [&](const std::string& k) { return group.count(k) > 0; });
    if (n_missing > 0 && n_missing < static_cast<long>(group.size())) {
      missing.erase(std::remove_if(missing.begin(), missing.end(),
                                   [&](const std::string& k) { return group.count(k) > 0; }),
                    missing.end());
    }
  }

  // In state-dict order: a tied lm_head.weight, when present, is copied last and wins, as in
  // transformers. Every shape is checked here, before any tensor is read.
  for (const Target& t : targets) {
    const std::string name = checkpoint_name(t.key);
    const CheckpointFiles::Located* located = files_.find(name);
    if (!located) continue;
    if (located->entry->shape != t.shape) {
      throw Error(source + ": " + name + " has shape " + shape_string(located->entry->shape) +
                  " in the checkpoint but " + shape_string(t.shape) + " in the model built from config.json");
    }
    fills_.push_back({t.parameter, name, located});
  }
  if (fills_.empty()) {
    const std::string first = checkpoint.empty() ? "none" : checkpoint.begin()->first;
    throw Error(source + ": the checkpoint holds no GPT-2 weights (first key: " + first +
                "): is this a GPT-2 model folder?");
  }
}

void Gpt2Checkpoint::read(const Fill& fill, int64_t begin, torch::Tensor into) const {
  fill.source->file->read_into(*fill.source->entry, begin, std::move(into));
}

void Gpt2Checkpoint::load_into(Gpt2LMHeadModel& model) const {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> parameters;
  for (const auto& item : model->named_parameters()) parameters.emplace(item.key(), item.value());
  for (const Fill& fill : fills_) read(fill, 0, parameters.at(fill.parameter));
}

Gpt2LMHeadModel gpt2_from_pretrained(const fs::path& dir, const Gpt2Overrides& overrides,
                                     LoadReport* report) {
  Gpt2LMHeadModel model(gpt2_config_of(dir, overrides));
  const Gpt2Checkpoint checkpoint(dir, model);
  checkpoint.load_into(model);  // tensor by tensor: the model and one tensor, never the whole file
  if (report) *report = checkpoint.report();
  return model;
}

void save_pretrained(const Gpt2LMHeadModel& model, const fs::path& dir) {
  save_checkpoint(*model, model->config().to_json(), dir);
}

}  // namespace dtlab::model
