// The forward computation of GPT2LMHeadModel, operation for operation what Hugging Face's
// modeling_gpt2.py (eager attention) computes, so the same checkpoint gives the same logits.
#include "dtlab/model/gpt2.h"

#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/init.h>

#include <cmath>
#include <limits>

#include "dtlab/core/error.h"
#include "dtlab/model/checkpoint.h"

namespace dtlab::model {

torch::Tensor gelu_new(const torch::Tensor& x) {
  constexpr double kPi = 3.141592653589793;  // Python's math.pi
  const double k = std::sqrt(2.0 / kPi);
  return 0.5 * x * (1.0 + torch::tanh(k * (x + 0.044715 * torch::pow(x, 3.0))));
}

namespace {

torch::nn::LayerNorm layer_norm(const Gpt2Config& c) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd}).eps(c.layer_norm_epsilon));
}

// torch.finfo(dtype).min: the lowest finite value of a floating dtype.
double lowest_value(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat64: return std::numeric_limits<double>::lowest();
    case torch::kFloat16: return -65504.0;
    case torch::kBFloat16: return -3.3895313892515355e38;
    default: return std::numeric_limits<float>::lowest();
  }
}

}  // namespace

int64_t Gpt2KVCache::length() const {
  return layers.empty() || !layers[0].key.defined() ? 0 : layers[0].key.size(-2);
}

torch::Tensor additive_attention_mask(const torch::Tensor& attention_mask, torch::ScalarType dtype) {
  const torch::Tensor mask = attention_mask.view({attention_mask.size(0), -1});
  const torch::Tensor m = mask.unsqueeze(1).unsqueeze(2).to(dtype);
  return (1.0 - m) * lowest_value(dtype);
}

// ---------------------------------------------------------------------------------------------

Gpt2Conv1DImpl::Gpt2Conv1DImpl(int64_t in_features, int64_t out_features) {
  weight = register_parameter("weight", torch::empty({in_features, out_features}));
  bias = register_parameter("bias", torch::zeros({out_features}));
  // transformers' Conv1D draws its weight when it is built (and _init_weights draws again):
  // drawing here too keeps the generator in step with it.
  torch::NoGradGuard no_grad;
  torch::nn::init::normal_(weight, 0.0, 0.02);
}

torch::Tensor Gpt2Conv1DImpl::forward(const torch::Tensor& x) {
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = weight.size(1);
  return torch::addmm(bias, x.view({-1, x.size(-1)}), weight).view(out_shape);
}

Gpt2AttentionImpl::Gpt2AttentionImpl(const Gpt2Config& c, int64_t layer_idx)
    : num_heads(c.n_head),
      head_dim(c.head_dim()),
      layer_idx(layer_idx),
      scale_attn_weights(c.scale_attn_weights),
      scale_attn_by_inverse_layer_idx(c.scale_attn_by_inverse_layer_idx),
      reorder_and_upcast_attn(c.reorder_and_upcast_attn) {
  c_attn = register_module("c_attn", Gpt2Conv1D(c.n_embd, 3 * c.n_embd));
  c_proj = register_module("c_proj", Gpt2Conv1D(c.n_embd, c.n_embd));
  attn_dropout = register_module("attn_dropout", Dropout(c.attn_pdrop));
  resid_dropout = register_module("resid_dropout", Dropout(c.resid_pdrop));
}

