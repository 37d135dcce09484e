// What a rank holds at each stage of sharding, on paper, see shard/memory_model.h.
#include "dtlab/shard/memory_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "dtlab/core/error.h"
#include "dtlab/shard/flat_parameters.h"

namespace dtlab::shard {
namespace {

constexpr int64_t kFloatBytes = 4;   // fp32 values and gradients
constexpr int64_t kMomentBytes = 8;  // AdamW's exp_avg and exp_avg_sq, fp32

void check_units(const ModelUnits& model) {
  if (model.names.size() != model.numel.size()) {
    throw Error(fmt::format("a model of {} unit names and {} unit sizes", model.names.size(), model.numel.size()));
  }
  for (size_t u = 0; u < model.numel.size(); ++u) {
    if (model.numel[u] < 0) throw Error(fmt::format("unit {} has {} elements", model.names[u], model.numel[u]));
  }
  for (size_t s = 0; s < model.stage_units.size(); ++s) {
    for (size_t u : model.stage_units[s]) {
      if (u >= model.numel.size()) {
        throw Error(fmt::format("stage {} reads unit {} of a model of {} units", s, u, model.numel.size()));
      }
    }
  }
}

// The real elements (not padding) of rank's piece of a unit: those the optimiser keeps moments of.
int64_t real_elements(const ShardLayout& layout, int rank) {
  return std::clamp(layout.numel - layout.begin(rank), int64_t{0}, layout.shard_numel());
}

// FSDP: the most whole-unit bytes gathered at once. The reference gathers a unit before the first
// stage that reads it and frees it after the last (the tied embeddings stay until the head); the
// backward gathers at the last such stage and frees at the unit's gradient hook, after the first.
// Either way unit u is held over stages [first(u), last(u)].
int64_t gathered_peak(const ModelUnits& model, const std::vector<ShardLayout>& layouts) {
  const size_t units = model.numel.size();
  std::vector<int64_t> first(units, -1), last(units, -1);
  for (size_t s = 0; s < model.stage_units.size(); ++s) {
    for (size_t u : model.stage_units[s]) {
      if (first[u] < 0) first[u] = static_cast<int64_t>(s);
      last[u] = static_cast<int64_t>(s);
    }
  }
  for (size_t u = 0; u < units; ++u) {
    if (first[u] < 0) {
      throw Error(fmt::format("FSDP gathers a unit where a stage reads it, and no stage reads unit {}", model.names[u]));
    }
  }
  int64_t peak = 0;
  for (int64_t s = 0; s < static_cast<int64_t>(model.stage_units.size()); ++s) {
    int64_t held = 0;
    for (size_t u = 0; u < units; ++u) {
      if (first[u] <= s && s <= last[u]) held += layouts[u].padded_numel() * kFloatBytes;
    }
    peak = std::max(peak, held);
  }
  return peak;
}

}  // namespace

int64_t ModelUnits::parameters() const {
  int64_t total = 0;
  for (int64_t n : numel) total += n;
  return total;
}

ModelUnits gpt2_units(const model::Gpt2Config& c) {
  for (const auto& [name, value] : {std::pair{"vocab_size", c.vocab_size}, std::pair{"n_positions", c.n_positions},
                                    std::pair{"n_embd", c.n_embd}, std::pair{"n_layer", c.n_layer}}) {
    if (value < 1) throw Error(fmt::format("GPT-2's units need a positive {}, not {}", name, value));
  }
  const int64_t e = c.n_embd, inner = c.inner_dim();
  const int64_t layer_norm = 2 * e;                        // weight and bias
  const int64_t attention = (e * 3 * e + 3 * e) + (e * e + e);  // c_attn, c_proj (Conv1D: weight, bias)
  const int64_t mlp = (e * inner + inner) + (inner * e + e);     // c_fc, c_proj
  ModelUnits model;
  model.names.push_back("embeddings");
  model.numel.push_back((c.vocab_size + c.n_positions) * e);  // wte, wpe
  model.stage_units.push_back({0});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    model.names.push_back("transformer.h." + std::to_string(i));
    model.numel.push_back(2 * layer_norm + attention + mlp);
    model.stage_units.push_back({model.names.size() - 1});
  }
  model.names.push_back("head");
  model.numel.push_back(layer_norm + (c.tie_word_embeddings ? 0 : c.vocab_size * e));  // ln_f, lm_head untied
  model.stage_units.push_back({model.names.size() - 1});
  if (c.tie_word_embeddings) model.stage_units.back().push_back(0);  // the lm head is wte
  return model;
}

