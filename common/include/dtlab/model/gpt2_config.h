// Gpt2Config: the fields of a Hugging Face GPT-2 config.json that change the computation, with
// transformers' defaults (GPT2Config(), i.e. GPT-2 small) and two named presets.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dtlab::model {

struct Gpt2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // learned positions: the longest sequence, prompt plus generation
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  std::optional<int64_t> n_inner;  // the MLP's width; null: 4 * n_embd
  std::string activation_function = "gelu_new";  // the only one supported
  double resid_pdrop = 0.1;
  double embd_pdrop = 0.1;
  double attn_pdrop = 0.1;
  double layer_norm_epsilon = 1e-5;
  double initializer_range = 0.02;
  bool scale_attn_weights = true;                // scores / sqrt(head_dim)
  bool scale_attn_by_inverse_layer_idx = false;  // scores / (layer index + 1) as well
  bool reorder_and_upcast_attn = false;          // scores by baddbmm with the scale folded in
  std::optional<int64_t> bos_token_id = 50256;
  std::optional<int64_t> eos_token_id = 50256;
  std::optional<int64_t> pad_token_id;  // GPT-2 has none
  bool tie_word_embeddings = true;      // lm_head.weight is transformer.wte.weight

  int64_t inner_dim() const { return n_inner.value_or(4 * n_embd); }
  int64_t head_dim() const { return n_embd / n_head; }

  // Reads the fields above from a parsed config.json; absent or null fields keep transformers'
  // defaults. Unknown keys (n_ctx, task_specific_params, ...) are kept in `extra` so that
  // save_pretrained writes them back. An unsupported activation_function, add_cross_attention
  // true, a non-positive size, n_embd not a multiple of n_head or a probability outside [0, 1)
  // is a dtlab::Error naming `source` and the field.
  static Gpt2Config from_json(const nlohmann::json& j, const std::string& source);
  static Gpt2Config from_file(const std::filesystem::path& config_json);
  // config.json as transformers 4.40.2 writes it for GPT2LMHeadModel (plus `extra`).
  nlohmann::json to_json() const;

  // Named shapes (dropout and the rest at transformers' defaults):
  //   "gpt2"       GPT-2 small, 124M parameters: 12 layers, 12 heads, n_embd 768.
  //   "gpt2-mini"  the kit's teaching model, 7.4M parameters: 4 layers, 4 heads, n_embd 128,
  //                GPT-2's vocabulary and 1024 positions (Note [gpt2-mini] in
  //                gpt2_config.cpp says why this size). Anything else is a dtlab::Error listing the names.
  static Gpt2Config preset(const std::string& name);

  nlohmann::json extra = nlohmann::json::object();
};

// Command-line overrides applied on top of config.json (a driver's --dropout).
struct Gpt2Overrides {
  std::optional<double> resid_pdrop;
  std::optional<double> embd_pdrop;
  std::optional<double> attn_pdrop;

  // Sets all three dropout probabilities to p.
  static Gpt2Overrides dropout(double p);
  void apply(Gpt2Config& config) const;
};

}  // namespace dtlab::model
