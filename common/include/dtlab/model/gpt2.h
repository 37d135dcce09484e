// GPT-2 with a language-modelling head, computing exactly what Hugging Face's GPT2LMHeadModel
// computes (transformers 4.40.2, eager attention), with parameter names equal to its state-dict
// keys ("transformer.h.0.attn.c_attn.weight", ...), so that checkpoints load as they are.
//
// Note [Stages]: the model is also a sequence of num_stages() = n_layer + 2 stages, each callable
// on its own, for pipeline parallelism:
//   stage 0            embeddings: input ids [batch, seq] -> wte + wpe, dropout -> hidden
//   stage 1..n_layer   block s-1: hidden -> hidden [batch, seq, n_embd]
//   stage n_layer + 1  ln_f, then lm_head: hidden -> logits [batch, seq, vocab]
// forward() is these stages in order; the loss (lm_loss) is computed outside them. With tied
// embeddings the head's weight IS transformer.wte.weight, so the first and the last stage share
// a parameter: a pipeline that places them on different ranks must keep the two copies equal
// (sum their gradients), as Megatron-LM does.
//
// Not here: cross-attention, head pruning, activations other than gelu_new.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/model/checkpoint.h"

#include "dtlab/model/dropout.h"
#include "dtlab/model/gpt2_config.h"
#include "dtlab/model/load_report.h"

namespace dtlab::model {

// NewGELUActivation ("gelu_new"), written as transformers writes it: torch::gelu(x, "tanh") is the
// same function but rounds differently. The MLP's activation (and the tensor-parallel GPT-2's).
torch::Tensor gelu_new(const torch::Tensor& x);

// Hugging Face's Conv1D: a linear layer whose weight is stored [in, out], y = x·W + b. GPT-2
// checkpoints hold it that way, so it loads without a transpose.
struct Gpt2Conv1DImpl : torch::nn::Module {
  Gpt2Conv1DImpl(int64_t in_features, int64_t out_features);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;  // [in, out], [out]
};
TORCH_MODULE(Gpt2Conv1D);

// One layer's past keys and values, [batch, n_head, past_len, head_dim] each (undefined before
// the first step). The attention appends the new positions to them.
struct Gpt2LayerCache {
  torch::Tensor key, value;
};

// The key/value cache of incremental decoding: one entry per layer.
struct Gpt2KVCache {
  std::vector<Gpt2LayerCache> layers;
  // Positions already cached (0 when empty).
  int64_t length() const;
};

// [batch, keys] of 1 (attend) and 0 (padding) -> [batch, 1, 1, keys] of 0 and the dtype's
// lowest value, added to every head's scores (GPT2Model's attention_mask preparation).
torch::Tensor additive_attention_mask(const torch::Tensor& attention_mask, torch::ScalarType dtype);

// Masked multi-head self-attention: c_attn makes queries, keys and values in one product.
struct Gpt2AttentionImpl : torch::nn::Module {
  Gpt2AttentionImpl(const Gpt2Config& c, int64_t layer_idx);
  // hidden [batch, seq, n_embd]; additive_mask as additive_attention_mask gives, or undefined.
  // With a cache, attends to its keys and values too and appends this call's to it.
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask,
                        Gpt2LayerCache* cache = nullptr);
  int64_t num_heads, head_dim, layer_idx;
  bool scale_attn_weights, scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn;
  Gpt2Conv1D c_attn{nullptr}, c_proj{nullptr};
  Dropout attn_dropout{nullptr}, resid_dropout{nullptr};

 private:
  torch::Tensor scores(const torch::Tensor& q, const torch::Tensor& k) const;
};
TORCH_MODULE(Gpt2Attention);

struct Gpt2MLPImpl : torch::nn::Module {
  explicit Gpt2MLPImpl(const Gpt2Config& c);
  torch::Tensor forward(const torch::Tensor& x);
  Gpt2Conv1D c_fc{nullptr}, c_proj{nullptr};
  Dropout dropout{nullptr};
};
TORCH_MODULE(Gpt2MLP);

// Pre-LN block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
struct Gpt2BlockImpl : torch::nn::Module {
  Gpt2BlockImpl(const Gpt2Config& c, int64_t layer_idx);
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask,
                        Gpt2LayerCache* cache = nullptr);
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Gpt2Attention attn{nullptr};
  Gpt2MLP mlp{nullptr};
};
TORCH_MODULE(Gpt2Block);