// The scaled scores q·kᵀ [batch, heads, queries, keys], by GPT2Attention._attn or, with
// reorder_and_upcast_attn, by _upcast_and_reordered_attn (float32, the scale inside baddbmm).
torch::Tensor Gpt2AttentionImpl::scores(const torch::Tensor& q, const torch::Tensor& k) const {
  if (!reorder_and_upcast_attn) {
    torch::Tensor w = torch::matmul(q, k.transpose(-1, -2));
    if (scale_attn_weights) w = w / torch::full({}, std::pow(double(head_dim), 0.5), w.options());
    if (scale_attn_by_inverse_layer_idx) w = w / double(layer_idx + 1);
    return w;
  }
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), keys = k.size(2);
  double scale = 1.0;
  if (scale_attn_weights) scale /= std::pow(double(head_dim), 0.5);
  if (scale_attn_by_inverse_layer_idx) scale /= double(layer_idx + 1);
  const torch::Tensor q3 = q.reshape({-1, queries, head_dim}).to(torch::kFloat32);
  const torch::Tensor k3 = k.transpose(-1, -2).reshape({-1, head_dim, keys}).to(torch::kFloat32);
  // In place on zeros: LibTorch 1.13's out-of-place CPU baddbmm multiplies uninitialised memory
  // by beta = 0, so a NaN there comes out (Note [baddbmm] in tests/golden/make_gpt2_golden.py).
  return torch::zeros({batch * heads, queries, keys}, q3.options())
      .baddbmm_(q3, k3, /*beta=*/0, /*alpha=*/scale)
      .reshape({batch, heads, queries, keys});
}

torch::Tensor Gpt2AttentionImpl::forward(const torch::Tensor& hidden,
                                         const torch::Tensor& additive_mask,
                                         Gpt2LayerCache* cache) {
  const int64_t batch = hidden.size(0), seq = hidden.size(1), embed = hidden.size(2);
  // [batch, seq, embed] -> [batch, heads, seq, head_dim]
  auto heads = [&](const torch::Tensor& x) {
    return x.view({batch, seq, num_heads, head_dim}).permute({0, 2, 1, 3});
  };
  const auto qkv = c_attn(hidden).split(embed, /*dim=*/2);
  const torch::Tensor q = heads(qkv[0]);
  torch::Tensor k = heads(qkv[1]), v = heads(qkv[2]);
  if (cache) {
    if (cache->key.defined()) {
      k = torch::cat({cache->key, k}, -2);
      v = torch::cat({cache->value, v}, -2);
    }
    cache->key = k;
    cache->value = v;
  }

  torch::Tensor w = scores(q, k);
  // Causal mask by replacement: query i (absolute position keys - queries + i) sees keys <= it.
  const int64_t queries = q.size(2), keys = k.size(2);
  const torch::Tensor causal =
      torch::ones({queries, keys}, w.options().dtype(torch::kBool)).tril(keys - queries);
  w = torch::where(causal, w, torch::full({}, lowest_value(w.scalar_type()), w.options()));
  if (additive_mask.defined()) w = w + additive_mask;
  w = torch::softmax(w, -1).to(v.scalar_type());
  w = attn_dropout(w);
  const torch::Tensor out =
      torch::matmul(w, v).permute({0, 2, 1, 3}).contiguous().view({batch, seq, embed});
  return resid_dropout(c_proj(out));
}

Gpt2MLPImpl::Gpt2MLPImpl(const Gpt2Config& c) {
  c_fc = register_module("c_fc", Gpt2Conv1D(c.n_embd, c.inner_dim()));
  c_proj = register_module("c_proj", Gpt2Conv1D(c.inner_dim(), c.n_embd));
  dropout = register_module("dropout", Dropout(c.resid_pdrop));
}

torch::Tensor Gpt2MLPImpl::forward(const torch::Tensor& x) {
  return dropout(c_proj(gelu_new(c_fc(x))));
}

Gpt2BlockImpl::Gpt2BlockImpl(const Gpt2Config& c, int64_t layer_idx) {
  ln_1 = register_module("ln_1", layer_norm(c));
  attn = register_module("attn", Gpt2Attention(c, layer_idx));
  ln_2 = register_module("ln_2", layer_norm(c));
  mlp = register_module("mlp", Gpt2MLP(c));
}

torch::Tensor Gpt2BlockImpl::forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask,
                                     Gpt2LayerCache* cache) {
  const torch::Tensor x = attn(ln_1(hidden), additive_mask, cache) + hidden;
  return x + mlp(ln_2(x));
}

// ---------------------------------------------------------------------------------------------

