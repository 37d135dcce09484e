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

Gpt2LMHeadModel gpt2_from_pretrained(const fs::path& dir, const Gpt2Overrides& overrides,
                                     LoadReport* report) {
  if (!fs::is_directory(dir)) {
    throw Error("model folder " + dir.string() + " does not exist: " + kGpt2WhatToTry);
  }
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) {
    throw Error(dir.string() + " has no config.json: is it a Hugging Face model folder?");
  }
  Gpt2Config config = Gpt2Config::from_file(config_path);
  overrides.apply(config);
  Gpt2LMHeadModel model(config);
  const io::TensorMap checkpoint = load_checkpoint_tensors(dir, kGpt2WhatToTry);
  const std::string source = dir.string();

  // The model's state dict as transformers names it: the parameters, and lm_head.weight too
  // when it is wte's tensor. An original `gpt2` checkpoint has no "transformer." prefix: its
  // keys are compared with the model's keys with the prefix removed.
  std::vector<std::pair<std::string, torch::Tensor>> targets;
  for (const auto& item : model->named_parameters()) targets.emplace_back(item.key(), item.value());
  if (config.tie_word_embeddings) targets.emplace_back(kLmHead, model->lm_head_weight());
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
  LoadReport found;
  found.model_class = "GPT2LMHeadModel";
  std::set<std::string> expected;
  for (const auto& [key, tensor] : targets) expected.insert(checkpoint_name(key));
  std::set<std::string> buffers;
  for (int64_t i = 0; i < config.n_layer; ++i) {
    const std::string layer = std::string(kPrefixDot) + "h." + std::to_string(i) + ".attn.";
    buffers.insert(checkpoint_name(layer + "bias"));
    buffers.insert(checkpoint_name(layer + "masked_bias"));
  }
  for (const auto& key : expected) {
    if (!checkpoint.count(key)) found.missing_keys.push_back(key);
  }
  for (const auto& [key, tensor] : checkpoint) {
    if (!expected.count(key) && !buffers.count(key)) found.unexpected_keys.push_back(key);
  }
  // A tied pair is missing only when both names are.
  if (config.tie_word_embeddings) {
    const std::set<std::string> group = {checkpoint_name("transformer.wte.weight"), kLmHead};
    const auto n_missing = std::count_if(found.missing_keys.begin(), found.missing_keys.end(),
                                         [&](const std::string& k) { return group.count(k) > 0; });
    if (n_missing > 0 && n_missing < static_cast<long>(group.size())) {
      found.missing_keys.erase(
          std::remove_if(found.missing_keys.begin(), found.missing_keys.end(),
                         [&](const std::string& k) { return group.count(k) > 0; }),
          found.missing_keys.end());
    }
  }

  // Copy in state-dict order: a tied lm_head.weight, when present, is copied last and wins, as
  // in transformers.
  size_t loaded = 0;
  {
    torch::NoGradGuard no_grad;
    for (auto& [key, param] : targets) {
      auto it = checkpoint.find(checkpoint_name(key));
      if (it == checkpoint.end()) continue;
      const torch::Tensor& stored = it->second;
      if (stored.sizes() != param.sizes()) {
        throw Error(source + ": " + it->first + " has shape " + shape_string(stored.sizes()) +
                    " in the checkpoint but " + shape_string(param.sizes()) +
                    " in the model built from config.json");
      }
      param.copy_(stored.to(param.dtype()));
      ++loaded;
    }
  }
  if (loaded == 0) {
    const std::string first = checkpoint.empty() ? "none" : checkpoint.begin()->first;
    throw Error(source + ": the checkpoint holds no GPT-2 weights (first key: " + first +
                "): is this a GPT-2 model folder?");
  }
  if (report) *report = found;
  return model;
}

void save_pretrained(const Gpt2LMHeadModel& model, const fs::path& dir) {
  save_checkpoint(*model, model->config().to_json(), dir);
}

}  // namespace dtlab::model