// GPT2Model ("transformer." in the checkpoint): embeddings, blocks h.0 .. h.{n_layer-1}, ln_f.
struct Gpt2ModelImpl : torch::nn::Module {
  explicit Gpt2ModelImpl(const Gpt2Config& c);
  // Stage 0: wte(input_ids) + wpe(position_ids), then dropout. position_ids undefined:
  // past_length, past_length + 1, ... for every row.
  torch::Tensor embed(const torch::Tensor& input_ids, const torch::Tensor& position_ids = {},
                      int64_t past_length = 0);
  Gpt2Block block(int64_t i) const;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  Dropout drop{nullptr};
  torch::nn::ModuleList h{nullptr};  // of Gpt2Block
  torch::nn::LayerNorm ln_f{nullptr};
};
TORCH_MODULE(Gpt2Model);

struct Gpt2Output {
  torch::Tensor loss;    // defined only when labels were given
  torch::Tensor logits;  // [batch, seq, vocab_size]
};

// The shifted language-modelling loss of GPT2LMHeadModel: the logits at position t predict
// labels[t + 1]; mean cross-entropy over the labels that are not -100 (kIgnoreIndex).
// logits [batch, seq, vocab], labels [batch, seq] int64 (typically the input ids, with -100
// at padding).
constexpr int64_t kIgnoreIndex = -100;
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& labels);

class Gpt2LMHeadModelImpl : public torch::nn::Module {
 public:
  // Builds the model with weights initialised as Hugging Face does (GPT2PreTrainedModel.
  // _init_weights: normal(0, initializer_range) for Conv1D and embedding weights, c_proj weights
  // normal(0, initializer_range / sqrt(2 * n_layer)), zero biases, LayerNorm 1 and 0), drawing
  // from LibTorch's global generator in the order transformers does, so that after
  // torch::manual_seed(s) the weights equal those of torch.manual_seed(s);
  // GPT2LMHeadModel(config) in Python (same PyTorch version).
  explicit Gpt2LMHeadModelImpl(const Gpt2Config& config);

  // input_ids [batch, seq] int64. attention_mask [batch, past + seq] of 1/0 or undefined (all
  // ones). labels [batch, seq] or undefined (no loss). position_ids [batch or 1, seq] or
  // undefined (past, past + 1, ...). cache: per-layer past keys and values, extended in place.
  Gpt2Output forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                     const torch::Tensor& labels = {}, const torch::Tensor& position_ids = {},
                     Gpt2KVCache* cache = nullptr);

  // ln_f, then the output projection: hidden [batch, seq, n_embd] -> logits (the last stage).
  torch::Tensor head(const torch::Tensor& hidden);
  // The output projection's weight [vocab, n_embd]: transformer.wte.weight when tied.
  torch::Tensor lm_head_weight() const;

  // Note [Stages]. `x` is input ids for stage 0, hidden states otherwise; attention_mask
  // [batch, seq] of 1/0 or undefined, used by the block stages.
  int64_t num_stages() const { return config_.n_layer + 2; }
  torch::Tensor forward_stage(int64_t stage, const torch::Tensor& x,
                              const torch::Tensor& attention_mask = {});
  // The parameters a stage uses, by their Hugging Face names; the tied weight
  // "transformer.wte.weight" belongs to both the first and the last stage.
  std::vector<std::pair<std::string, torch::Tensor>> stage_parameters(int64_t stage) const;

  const Gpt2Config& config() const { return config_; }

  // Note [Stage hooks]: called by forward() around each of its stages (Note [Stages]), in order:
  // before(stage) before the stage reads its parameters, after(stage, output) once it has
  // computed. FSDP (the zero exercise) gathers a unit's parameters there and frees them after;
  // unset (the default) costs nothing. forward_stage does not call them.
  struct StageHooks {
    std::function<void(int64_t stage)> before;
    std::function<void(int64_t stage, const torch::Tensor& output)> after;
  };
  void set_stage_hooks(StageHooks hooks) { stage_hooks_ = std::move(hooks); }

  Gpt2Model transformer{nullptr};
  torch::nn::Linear lm_head{nullptr};  // only when !tie_word_embeddings ("lm_head.weight")

 private:
  Gpt2Config config_;
  StageHooks stage_hooks_;
};
TORCH_MODULE(Gpt2LMHeadModel);