Gpt2ModelImpl::Gpt2ModelImpl(const Gpt2Config& c) {
  wte = register_module("wte", torch::nn::Embedding(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", torch::nn::Embedding(c.n_positions, c.n_embd));
  drop = register_module("drop", Dropout(c.embd_pdrop));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(Gpt2Block(c, i));
  ln_f = register_module("ln_f", layer_norm(c));

  // GPT2PreTrainedModel._init_weights, applied as nn.Module.apply does (children before their
  // parent, in registration order), so that the generator is drawn in transformers' order:
  // per block c_attn, c_proj, then attention's scaled c_proj, then c_fc, c_proj and the MLP's
  // scaled c_proj. The scaled ones (GPT-2's 1/sqrt(N) for the N = 2 * n_layer residual
  // additions) overwrite the plain draw, as in transformers.
  torch::NoGradGuard no_grad;
  const double std = c.initializer_range;
  const double scaled_std = c.initializer_range / std::sqrt(2.0 * double(c.n_layer));
  auto init_conv = [&](Gpt2Conv1DImpl& conv) {
    torch::nn::init::normal_(conv.weight, 0.0, std);
    torch::nn::init::zeros_(conv.bias);
  };
  auto init_norm = [](torch::nn::LayerNormImpl& norm) {
    torch::nn::init::ones_(norm.weight);
    torch::nn::init::zeros_(norm.bias);
  };
  torch::nn::init::normal_(wte->weight, 0.0, std);
  torch::nn::init::normal_(wpe->weight, 0.0, std);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    Gpt2BlockImpl& b = *block(i);
    init_norm(*b.ln_1);
    init_conv(*b.attn->c_attn);
    init_conv(*b.attn->c_proj);
    torch::nn::init::normal_(b.attn->c_proj->weight, 0.0, scaled_std);
    init_norm(*b.ln_2);
    init_conv(*b.mlp->c_fc);
    init_conv(*b.mlp->c_proj);
    torch::nn::init::normal_(b.mlp->c_proj->weight, 0.0, scaled_std);
  }
  init_norm(*ln_f);
}

Gpt2Block Gpt2ModelImpl::block(int64_t i) const {
  return Gpt2Block(h->ptr<Gpt2BlockImpl>(static_cast<size_t>(i)));
}

torch::Tensor Gpt2ModelImpl::embed(const torch::Tensor& input_ids, const torch::Tensor& position_ids,
                                   int64_t past_length) {
  const int64_t seq = input_ids.size(-1);
  const int64_t max_positions = wpe->weight.size(0);
  torch::Tensor positions = position_ids;
  if (!positions.defined()) {
    if (past_length + seq > max_positions) {
      throw Error("sequence of " + std::to_string(past_length + seq) +
                  " positions exceeds n_positions " + std::to_string(max_positions) +
                  " of the model: use shorter sequences (or fewer new tokens)");
    }
    positions = torch::arange(past_length, past_length + seq,
                              torch::TensorOptions().dtype(torch::kLong).device(input_ids.device()))
                    .unsqueeze(0);
  } else if (positions.numel() > 0 && positions.max().item<int64_t>() >= max_positions) {
    throw Error("position id " + std::to_string(positions.max().item<int64_t>()) +
                " is beyond n_positions " + std::to_string(max_positions) + " of the model");
  }
  return drop(wte(input_ids) + wpe(positions));
}

// ---------------------------------------------------------------------------------------------

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  const int64_t vocab = logits.size(-1);
  const torch::Tensor shift_logits = logits.narrow(-2, 0, logits.size(-2) - 1).contiguous();
  const torch::Tensor shift_labels = labels.narrow(-1, 1, labels.size(-1) - 1).contiguous();
  namespace F = torch::nn::functional;
  return F::cross_entropy(shift_logits.view({-1, vocab}), shift_labels.view(-1),
                          F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex));
}

Gpt2LMHeadModelImpl::Gpt2LMHeadModelImpl(const Gpt2Config& config) : config_(config) {
  transformer = register_module("transformer", Gpt2Model(config));
  // transformers builds lm_head as an nn.Linear (drawing its default init), then _init_weights
  // draws normal(0, initializer_range), then, when tied, replaces the weight with wte's. The
  // same draws happen here, tied or not, so that the generator ends where transformers' does.
  torch::nn::Linear head(torch::nn::LinearOptions(config.n_embd, config.vocab_size).bias(false));
  {
    torch::NoGradGuard no_grad;
    torch::nn::init::normal_(head->weight, 0.0, config.initializer_range);
  }
  if (!config.tie_word_embeddings) lm_head = register_module("lm_head", head);
}

