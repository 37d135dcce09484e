// Reading and writing BERT's config.json with the defaults Hugging Face uses.
#include "dtlab/model/bert_config.h"

#include <set>

#include "dtlab/core/error.h"
#include "dtlab/io/json_file.h"
#include "dtlab/model/config_json.h"

namespace dtlab::model {
namespace {

using namespace config_json;

// Keys this struct owns; every other key of config.json is carried in `extra`.
const std::set<std::string> kBertOwnedKeys = {
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "intermediate_size", "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob",
    "classifier_dropout", "max_position_embeddings", "type_vocab_size", "initializer_range",
    "layer_norm_eps", "pad_token_id", "num_labels", "id2label", "label2id", "problem_type"};


}  // namespace

BertConfig BertConfig::from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(source + ": expected a JSON object");
  BertConfig c;
  read(j, "vocab_size", c.vocab_size, source);
  read(j, "hidden_size", c.hidden_size, source);
  read(j, "num_hidden_layers", c.num_hidden_layers, source);
  read(j, "num_attention_heads", c.num_attention_heads, source);
  read(j, "intermediate_size", c.intermediate_size, source);
  read(j, "hidden_act", c.hidden_act, source);
  read(j, "hidden_dropout_prob", c.hidden_dropout_prob, source);
  read(j, "attention_probs_dropout_prob", c.attention_probs_dropout_prob, source);
  if (j.contains("classifier_dropout") && !j.at("classifier_dropout").is_null()) {
    double p = 0;
    read(j, "classifier_dropout", p, source);
    c.classifier_dropout = p;
  }
  read(j, "max_position_embeddings", c.max_position_embeddings, source);
  read(j, "type_vocab_size", c.type_vocab_size, source);
  read(j, "initializer_range", c.initializer_range, source);
  read(j, "layer_norm_eps", c.layer_norm_eps, source);
  read(j, "pad_token_id", c.pad_token_id, source);
  read(j, "problem_type", c.problem_type, source);
  if (!c.problem_type.empty() && c.problem_type != "single_label_classification" &&
      c.problem_type != "regression") {
    // multi_label_classification trains with a sigmoid per label (BCEWithLogitsLoss), which the
    // kit does not implement: training it with cross-entropy would be silently wrong.
    throw Error(source + ": \"problem_type\": \"" + io::printable(c.problem_type) + "\" is not supported (supported: "
                "\"single_label_classification\", \"regression\", or none)");
  }
  // Hugging Face derives num_labels from id2label when it is there (save_pretrained writes
  // id2label, not num_labels); a config with neither has 2 labels.
  if (j.contains("id2label") && j.at("id2label").is_object()) {
    c.num_labels = static_cast<int64_t>(j.at("id2label").size());
  } else {
    read(j, "num_labels", c.num_labels, source);
  }
  if (j.contains("position_embedding_type") &&
      j.at("position_embedding_type") != nlohmann::json("absolute")) {
    throw Error(source + ": position_embedding_type " + io::json_excerpt(j.at("position_embedding_type")) +
                " is not supported (only \"absolute\")");
  }
  for (const char* flag : {"is_decoder", "add_cross_attention"}) {
    if (j.contains(flag) && j.at(flag) == nlohmann::json(true)) {
      throw Error(source + ": \"" + flag + "\": true is not supported (encoder-only BERT)");
    }
  }
  for (const auto& [key, value] : j.items()) {
    if (!kBertOwnedKeys.count(key)) c.extra[key] = value;
  }