// Greedy decoding with the key/value cache, token for token what transformers' generate(
// do_sample=False, max_new_tokens=N, eos_token_id=E) returns: prompt_ids [seq] or [batch, seq];
// returns the prompt followed by the new tokens, with the same rank. Every step appends the
// argmax of the last position's logits; a row that has produced eos_token_id keeps getting
// pad_token_id (config's, else eos_token_id) and decoding stops when every row has, or after
// max_new_tokens. attention_mask [batch, seq] (1/0) for left-padded prompts, whose positions
// then count from each row's first real token; undefined: all ones. Runs without gradients in
// the model's current mode: call eval() first for deterministic output. Longer than
// n_positions is a dtlab::Error. eos_token_id nullopt means no eos; transformers' generate()
// given none takes config.json's, so pass model->config().eos_token_id to do the same.
torch::Tensor generate_greedy(Gpt2LMHeadModel& model, const torch::Tensor& prompt_ids,
                              int64_t max_new_tokens, std::optional<int64_t> eos_token_id = std::nullopt,
                              const torch::Tensor& attention_mask = {});

// Loads DIR/config.json and DIR/model.safetensors in either key style that exists: recent
// transformers' ("transformer.h.0...", no lm_head.weight when tied) or the original `gpt2`
// files' (no "transformer." prefix, with the attention's "h.N.attn.bias" and
// "h.N.attn.masked_bias" buffers). Keys are matched and reported as transformers 4.40.2 does:
// the buffers are ignored without a word; a tied lm_head.weight absent from the checkpoint is
// not missing, and one present is copied after wte and wins; missing weights keep their fresh
// initialisation. A shape mismatch is a dtlab::Error naming the key and both shapes; so is an
// unprefixed checkpoint that also holds lm_head.weight, which transformers refuses as corrupted.
Gpt2LMHeadModel gpt2_from_pretrained(const std::filesystem::path& dir, const Gpt2Overrides& overrides = {},
                                     LoadReport* report = nullptr);

// DIR/config.json with the overrides applied: what gpt2_from_pretrained builds.
Gpt2Config gpt2_config_of(const std::filesystem::path& dir, const Gpt2Overrides& overrides = {});

// A checkpoint folder matched to a model built from its config.json, by the rules above, with
// only the files' headers read: each parameter the checkpoint fills, from which tensor, in
// transformers' order (a tied lm_head.weight last, filling wte's parameter), every shape checked.
// Note [Reading only what a rank keeps] (io/safetensors.h): a caller reads what it keeps, whole
// (load_into) or a run of elements of a parameter (read: a sharded rank's pieces).
class Gpt2Checkpoint {
 public:
  Gpt2Checkpoint(const std::filesystem::path& dir, const Gpt2LMHeadModel& model);
  struct Fill {
    std::string parameter;  // the model's name of the parameter it fills
    std::string key;        // the checkpoint's name
    const CheckpointFiles::Located* source = nullptr;
  };
  const std::vector<Fill>& fills() const { return fills_; }
  const LoadReport& report() const { return report_; }
  // Elements [begin, begin + into.numel()) of the fill's tensor, flattened, into `into`.
  void read(const Fill& fill, int64_t begin, torch::Tensor into) const;
  // Every fill, whole, into the model's parameters (one tensor read at a time).
  void load_into(Gpt2LMHeadModel& model) const;
  uint64_t bytes_read() const { return files_.bytes_read(); }

 private:
  CheckpointFiles files_;
  std::vector<Fill> fills_;
  LoadReport report_;
};

// Writes DIR/config.json and DIR/model.safetensors (F32, recent transformers' key names, no
// lm_head.weight when tied), each atomically. Creates DIR if needed.
void save_pretrained(const Gpt2LMHeadModel& model, const std::filesystem::path& dir);

// Parameter names in Hugging Face's spelling, each shared tensor once: what save_pretrained writes.
std::vector<std::string> state_dict_keys(const Gpt2LMHeadModel& model);

}  // namespace dtlab::model
