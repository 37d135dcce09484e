// Model FLOPs per token, see model/flops.h.
#include "dtlab/model/flops.h"

namespace dtlab::model {
namespace {

double per_token(double matmul_weights, double layers, double width, double sequence) {
  return 6.0 * matmul_weights + 12.0 * layers * sequence * width;
}

}  // namespace

double gpt2_training_flops_per_token(const Gpt2Config& c, double sequence) {
  const double h = static_cast<double>(c.n_embd), l = static_cast<double>(c.n_layer);
  const double weights = l * (4 * h * h + 2 * h * static_cast<double>(c.inner_dim())) +
                         static_cast<double>(c.vocab_size) * h;
  return per_token(weights, l, h, sequence);
}

double bert_training_flops_per_token(const BertConfig& c, double sequence) {
  const double h = static_cast<double>(c.hidden_size), l = static_cast<double>(c.num_hidden_layers);
  // The pooler and the classifier run once a row, on its first token: per token, a share of them.
  const double weights = l * (4 * h * h + 2 * h * static_cast<double>(c.intermediate_size)) +
                         (h * h + h * static_cast<double>(c.num_labels)) / sequence;
  return per_token(weights, l, h, sequence);
}

}  // namespace dtlab::model