torch::Tensor Gpt2LMHeadModelImpl::lm_head_weight() const {
  return config_.tie_word_embeddings ? transformer->wte->weight : lm_head->weight;
}

// Note [A tied weight on two devices]: a pipeline puts the embeddings on its first stage's device
// and the head on its last (pipeline::place_stages). With tied embeddings the head's weight IS
// transformer.wte.weight, one parameter on the first stage's device: the head reads it through
// .to(), a copy that autograd differentiates. Its backward carries the head's part of the
// gradient back to that one parameter, where autograd adds it to the embedding's part: one
// gradient, equal to the one a single device computes, and one weight for the optimiser to
// update; nothing to copy back after the step. On one device .to() returns the weight itself.
torch::Tensor Gpt2LMHeadModelImpl::head(const torch::Tensor& hidden) {
  return torch::nn::functional::linear(transformer->ln_f(hidden), lm_head_weight().to(hidden.device()));
}

Gpt2Output Gpt2LMHeadModelImpl::forward(const torch::Tensor& input_ids,
                                        const torch::Tensor& attention_mask,
                                        const torch::Tensor& labels,
                                        const torch::Tensor& position_ids, Gpt2KVCache* cache) {
  if (cache && cache->layers.empty()) cache->layers.resize(static_cast<size_t>(config_.n_layer));
  const int64_t past = cache ? cache->length() : 0;
  auto before = [&](int64_t stage) {
    if (stage_hooks_.before) stage_hooks_.before(stage);
  };
  auto after = [&](int64_t stage, const torch::Tensor& output) {
    if (stage_hooks_.after) stage_hooks_.after(stage, output);
  };
  before(0);
  torch::Tensor hidden = transformer->embed(input_ids, position_ids, past);
  after(0, hidden);
  torch::Tensor additive = attention_mask.defined()
                               ? additive_attention_mask(attention_mask, hidden.scalar_type())
                               : torch::Tensor();
  // A model whose layers a pipeline put on several GPUs (pipeline::place_layers) runs here as
  // plain model parallelism, layer after layer, each on its own device (evaluation, generation).
  // On one device every .to() below returns its tensor itself.
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    const torch::Device device = transformer->block(i)->ln_1->weight.device();
    hidden = hidden.to(device);
    if (additive.defined()) additive = additive.to(device);
    before(i + 1);
    hidden = transformer->block(i)->forward(hidden, additive,
                                            cache ? &cache->layers[static_cast<size_t>(i)] : nullptr);
    after(i + 1, hidden);
  }
  Gpt2Output out;
  before(num_stages() - 1);
  out.logits = head(hidden.to(transformer->ln_f->weight.device()));
  after(num_stages() - 1, out.logits);
  if (labels.defined()) out.loss = lm_loss(out.logits, labels.to(out.logits.device()));
  return out;
}

torch::Tensor Gpt2LMHeadModelImpl::forward_stage(int64_t stage, const torch::Tensor& x,
                                                 const torch::Tensor& attention_mask) {
  if (stage < 0 || stage >= num_stages()) {
    throw Error("GPT-2 stage " + std::to_string(stage) + " does not exist: the model has " +
                std::to_string(num_stages()) + " stages, 0 .. " + std::to_string(num_stages() - 1));
  }
  if (stage == 0) return transformer->embed(x);
  if (stage == num_stages() - 1) return head(x);
  const torch::Tensor additive = attention_mask.defined()
                                     ? additive_attention_mask(attention_mask, x.scalar_type())
                                     : torch::Tensor();
  return transformer->block(stage - 1)->forward(x, additive);
}

