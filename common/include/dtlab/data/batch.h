// One minibatch of token sequences, as every model of the kit reads it: the fields a model does
// not use stay undefined (a GLUE batch has no label weights, a language-model batch no
// token types).
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace dtlab::data {

struct Batch {
  torch::Tensor input_ids;       // [batch, seq] int64
  torch::Tensor attention_mask;  // [batch, seq] 0/1; undefined: every token is real
  torch::Tensor token_type_ids;  // [batch, seq] int64 (BERT's segments)
  torch::Tensor labels;          // [batch] class ids (GLUE) or [batch, seq] next tokens (LM)
  torch::Tensor label_weights;   // [batch, seq] 0/1: which labels count in the loss (LM)

  int64_t size() const { return input_ids.defined() ? input_ids.size(0) : 0; }
  // Tokens the model reads in this batch (attention_mask ones; every token without a mask),
  // for throughput figures.
  int64_t real_tokens() const;
  // The same batch on `device` (every defined field; itself where it is there already).
  Batch to(const torch::Device& device) const;
};

}  // namespace dtlab::data
