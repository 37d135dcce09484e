// What tp_test and tp_train_test share: the small GPT-2 whose heads (6) and MLP (192) TP 2 and 3
// divide but whose vocabulary (101) they do not (both pad it), and the measures they compare with.
#pragma once

#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>

#include "dist_test_util.h"
#include "dtlab/dist/group.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/train/optimizer.h"

namespace dtlab::test {

inline constexpr int64_t kTpVocab = 101;

// No dropout: these tests compare with one process without drawing masks (tp_run_test holds dropout).
inline model::Gpt2Config small_tp_config() {
  model::Gpt2Config c;
  c.vocab_size = kTpVocab;
  c.n_positions = 16;
  c.n_embd = 48;
  c.n_layer = 2;
  c.n_head = 6;
  c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = 0.0;
  return c;
}

// Seed 11, with nonzero biases and layer norms: Hugging Face's 0 and 1 would hide a bias added on
// every rank or a layer norm's gradient left partial.
inline model::Gpt2LMHeadModel small_tp_gpt2(torch::ScalarType dtype = torch::kFloat) {
  std::lock_guard<std::mutex> lock(global_generator_mutex());
  torch::manual_seed(11);
  model::Gpt2LMHeadModel m(small_tp_config());
  torch::NoGradGuard no_grad;
  for (auto& p : m->named_parameters()) {
    if (p.value().dim() == 1) p.value().add_(torch::randn_like(p.value()) * 0.1);
  }
  m->to(dtype);
  return m;
}

// AdamW as the training suites (tp_train_test, mesh_train_test) run it against one process: weight
// decay on, so that a parameter in the wrong group would drift from one process's.
inline train::OptimizerOptions decaying_adamw_options() {
  train::OptimizerOptions o;
  o.learning_rate = 1e-3;
  o.weight_decay = 0.1;
  return o;
}

// max |a - b| over max |b|: relative to the tensor's scale, so that elements near 0 do not count
// as large relative errors.
inline double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = b.abs().max().item<double>();
  const double diff = (a - b).abs().max().item<double>();
  return scale == 0 ? diff : diff / scale;
}

// The all-reduces the group's log holds whose tag starts with tag_prefix.
inline int64_t all_reduce_count(dist::Group& group, const std::string& tag_prefix) {
  int64_t n = 0;
  for (const auto& r : group.log().records()) {
    if (r.op == "all_reduce" && r.tag.rfind(tag_prefix, 0) == 0) ++n;
  }
  return n;
}

}  // namespace dtlab::test
