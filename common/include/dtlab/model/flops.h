// The FLOPs a training step of a model needs per token, for model FLOPs utilisation (MFU, Chowdhery
// et al. 2022, appendix B): the matrix products of the forward (2 FLOPs per weight per token) and
// of the backward (twice the forward's), and attention's two products over the sequence. What the
// hardware does beyond them (recomputation, softmax, layer norms, the optimiser) is not model FLOPs:
// a step that recomputes every block does more work for the same model FLOPs, and its MFU says so.
//
//   per token: 6 N + 12 L S H, with N the weights of the matrix products (per layer 4 H^2 for
//   attention and 2 H I for the MLP, plus the head), S the tokens each attends over (the padded
//   length of its row; under GPT-2's causal mask the product is computed whole, so S counts in
//   full), L layers of width H.
#pragma once

#include <cstdint>

#include "dtlab/model/bert_config.h"
#include "dtlab/model/gpt2_config.h"

namespace dtlab::model {

// GPT-2 with its language-modelling head (vocab x n_embd, tied or not): a token of a row of
// `sequence` tokens.
double gpt2_training_flops_per_token(const Gpt2Config& c, double sequence);

// BERT with its pooler and a classifier of num_labels (once a row, so 1/sequence of them a token):
// a token of a row of `sequence` tokens.
double bert_training_flops_per_token(const BertConfig& c, double sequence);

}  // namespace dtlab::model
