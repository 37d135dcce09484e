// GPT-2 over a tensor-parallel group (tp/gpt2_tp.h): the kit's GPT-2 forward (model/gpt2.cpp)
// with its large products split by the tp contract's operators.
#include "dtlab/tp/gpt2_tp.h"

#include <fmt/format.h>
#include <torch/nn/functional/normalization.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "dtlab/core/error.h"
#include "dtlab/model/checkpoint.h"
#include "dtlab/model/dropout.h"

namespace dtlab::tp {

using model::key_ends_with;
namespace {

void check_divides(const model::Gpt2Config& c, int tp) {
  if (c.n_head % tp != 0) {
    throw Error(fmt::format("tensor parallelism of {} does not divide GPT-2's {} attention heads: each rank "
                            "computes whole heads, so the TP size must divide n_head", tp, c.n_head));
  }
  if (c.inner_dim() % tp != 0) {
    throw Error(fmt::format("tensor parallelism of {} does not divide GPT-2's MLP width of {}", tp, c.inner_dim()));
  }
}

}  // namespace

std::string parameter_key(std::string hf_name) {
  std::replace(hf_name.begin(), hf_name.end(), '.', '/');
  return hf_name;
}

std::string hf_name(std::string parameter_key) {
  std::replace(parameter_key.begin(), parameter_key.end(), '/', '.');
  return parameter_key;
}

bool is_replicated(const std::string& name) {
  const bool split = name == "transformer.wte.weight" || key_ends_with(name, ".attn.c_attn.weight") ||
                     key_ends_with(name, ".attn.c_attn.bias") || key_ends_with(name, ".attn.c_proj.weight") ||
                     key_ends_with(name, ".mlp.c_fc.weight") || key_ends_with(name, ".mlp.c_fc.bias") ||
                     key_ends_with(name, ".mlp.c_proj.weight");
  return !split;
}

torch::Tensor shard_of(const std::string& name, const torch::Tensor& whole, const model::Gpt2Config& config,
                       int rank, int tp) {
  check_divides(config, tp);
  if (is_replicated(name)) return whole;
  if (name == "transformer.wte.weight") {
    const VocabShard shard = vocab_shard(config.vocab_size, rank, tp);
    // Padding rows are zero: no id looks them up, and the loss gives their logits no weight.
    torch::Tensor rows = torch::zeros({shard.rows, whole.size(1)}, whole.options());
    const int64_t real = std::max<int64_t>(0, std::min(shard.end(), shard.vocab) - shard.start);
    if (real > 0) rows.narrow(0, 0, real).copy_(whole.narrow(0, shard.start, real));
    return rows;
  }
  if (key_ends_with(name, ".attn.c_attn.weight") || key_ends_with(name, ".attn.c_attn.bias")) {
    const torch::Tensor columns =
        shard_gpt2_attention_columns(config.n_embd, config.n_head, rank, tp).to(whole.device());
    return whole.index_select(whole.dim() - 1, columns);
  }
  if (key_ends_with(name, ".attn.c_proj.weight")) {  // rows: the attention output, split by heads
    const int64_t rows = config.n_embd / tp;
    return whole.narrow(0, rank * rows, rows).clone();
  }
  const int64_t width = config.inner_dim() / tp;
  if (key_ends_with(name, ".mlp.c_proj.weight")) return whole.narrow(0, rank * width, width).clone();
  return whole.narrow(whole.dim() - 1, rank * width, width).clone();  // c_fc's weight and bias
}

TensorParallelGpt2Impl::TensorParallelGpt2Impl(const model::Gpt2LMHeadModel& whole, dist::Group& group)
    : config_(whole->config()), group_(&group) {
  const int tp = group.size(), rank = group.rank();
  check_divides(config_, tp);
  if (!config_.tie_word_embeddings || config_.reorder_and_upcast_attn) {
    throw Error("the tensor-parallel GPT-2 needs tied embeddings and reorder_and_upcast_attn false");
  }
  vocab_ = vocab_shard(config_.vocab_size, rank, tp);
  torch::NoGradGuard no_grad;
  for (const auto& item : whole->named_parameters()) {
    register_parameter(parameter_key(item.key()), shard_of(item.key(), item.value().detach(), config_, rank, tp).clone());
  }
}

torch::Tensor TensorParallelGpt2Impl::parameter(const std::string& name) const {
  // The dictionary must outlive the pointer find() returns into it (it is a copy, made per call).
  const torch::OrderedDict<std::string, torch::Tensor> parameters = named_parameters(/*recurse=*/false);
  const torch::Tensor* found = parameters.find(parameter_key(name));
  if (!found) throw Error("the tensor-parallel GPT-2 has no parameter " + name);
  return *found;
}

torch::Tensor TensorParallelGpt2Impl::block(int64_t layer, const torch::Tensor& hidden) {
  namespace F = torch::nn::functional;
  const std::string p = "transformer.h." + std::to_string(layer) + ".";
  auto norm = [&](const std::string& ln, const torch::Tensor& x) {
    return F::layer_norm(x, F::LayerNormFuncOptions({config_.n_embd})
                                .weight(parameter(p + ln + ".weight"))
                                .bias(parameter(p + ln + ".bias"))
                                .eps(config_.layer_norm_epsilon));
  };
  const std::string tag = "tp layer " + std::to_string(layer);
  const int64_t batch = hidden.size(0), seq = hidden.size(1);
  const int64_t heads = config_.n_head / group_->size(), head_dim = config_.head_dim(), width = heads * head_dim;

  // Attention of this rank's heads: c_attn's columns are their q, k and v, in that order.
  const torch::Tensor qkv = column_parallel_linear(norm("ln_1", hidden), parameter(p + "attn.c_attn.weight"),
                                                   parameter(p + "attn.c_attn.bias"), *group_, tag + " attention in");
  auto split_heads = [&](const torch::Tensor& x) { return x.view({batch, seq, heads, head_dim}).permute({0, 2, 1, 3}); };
  const auto parts = qkv.split(width, /*dim=*/2);
  const torch::Tensor q = split_heads(parts[0]), k = split_heads(parts[1]), v = split_heads(parts[2]);
  torch::Tensor w = torch::matmul(q, k.transpose(-1, -2));
  if (config_.scale_attn_weights) w = w / torch::full({}, std::pow(double(head_dim), 0.5), w.options());
  if (config_.scale_attn_by_inverse_layer_idx) w = w / double(layer + 1);
  const torch::Tensor causal = torch::ones({seq, seq}, w.options().dtype(torch::kBool)).tril();
  // Masked by replacement with the dtype's lowest value, as model/gpt2.cpp does.
  const double lowest = w.scalar_type() == torch::kDouble ? std::numeric_limits<double>::lowest()
                                                          : std::numeric_limits<float>::lowest();
  w = torch::where(causal, w, torch::full({}, lowest, w.options()));
  // Note [Dropout of a split model] (tp/gpt2_tp.h): the attention's mask is inside the split, so
  // each rank draws the whole model's mask and keeps its heads' part of it.
  torch::Tensor probabilities = torch::softmax(w, -1);
  if (is_training() && config_.attn_pdrop > 0) {
    const torch::Tensor whole = model::dropout(torch::ones({batch, config_.n_head, seq, seq}, probabilities.options()),
                                               config_.attn_pdrop, true);
    probabilities = probabilities * whole.narrow(1, group_->rank() * heads, heads);
  }
  const torch::Tensor attended =
      torch::matmul(probabilities, v).permute({0, 2, 1, 3}).contiguous().view({batch, seq, width});
  // Outside the split (after g): whole and equal on every rank, so one mask drawn alike on each.
  const torch::Tensor x =
      hidden + model::dropout(row_parallel_linear(attended, parameter(p + "attn.c_proj.weight"),
                                                  parameter(p + "attn.c_proj.bias"), *group_, tag + " attention out"),
                              config_.resid_pdrop, is_training());

  const torch::Tensor inner = model::gelu_new(column_parallel_linear(norm("ln_2", x), parameter(p + "mlp.c_fc.weight"),
                                                              parameter(p + "mlp.c_fc.bias"), *group_, tag + " mlp in"));
  return x + model::dropout(row_parallel_linear(inner, parameter(p + "mlp.c_proj.weight"),
                                                parameter(p + "mlp.c_proj.bias"), *group_, tag + " mlp out"),
                            config_.resid_pdrop, is_training());
}

torch::Tensor TensorParallelGpt2Impl::forward_stage(int64_t stage, const torch::Tensor& x) {
  namespace F = torch::nn::functional;
  if (stage < 0 || stage >= num_stages()) {
    throw Error(fmt::format("the tensor-parallel GPT-2 has stages 0 to {}, not {}", num_stages() - 1, stage));
  }
  const torch::Tensor wte = parameter("transformer.wte.weight");
  if (stage == 0) {
    const int64_t seq = x.size(-1);
    if (seq > config_.n_positions) {
      throw Error(fmt::format("sequence of {} positions exceeds n_positions {} of the model", seq, config_.n_positions));
    }
    const torch::Tensor positions = torch::arange(seq, x.options().dtype(torch::kLong));
    return model::dropout(vocab_parallel_embedding(x, wte, vocab_, *group_, "tp embedding") +
                              torch::embedding(parameter("transformer.wpe.weight"), positions),
                          config_.embd_pdrop, is_training());
  }
  if (stage <= config_.n_layer) return block(stage - 1, x);
  const torch::Tensor hidden = F::layer_norm(x, F::LayerNormFuncOptions({config_.n_embd})
                                                    .weight(parameter("transformer.ln_f.weight"))
                                                    .bias(parameter("transformer.ln_f.bias"))
                                                    .eps(config_.layer_norm_epsilon));
  // The tied head: this rank's wte rows as a column-parallel product (Conv1D layout: [in, out]).
  return column_parallel_linear(hidden, wte.t(), torch::Tensor(), *group_, "tp head");
}

torch::Tensor TensorParallelGpt2Impl::forward(const torch::Tensor& input_ids) {
  torch::Tensor x = input_ids;
  for (int64_t s = 0; s < num_stages(); ++s) x = forward_stage(s, x);
  return x;
}

std::vector<std::pair<std::string, torch::Tensor>> TensorParallelGpt2Impl::stage_parameters(int64_t stage) const {
  if (stage < 0 || stage >= num_stages()) {
    throw Error(fmt::format("the tensor-parallel GPT-2 has stages 0 to {}, not {}", num_stages() - 1, stage));
  }
  std::vector<std::string> names;
  if (stage == 0) {
    names = {"transformer.wte.weight", "transformer.wpe.weight"};
  } else if (stage <= config_.n_layer) {
    const std::string prefix = "transformer.h." + std::to_string(stage - 1) + ".";
    for (const auto& item : named_parameters(/*recurse=*/false)) {
      const std::string name = hf_name(item.key());
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
    }
  } else {
    names = {"transformer.wte.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"};
  }
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const std::string& name : names) out.emplace_back(name, parameter(name));
  return out;
}

