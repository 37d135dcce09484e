// BERT for sequence classification, computing exactly what Hugging Face's
// BertForSequenceClassification computes, with module and parameter names equal to its
// state-dict keys ("bert.embeddings.word_embeddings.weight", ...), so that checkpoints load
// as they are.
//
// Not here: the pre-training heads, cross-attention, relative position embeddings.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/model/bert_config.h"
#include "dtlab/model/dropout.h"
#include "dtlab/model/load_report.h"

namespace dtlab::model {

// Token, position and token-type embeddings, summed, then LayerNorm and dropout.
struct BertEmbeddingsImpl : torch::nn::Module {
  explicit BertEmbeddingsImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids);
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr},
      token_type_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
  Dropout dropout{nullptr};
};
TORCH_MODULE(BertEmbeddings);

// Multi-head scaled dot-product self-attention ("attention.self" in Hugging Face).
struct BertSelfAttentionImpl : torch::nn::Module {
  explicit BertSelfAttentionImpl(const BertConfig& c);
  // additive_mask: [batch, 1, 1, seq], 0 where attending is allowed, a large negative elsewhere.
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask);
  int64_t num_heads, head_size;
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  Dropout dropout{nullptr};
};
TORCH_MODULE(BertSelfAttention);

// dense, dropout, then LayerNorm(x + input): the post-LN residual used twice per layer
// ("attention.output" and "output" in Hugging Face).
struct BertResidualOutputImpl : torch::nn::Module {
  BertResidualOutputImpl(int64_t in_features, const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& residual);
  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};
  Dropout dropout{nullptr};
};
TORCH_MODULE(BertResidualOutput);

struct BertAttentionImpl : torch::nn::Module {
  explicit BertAttentionImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask);
  BertSelfAttention self{nullptr};
  BertResidualOutput output{nullptr};
};
TORCH_MODULE(BertAttention);

struct BertIntermediateImpl : torch::nn::Module {
  explicit BertIntermediateImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear dense{nullptr};
  std::string activation;
};
TORCH_MODULE(BertIntermediate);

struct BertLayerImpl : torch::nn::Module {
  explicit BertLayerImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask);
  BertAttention attention{nullptr};
  BertIntermediate intermediate{nullptr};
  BertResidualOutput output{nullptr};
};
TORCH_MODULE(BertLayer);

struct BertEncoderImpl : torch::nn::Module {
  explicit BertEncoderImpl(const BertConfig& c);
  torch::Tensor forward(torch::Tensor hidden, const torch::Tensor& additive_mask);
  torch::nn::ModuleList layer{nullptr};  // of BertLayer; "encoder.layer.N" in Hugging Face
};
TORCH_MODULE(BertEncoder);

// tanh(dense(hidden state of the first token, [CLS])).
struct BertPoolerImpl : torch::nn::Module {
  explicit BertPoolerImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& hidden);
  torch::nn::Linear dense{nullptr};
};
TORCH_MODULE(BertPooler);

struct BertModelImpl : torch::nn::Module {
  explicit BertModelImpl(const BertConfig& c);
  // Returns the pooled output [batch, hidden]. attention_mask: [batch, seq] of 0/1.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& token_type_ids);
  BertEmbeddings embeddings{nullptr};
  BertEncoder encoder{nullptr};
  BertPooler pooler{nullptr};
};
TORCH_MODULE(BertModel);

struct ClassifierOutput {
  torch::Tensor loss;    // defined only when labels were given
  torch::Tensor logits;  // [batch, num_labels]
};

class BertForSequenceClassificationImpl : public torch::nn::Module {
 public:
  // Builds the model with weights initialised as Hugging Face does (normal(0, initializer_range)
  // for linear and embedding weights, zero biases and padding row, LayerNorm 1 and 0), drawing
  // from LibTorch's global generator (seed it with torch::manual_seed for reproducibility).
  explicit BertForSequenceClassificationImpl(const BertConfig& config);

  // labels: [batch] int64 class ids (or float targets when num_labels == 1, regression).
  // token_type_ids and attention_mask may be undefined tensors (zeros and ones are used).
  ClassifierOutput forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                           const torch::Tensor& token_type_ids,
                           const torch::Tensor& labels = torch::Tensor());

  const BertConfig& config() const { return config_; }

  BertModel bert{nullptr};
  Dropout dropout{nullptr};
  torch::nn::Linear classifier{nullptr};

 private:
  BertConfig config_;
};
TORCH_MODULE(BertForSequenceClassification);

// Loads DIR/config.json and DIR/model.safetensors. Checkpoint keys are matched to parameter
// names as Hugging Face does: a checkpoint of a bare BertModel (keys without "bert.") loads into
// the "bert." submodule; legacy "LayerNorm.gamma/beta" names map to "weight/bias"; pre-training
// heads ("cls.*") and "bert.embeddings.position_ids" are ignored. Missing weights keep their
// fresh initialisation and are listed in *report (a fresh classifier is expected for a
// pre-trained checkpoint). A shape mismatch is a dtlab::Error naming the weight file, the key and
// both shapes, unless overrides.ignore_mismatched_sizes: then that weight keeps its fresh
// initialisation and is listed in report->mismatched_keys (Hugging Face's behaviour).
// A folder with only pytorch_model.bin is a dtlab::Error that gives the conversion command.
BertForSequenceClassification from_pretrained(const std::filesystem::path& dir,
                                              const BertOverrides& overrides = {},
                                              LoadReport* report = nullptr);

// Writes DIR/config.json and DIR/model.safetensors (F32, Hugging Face key names), each
// atomically. Creates DIR if needed.
void save_pretrained(const BertForSequenceClassification& model, const std::filesystem::path& dir);

// Parameter and buffer names in Hugging Face's spelling, e.g. "bert.encoder.layer.0.output.dense.weight".
std::vector<std::string> state_dict_keys(const BertForSequenceClassification& model);

}  // namespace dtlab::model