std::vector<std::pair<std::string, torch::Tensor>> Gpt2LMHeadModelImpl::stage_parameters(
    int64_t stage) const {
  if (stage < 0 || stage >= num_stages()) {
    throw Error("GPT-2 stage " + std::to_string(stage) + " does not exist: the model has " +
                std::to_string(num_stages()) + " stages");
  }
  std::vector<std::string> prefixes;
  if (stage == 0) {
    prefixes = {"transformer.wte.", "transformer.wpe."};
  } else if (stage == num_stages() - 1) {
    prefixes = {"transformer.ln_f.",
                config_.tie_word_embeddings ? "transformer.wte." : "lm_head."};
  } else {
    prefixes = {"transformer.h." + std::to_string(stage - 1) + "."};
  }
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : named_parameters()) {
    for (const auto& prefix : prefixes) {
      if (key_starts_with(item.key(), prefix)) out.emplace_back(item.key(), item.value());
    }
  }
  return out;
}

std::vector<std::string> state_dict_keys(const Gpt2LMHeadModel& model) {
  std::vector<std::string> keys;
  for (const auto& p : model->named_parameters()) keys.push_back(p.key());
  return keys;
}

// ---------------------------------------------------------------------------------------------

torch::Tensor generate_greedy(Gpt2LMHeadModel& model, const torch::Tensor& prompt_ids,
                              int64_t max_new_tokens, std::optional<int64_t> eos_token_id,
                              const torch::Tensor& attention_mask) {
  if (prompt_ids.dim() != 1 && prompt_ids.dim() != 2) {
    throw Error("generate_greedy: prompt_ids must be [seq] or [batch, seq], got " +
                std::to_string(prompt_ids.dim()) + " dimensions");
  }
  if (prompt_ids.size(-1) == 0) throw Error("generate_greedy: the prompt is empty");
  if (max_new_tokens <= 0) {
    throw Error("generate_greedy: max_new_tokens must be positive, got " + std::to_string(max_new_tokens));
  }
  const Gpt2Config& config = model->config();
  const int64_t total = prompt_ids.size(-1) + max_new_tokens;
  if (total > config.n_positions) {
    throw Error("generate_greedy: prompt of " + std::to_string(prompt_ids.size(-1)) + " plus " +
                std::to_string(max_new_tokens) + " new tokens exceeds n_positions " +
                std::to_string(config.n_positions));
  }
  torch::NoGradGuard no_grad;
  torch::Tensor ids = prompt_ids.to(torch::kLong).view({-1, prompt_ids.size(-1)});
  const int64_t batch = ids.size(0);
  torch::Tensor mask = attention_mask.defined() ? attention_mask.to(torch::kLong).view_as(ids)
                                                : torch::ones_like(ids);
  // transformers pads finished rows with pad_token_id, or eos_token_id when there is none.
  const int64_t pad = config.pad_token_id.value_or(eos_token_id.value_or(0));
  torch::Tensor unfinished = torch::ones({batch}, ids.options());

  Gpt2KVCache cache;
  torch::Tensor step_ids = ids;
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    // GPT2LMHeadModel.prepare_inputs_for_generation: positions count real tokens only.
    torch::Tensor positions = mask.cumsum(-1) - 1;
    positions.masked_fill_(mask.eq(0), 1);
    positions = positions.narrow(1, positions.size(1) - step_ids.size(1), step_ids.size(1));
    const torch::Tensor logits = model->forward(step_ids, mask, {}, positions, &cache).logits;
    torch::Tensor next = logits.select(1, -1).argmax(-1).to(ids.device());  // a pipeline's last GPU
    if (eos_token_id) next = next * unfinished + pad * (1 - unfinished);
    ids = torch::cat({ids, next.unsqueeze(1)}, 1);
    mask = torch::cat({mask, torch::ones({batch, 1}, mask.options())}, 1);
    if (eos_token_id) {
      unfinished = unfinished * next.ne(*eos_token_id).to(torch::kLong);
      if (unfinished.max().item<int64_t>() == 0) break;
    }
    step_ids = next.unsqueeze(1);
  }
  return prompt_ids.dim() == 1 ? ids.squeeze(0) : ids;
}

}  // namespace dtlab::model