model::Gpt2Config gpt2_checkpoint_config(const std::string& name) {
  model::Gpt2Config c;  // transformers' defaults: GPT-2 small's
  if (name == "gpt2") return c;
  const auto shape = [&](int64_t layers, int64_t width, int64_t heads) {
    c.n_layer = layers;
    c.n_embd = width;
    c.n_head = heads;
    return c;
  };
  if (name == "gpt2-medium") return shape(24, 1024, 16);
  if (name == "gpt2-large") return shape(36, 1280, 20);
  if (name == "gpt2-xl") return shape(48, 1600, 25);
  throw Error("unknown GPT-2 checkpoint \"" + name + "\" (gpt2, gpt2-medium, gpt2-large, gpt2-xl)");
}

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::kOneProcess: return "DDP";
    case Stage::kZero1: return "ZeRO-1";
    case Stage::kZero2: return "ZeRO-2";
    case Stage::kFsdp: return "FSDP";
  }
  return "?";
}

RankMemory rank_memory(const ModelUnits& model, Stage stage, int world, int rank) {
  if (world < 1) throw Error(fmt::format("a memory model needs a world of at least 1 rank, not {}", world));
  if (rank < 0 || rank >= world) throw Error(fmt::format("rank {} is not in a world of {}", rank, world));
  check_units(model);
  RankMemory m;
  const int64_t parameters = model.parameters();
  if (stage == Stage::kOneProcess) {
    // A replica: the model, its gradient, the moments of every parameter (DDP's buckets aside).
    m.shard_elements = parameters;
    m.parameter_bytes = kFloatBytes * parameters;
    m.gradient_bytes = m.sampled_gradient_bytes = kFloatBytes * parameters;
    m.optimizer_state_bytes = kMomentBytes * parameters;
    return m;
  }
  std::vector<ShardLayout> layouts;
  int64_t padded = 0, real = 0;
  for (int64_t n : model.numel) {
    const ShardLayout& layout = layouts.emplace_back(shard_layout(n, world));
    padded += layout.padded_numel();
    m.padding += layout.padding();
    m.shard_elements += layout.shard_numel();
    real += real_elements(layout, rank);
  }
  m.optimizer_state_bytes = kMomentBytes * real;
  m.gradient_piece_bytes = kFloatBytes * m.shard_elements;
  // The ring's reduce-scatter receives one piece at a time into a buffer of its own; over one
  // rank it returns at once.
  const auto ring_piece = [&](const ShardLayout& layout) { return world > 1 ? kFloatBytes * layout.shard_numel() : 0; };
  if (stage == Stage::kZero1) {
    // After backward every gradient exists; then each unit's flat copy is made, reduced and
    // freed in turn, one at a time with the ring's buffer. The meter samples at the hooks and
    // after after_backward: the parameters' gradients alone.
    m.parameter_bytes = kFloatBytes * padded;
    m.sampled_gradient_bytes = kFloatBytes * parameters;
    int64_t largest_copy = 0;
    for (const ShardLayout& layout : layouts) {
      largest_copy = std::max(largest_copy, kFloatBytes * layout.padded_numel() + ring_piece(layout));
    }
    m.gradient_bytes = m.sampled_gradient_bytes + largest_copy;
    return m;
  }
  // ZeRO-2 and FSDP: one unit's gradient at a time (backward finishes a unit before it starts
  // the one before it), which unit_ready flattens, reduces and frees; the meter's hook before it
  // sees the parameters' gradients only.
  for (size_t u = 0; u < layouts.size(); ++u) {
    m.sampled_gradient_bytes = std::max(m.sampled_gradient_bytes, kFloatBytes * model.numel[u]);
    m.gradient_bytes = std::max(m.gradient_bytes,
                                kFloatBytes * (model.numel[u] + layouts[u].padded_numel()) + ring_piece(layouts[u]));
  }
  if (stage == Stage::kZero2) {
    m.parameter_bytes = kFloatBytes * padded;
  } else {
    m.parameter_bytes = gathered_peak(model, layouts);
    m.parameter_piece_bytes = kFloatBytes * m.shard_elements;
  }
  return m;
}

int64_t load_peak_bytes(const ModelUnits& model, int world) {
  // Elements held: the units' buffers made so far, the tensors not yet moved, the gradient pieces
  // of the units made so far (make_units), then FSDP's copy of one piece before its unit is freed.
  int64_t moved = 0, remaining = model.parameters(), pieces = 0, peak = 0, largest_piece = 0;
  for (int64_t n : model.numel) {
    const ShardLayout layout = shard_layout(n, world);
    peak = std::max(peak, moved + remaining + pieces + layout.padded_numel());
    moved += layout.padded_numel();
    remaining -= n;
    pieces += layout.shard_numel();
    largest_piece = std::max(largest_piece, layout.shard_numel());
  }
  return kFloatBytes * std::max(peak, moved + pieces + largest_piece);
}

}  // namespace dtlab::shard