torch::Tensor TensorParallelGpt2Impl::loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  // model::lm_loss's shift: the logits at position t predict labels[t + 1].
  const torch::Tensor shifted = logits.narrow(-2, 0, logits.size(-2) - 1).reshape({-1, logits.size(-1)});
  const torch::Tensor targets = labels.narrow(-1, 1, labels.size(-1) - 1).reshape({-1});
  const torch::Tensor per_token = vocab_parallel_cross_entropy(shifted, targets, vocab_, *group_, "tp loss");
  return per_token.sum() / targets.ne(model::kIgnoreIndex).sum().to(per_token.scalar_type());
}

}  // namespace dtlab::tp

namespace dtlab::tp {

TokenLossSum token_loss_sum(TensorParallelGpt2Impl& model, const torch::Tensor& logits, const torch::Tensor& labels,
                            const torch::Tensor& weights) {
  // Tokens of weight 0 become ignored targets: their loss is 0 and their logits get no gradient.
  const torch::Tensor counted = weights.reshape({-1}) > 0;
  const torch::Tensor targets =
      torch::where(counted, labels.reshape({-1}), torch::full({}, model::kIgnoreIndex, labels.options()));
  const torch::Tensor per_token = vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}), targets,
                                                               model.vocab(), model.group(), "tp loss");
  return {per_token.sum(), counted.sum().to(torch::kFloat64).item<double>()};
}

}  // namespace dtlab::tp
