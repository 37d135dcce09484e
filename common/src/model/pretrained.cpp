// Hugging Face checkpoint folders in and out: config.json plus model.safetensors (or a sharded
// model.safetensors.index.json), with Hugging Face's key-matching rules.
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <set>

#include "dtlab/core/error.h"
#include "dtlab/io/json_file.h"
#include "dtlab/io/safetensors.h"
#include "dtlab/model/bert.h"
#include "dtlab/model/checkpoint.h"

namespace fs = std::filesystem;

namespace dtlab::model {
namespace {

constexpr const char* kBasePrefix = "bert.";
constexpr const char* kBertWhatToTry =
    "point --model_name_or_path at a Hugging Face BERT folder, or run dtlab-fixtures to make the "
    "offline one";

// Hugging Face's renaming rules for checkpoints written by other BERT implementations.
std::string canonical_key(std::string key) {
  auto replace_suffix = [&](const std::string& from, const std::string& to) {
    if (key_ends_with(key, from)) key.replace(key.size() - from.size(), from.size(), to);
  };
  replace_suffix("LayerNorm.gamma", "LayerNorm.weight");
  replace_suffix("LayerNorm.beta", "LayerNorm.bias");
  return key;
}

// The file that holds the weights: model.safetensors, or the shard index.
std::string weight_file(const fs::path& dir) {
  const fs::path single = dir / "model.safetensors";
  return (fs::exists(single) ? single : dir / "model.safetensors.index.json").string();
}

// A classifier trained for another label count is the common case (a checkpoint fine-tuned on
// MNLI's 3 labels, run on RTE's 2): transformers refuses it unless told to start a fresh head.
std::string mismatch_error(const fs::path& dir, const std::string& name, at::IntArrayRef stored,
                           at::IntArrayRef expected, int64_t num_labels) {
  std::string message = weight_file(dir) + ": " + name + " has shape " + shape_string(stored) +
                        " in the checkpoint but the model expects " + shape_string(expected);
  if (key_starts_with(name, "classifier.") && !stored.empty()) {
    message += ": the checkpoint's classifier has " + std::to_string(stored[0]) +
               " labels, the model is built for " + std::to_string(num_labels) +
               ". Pass --ignore_mismatched_sizes to start a fresh classifier (transformers' "
               "ignore_mismatched_sizes=True), or use a checkpoint trained for this task";
  } else {
    message += " (built from config.json): do config.json and the weights belong together?";
  }
  return message;
}

}  // namespace

BertForSequenceClassification from_pretrained(const fs::path& dir, const BertOverrides& overrides,
                                              LoadReport* report) {
  if (!fs::is_directory(dir)) {
    throw Error("model folder " + dir.string() + " does not exist: point --model_name_or_path at "
                "a Hugging Face BERT folder, or run dtlab-fixtures to make the offline one");
  }
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) {
    throw Error(dir.string() + " has no config.json: is it a Hugging Face model folder?");
  }
  BertConfig config = BertConfig::from_file(config_path);
  overrides.apply(config);
  BertForSequenceClassification model(config);

  io::TensorMap checkpoint;
  for (auto& [key, tensor] : load_checkpoint_tensors(dir, kBertWhatToTry)) {
    checkpoint[canonical_key(key)] = tensor;
  }

  // A checkpoint of a bare BertModel has no "bert." prefix: it loads into the base model.
  const bool has_prefix = std::any_of(checkpoint.begin(), checkpoint.end(), [](const auto& kv) {
    return key_starts_with(kv.first, kBasePrefix);
  });
  // Keys not of the base model (pre-training heads "cls.*") keep their names, so that they are
  // reported as the checkpoint spells them.
  if (!has_prefix) {
    std::set<std::string> parameter_names;
    for (const auto& item : model->named_parameters()) parameter_names.insert(item.key());
    io::TensorMap prefixed;
    for (auto& [key, tensor] : checkpoint) {
      const std::string candidate = kBasePrefix + key;
      prefixed[parameter_names.count(candidate) ? candidate : key] = tensor;
    }
    checkpoint = std::move(prefixed);
  }

  LoadReport found;
  found.model_class = "BertForSequenceClassification";
  std::set<std::string> used;
  size_t base_weights_loaded = 0;
  const std::string source = dir.string();
  {
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {
      const std::string& name = item.key();
      auto it = checkpoint.find(name);
      if (it == checkpoint.end()) {
        found.missing_keys.push_back(name);
        continue;
      }
      const torch::Tensor& stored = it->second;
      if (stored.sizes() != item.value().sizes()) {
        if (!overrides.ignore_mismatched_sizes) {
          throw Error(mismatch_error(dir, name, stored.sizes(), item.value().sizes(), config.num_labels));
        }
        found.mismatched_keys.push_back(name + ": found shape " + shape_string(stored.sizes()) +
                                        " in the checkpoint and " + shape_string(item.value().sizes()) +
                                        " in the model");
        used.insert(name);  // read, not unexpected: it is reported as mismatched
        continue;
      }
      item.value().copy_(stored.to(item.value().dtype()));
      used.insert(name);
      if (key_starts_with(name, kBasePrefix)) ++base_weights_loaded;
    }
  }
  for (const auto& [key, tensor] : checkpoint) {
    // position_ids is a buffer older checkpoints saved; it is recomputed, never learned.
    if (!used.count(key) && !key_ends_with(key, "embeddings.position_ids")) found.unexpected_keys.push_back(key);
  }
  if (base_weights_loaded == 0) {
    std::string first = checkpoint.empty() ? "none" : checkpoint.begin()->first;
    throw Error(source + ": the checkpoint holds no BERT weights (first key: " + first +
                "): is this a BERT model folder?");
  }
  if (report) *report = found;
  return model;
}

void save_pretrained(const BertForSequenceClassification& model, const fs::path& dir) {
  save_checkpoint(*model, model->config().to_json(), dir);
}

}  // namespace dtlab::model
