// The forward computation of BertForSequenceClassification, line for line what Hugging Face's
// modeling_bert.py (eager attention) computes, so the same checkpoint gives the same logits.
#include "dtlab/model/bert.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/init.h>

#include <cmath>
#include <limits>

#include "dtlab/core/error.h"
#include "dtlab/model/ops.h"

namespace dtlab::model {
namespace {

double classifier_dropout_of(const BertConfig& c) {
  return c.classifier_dropout.value_or(c.hidden_dropout_prob);
}

torch::nn::LayerNorm layer_norm(const BertConfig& c) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps));
}

// A Linear layer applied as PyTorch's nn.Linear applies it (at::linear: one addmm for a
// contiguous [batch, seq, in] input). The module's own forward in LibTorch 1.13 (F::linear)
// runs a matmul and then adds the bias: a second pass over the output, and its matmul was
// slower than the addmm (the profile that made the step faster, commit 63a369c: 62 against 41 ms a step on bench_task1 tiny).
torch::Tensor linear_as_pytorch(torch::nn::Linear& layer, const torch::Tensor& x) {
  if (ops_in_use() == Ops::plain) return layer->forward(x);  // model/ops.h
  return torch::linear(x, layer->weight, layer->bias);
}

}  // namespace

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& c) {
  word_embeddings = register_module(
      "word_embeddings",
      torch::nn::Embedding(torch::nn::EmbeddingOptions(c.vocab_size, c.hidden_size)
                               .padding_idx(c.pad_token_id)));
  position_embeddings = register_module(
      "position_embeddings", torch::nn::Embedding(c.max_position_embeddings, c.hidden_size));
  token_type_embeddings = register_module(
      "token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.hidden_size));
  LayerNorm = register_module("LayerNorm", layer_norm(c));
  dropout = register_module("dropout", Dropout(c.hidden_dropout_prob));
}

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& input_ids,
                                          const torch::Tensor& token_type_ids) {
  const int64_t seq_len = input_ids.size(1);
  const int64_t max_len = position_embeddings->weight.size(0);
  if (seq_len > max_len) {
    throw Error("sequence length " + std::to_string(seq_len) +
                " exceeds max_position_embeddings " + std::to_string(max_len) +
                " of the model: lower --max_seq_length");
  }
  const torch::Tensor positions =
      torch::arange(seq_len, torch::TensorOptions().dtype(torch::kLong).device(input_ids.device()));
  torch::Tensor x = word_embeddings(input_ids) + token_type_embeddings(token_type_ids) +
                    position_embeddings(positions).unsqueeze(0);
  return dropout(LayerNorm(x));
}

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& c)
    : num_heads(c.num_attention_heads), head_size(c.hidden_size / c.num_attention_heads) {
  query = register_module("query", torch::nn::Linear(c.hidden_size, c.hidden_size));
  key = register_module("key", torch::nn::Linear(c.hidden_size, c.hidden_size));
  value = register_module("value", torch::nn::Linear(c.hidden_size, c.hidden_size));
  dropout = register_module("dropout", Dropout(c.attention_probs_dropout_prob));
}

torch::Tensor BertSelfAttentionImpl::forward(const torch::Tensor& hidden,
                                             const torch::Tensor& additive_mask) {
  const int64_t batch = hidden.size(0), seq = hidden.size(1);
  // [batch, seq, hidden] -> [batch, heads, seq, head_size]
  auto heads = [&](const torch::Tensor& x) {
    return x.view({batch, seq, num_heads, head_size}).permute({0, 2, 1, 3});
  };
  const torch::Tensor q = heads(linear_as_pytorch(query, hidden));
  const torch::Tensor k = heads(linear_as_pytorch(key, hidden));
  const torch::Tensor v = heads(linear_as_pytorch(value, hidden));
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(head_size));
  scores = scores + additive_mask;
  const torch::Tensor probs = dropout(torch::softmax(scores, -1));
  return torch::matmul(probs, v).permute({0, 2, 1, 3}).contiguous().view({batch, seq, -1});
}

BertResidualOutputImpl::BertResidualOutputImpl(int64_t in_features, const BertConfig& c) {
  dense = register_module("dense", torch::nn::Linear(in_features, c.hidden_size));
  LayerNorm = register_module("LayerNorm", layer_norm(c));
  dropout = register_module("dropout", Dropout(c.hidden_dropout_prob));
}

torch::Tensor BertResidualOutputImpl::forward(const torch::Tensor& x,
                                              const torch::Tensor& residual) {
  return LayerNorm(dropout(linear_as_pytorch(dense, x)) + residual);
}

BertAttentionImpl::BertAttentionImpl(const BertConfig& c) {
  self = register_module("self", BertSelfAttention(c));
  output = register_module("output", BertResidualOutput(c.hidden_size, c));
}

torch::Tensor BertAttentionImpl::forward(const torch::Tensor& hidden,
                                         const torch::Tensor& additive_mask) {
  return output(self(hidden, additive_mask), hidden);
}

