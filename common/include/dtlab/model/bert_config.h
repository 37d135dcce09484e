// BertConfig: the fields of a Hugging Face BERT config.json that change the computation.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dtlab::model {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  // exact (erf) GELU; "gelu_new"/"relu" also accepted
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  std::optional<double> classifier_dropout;  // unset: hidden_dropout_prob, as in Hugging Face
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  int64_t num_labels = 2;
  std::string problem_type;  // "" (inferred), "single_label_classification" or "regression"

  // Reads the fields above from a parsed config.json. Unknown keys are kept in `extra` so that
  // save_pretrained writes them back. Inconsistent values (hidden_size not divisible by
  // num_attention_heads, a non-positive size, an unsupported hidden_act or
  // position_embedding_type) are a dtlab::Error naming `source`.
  static BertConfig from_json(const nlohmann::json& j, const std::string& source);
  static BertConfig from_file(const std::filesystem::path& config_json);
  nlohmann::json to_json() const;

  nlohmann::json extra = nlohmann::json::object();
};

// Command-line overrides applied on top of config.json (run_glue's --dropout and friends).
struct BertOverrides {
  std::optional<double> hidden_dropout_prob;
  std::optional<double> attention_probs_dropout_prob;
  std::optional<double> classifier_dropout;
  std::optional<int64_t> num_labels;
  // Not a config field but how from_pretrained loads (transformers' ignore_mismatched_sizes):
  // a checkpoint tensor whose shape differs from the model's (a classifier trained for another
  // label count) keeps the fresh initialisation and is listed in the LoadReport, instead of
  // being an error. apply() leaves it alone.
  bool ignore_mismatched_sizes = false;

  // Sets all three dropout probabilities (hidden, attention, classifier) to p.
  static BertOverrides dropout(double p);
  void apply(BertConfig& config) const;
};

}  // namespace dtlab::model