  // Note [Bounded configs] (model/config_json.h): sizes by meaning, then the machine's memory.
  require_size(c.vocab_size, kMaxVocabulary, "vocab_size", source);
  require_size(c.hidden_size, kMaxWidth, "hidden_size", source);
  require_size(c.num_hidden_layers, kMaxLayers, "num_hidden_layers", source);
  require_size(c.num_attention_heads, c.hidden_size, "num_attention_heads", source);
  require_size(c.intermediate_size, 4 * kMaxWidth, "intermediate_size", source);
  require_size(c.max_position_embeddings, kMaxPositions, "max_position_embeddings", source);
  require_size(c.type_vocab_size, kMaxSmallCount, "type_vocab_size", source);
  require_size(c.num_labels, kMaxSmallCount, "num_labels", source);
  if (c.hidden_size % c.num_attention_heads != 0) {
    throw Error(source + ": hidden_size " + std::to_string(c.hidden_size) +
                " is not a multiple of num_attention_heads " +
                std::to_string(c.num_attention_heads));
  }
  if (c.hidden_act != "gelu" && c.hidden_act != "gelu_new" && c.hidden_act != "relu") {
    throw Error(source + ": hidden_act \"" + io::printable(c.hidden_act) +
                "\" is not supported (gelu, gelu_new, relu)");
  }
  require_probability(c.hidden_dropout_prob, "hidden_dropout_prob", source);
  require_probability(c.attention_probs_dropout_prob, "attention_probs_dropout_prob", source);
  if (c.classifier_dropout) require_probability(*c.classifier_dropout, "classifier_dropout", source);
  if (c.pad_token_id < 0 || c.pad_token_id >= c.vocab_size) {
    throw Error(source + ": pad_token_id " + std::to_string(c.pad_token_id) +
                " is outside the vocabulary of " + std::to_string(c.vocab_size));
  }
  require_epsilon(c.layer_norm_eps, "layer_norm_eps", source);
  const double h = double(c.hidden_size);
  require_fits_in_memory(
      {{"vocab_size x hidden_size", double(c.vocab_size) * h},
       {"max_position_embeddings x hidden_size", double(c.max_position_embeddings) * h},
       {"num_hidden_layers x (4 hidden_size^2 + 2 hidden_size x intermediate_size)",
        double(c.num_hidden_layers) * (4 * h * h + 2 * h * double(c.intermediate_size))}},
      source);
  return c;
}

BertConfig BertConfig::from_file(const std::filesystem::path& config_json) {
  return from_json(io::read_json_file(config_json), config_json.string());
}

nlohmann::json BertConfig::to_json() const {
  nlohmann::json j = extra;
  j["model_type"] = "bert";
  j["architectures"] = {"BertForSequenceClassification"};
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["intermediate_size"] = intermediate_size;
  j["hidden_act"] = hidden_act;
  j["hidden_dropout_prob"] = hidden_dropout_prob;
  j["attention_probs_dropout_prob"] = attention_probs_dropout_prob;
  j["classifier_dropout"] = classifier_dropout ? nlohmann::json(*classifier_dropout) : nlohmann::json();
  j["max_position_embeddings"] = max_position_embeddings;
  j["type_vocab_size"] = type_vocab_size;
  j["initializer_range"] = initializer_range;
  j["layer_norm_eps"] = layer_norm_eps;
  j["pad_token_id"] = pad_token_id;
  j["position_embedding_type"] = "absolute";
  if (!problem_type.empty()) j["problem_type"] = problem_type;
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (int64_t i = 0; i < num_labels; ++i) {
    const std::string name = "LABEL_" + std::to_string(i);
    id2label[std::to_string(i)] = name;
    label2id[name] = i;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
  return j;
}

BertOverrides BertOverrides::dropout(double p) {
  BertOverrides o;
  o.hidden_dropout_prob = p;
  o.attention_probs_dropout_prob = p;
  o.classifier_dropout = p;
  return o;
}

void BertOverrides::apply(BertConfig& config) const {
  if (hidden_dropout_prob) config.hidden_dropout_prob = *hidden_dropout_prob;
  if (attention_probs_dropout_prob) config.attention_probs_dropout_prob = *attention_probs_dropout_prob;
  if (classifier_dropout) config.classifier_dropout = *classifier_dropout;
  if (num_labels) config.num_labels = *num_labels;
}

}  // namespace dtlab::model