BertIntermediateImpl::BertIntermediateImpl(const BertConfig& c) : activation(c.hidden_act) {
  dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.intermediate_size));
}

torch::Tensor BertIntermediateImpl::forward(const torch::Tensor& x) {
  const torch::Tensor h = linear_as_pytorch(dense, x);
  if (activation == "gelu") return torch::gelu(h);  // exact, erf-based
  if (activation == "gelu_new") return torch::gelu(h, "tanh");
  return torch::relu(h);
}

BertLayerImpl::BertLayerImpl(const BertConfig& c) {
  attention = register_module("attention", BertAttention(c));
  intermediate = register_module("intermediate", BertIntermediate(c));
  output = register_module("output", BertResidualOutput(c.intermediate_size, c));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& hidden,
                                     const torch::Tensor& additive_mask) {
  const torch::Tensor attended = attention(hidden, additive_mask);
  return output(intermediate(attended), attended);
}

BertEncoderImpl::BertEncoderImpl(const BertConfig& c) {
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layer->push_back(BertLayer(c));
}

torch::Tensor BertEncoderImpl::forward(torch::Tensor hidden, const torch::Tensor& additive_mask) {
  for (const auto& module : *layer) {
    hidden = module->as<BertLayer>()->forward(hidden, additive_mask);
  }
  return hidden;
}

BertPoolerImpl::BertPoolerImpl(const BertConfig& c) {
  dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.hidden_size));
}

torch::Tensor BertPoolerImpl::forward(const torch::Tensor& hidden) {
  return torch::tanh(dense(hidden.select(1, 0)));
}

BertModelImpl::BertModelImpl(const BertConfig& c) {
  embeddings = register_module("embeddings", BertEmbeddings(c));
  encoder = register_module("encoder", BertEncoder(c));
  pooler = register_module("pooler", BertPooler(c));
}

torch::Tensor BertModelImpl::forward(const torch::Tensor& input_ids,
                                     const torch::Tensor& attention_mask,
                                     const torch::Tensor& token_type_ids) {
  const torch::Tensor mask =
      attention_mask.defined() ? attention_mask : torch::ones_like(input_ids);
  const torch::Tensor types =
      token_type_ids.defined() ? token_type_ids : torch::zeros_like(input_ids);
  const torch::Tensor hidden = embeddings(input_ids, types);
  // [batch, seq] of 1/0 -> [batch, 1, 1, seq] of 0/lowest, added to every head's scores.
  const float lowest = std::numeric_limits<float>::lowest();
  const torch::Tensor additive =
      (1.0 - mask.to(hidden.dtype()).unsqueeze(1).unsqueeze(2)) * lowest;
  return pooler(encoder(hidden, additive));
}

BertForSequenceClassificationImpl::BertForSequenceClassificationImpl(const BertConfig& config)
    : config_(config) {
  bert = register_module("bert", BertModel(config));
  dropout = register_module("dropout", Dropout(classifier_dropout_of(config)));
  classifier = register_module("classifier", torch::nn::Linear(config.hidden_size, config.num_labels));

  // Hugging Face's _init_weights, in module order.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      torch::nn::init::normal_(linear->weight, 0.0, config.initializer_range);
      torch::nn::init::zeros_(linear->bias);
    } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
      torch::nn::init::normal_(embedding->weight, 0.0, config.initializer_range);
      if (embedding->options.padding_idx()) {
        embedding->weight[*embedding->options.padding_idx()].zero_();
      }
    } else if (auto* norm = module->as<torch::nn::LayerNorm>()) {
      torch::nn::init::ones_(norm->weight);
      torch::nn::init::zeros_(norm->bias);
    }
  }
}

ClassifierOutput BertForSequenceClassificationImpl::forward(const torch::Tensor& input_ids,
                                                            const torch::Tensor& attention_mask,
                                                            const torch::Tensor& token_type_ids,
                                                            const torch::Tensor& labels) {
  ClassifierOutput out;
  const torch::Tensor pooled = bert(input_ids, attention_mask, token_type_ids);
  out.logits = classifier(dropout(pooled));
  if (labels.defined()) {
    const bool regression = config_.problem_type == "regression" ||
                            (config_.problem_type.empty() && config_.num_labels == 1);
    if (regression) {
      out.loss = torch::mse_loss(out.logits.squeeze(-1), labels.to(out.logits.dtype()).view(-1));
    } else {
      out.loss = torch::nn::functional::cross_entropy(out.logits.view({-1, config_.num_labels}),
                                                      labels.view(-1));
    }
  }
  return out;
}

std::vector<std::string> state_dict_keys(const BertForSequenceClassification& model) {
  std::vector<std::string> keys;
  for (const auto& p : model->named_parameters()) keys.push_back(p.key());
  for (const auto& b : model->named_buffers()) keys.push_back(b.key());
  return keys;
}

}  // namespace dtlab::model
