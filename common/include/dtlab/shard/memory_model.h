// What a rank holds at each stage of sharding, on paper: the bytes of parameters, gradients and
// AdamW's moments of the kit's reference (solutions/zero through shard::ShardedTrainer), from the
// units' sizes alone, so that it can be worked out for models the kit never builds (GPT-2 XL).
// tests/shard_memory_model_test.cpp checks it against what the kit measures (ShardedTrainer::
// summary) and the table of handouts/zero.md against it.
//
// Note [Memory model]: fp32 throughout (4 bytes an element) and AdamW (two moments, 8 bytes an
// element). Per element of the model, for large N:
//   one process (DDP)  4 values + 4 gradient + 8 moments                                = 16
//   ZeRO-1             4 values + 4 gradient + 4/N piece + 8/N = 8 + 12/N, plus the largest
//                      unit's flat copy and a piece of it while that unit is reduced
//   ZeRO-2             4 values + 4/N piece + 8/N, plus the largest unit's gradient twice and a
//                      piece of it at once (the parameters' own, the flat copy, the ring's buffer)
//   FSDP               4/N values + 4/N piece + 8/N, plus the units gathered at once and ZeRO-2's
//                      largest unit's gradient
// Beside the textbook's 4 + 4 + 8/N (ZeRO-1): the kit's reference reduce-scatters a flat copy of
// each unit's gradients (FlatParameters::flatten_gradients) while the parameters' own gradients
// still exist, one unit at a time, freed once its piece is taken; every ZeRO stage keeps its
// averaged piece of each unit's gradient (ShardUnit::shard_gradients) for the optimiser.
// Pieces are padded (shard_layout: a unit of n elements is N * ceil(n / N)); the padding is held
// in every whole buffer and in the last ranks' pieces, but has no moments (the optimiser's
// parameters are the real elements of a piece), so rank 0 holds the most moments.
// The kit's meter (UnitGradientHooks::sample) sees the gradients at each gradient hook and after
// after_backward, never inside a unit's reduction: it sees ZeRO-2's largest unit's gradient but not
// the flat copy and ring piece made and freed between two hooks (`sampled_gradient_bytes` is what
// it sees, `gradient_bytes` the peak of what the kit and the reference allocate). One unit's
// gradient at a time holds where backward finishes a unit before it starts the one before it, as in
// GPT-2's chain of stages. FSDP's gathered units are measured after each stage's gather in the
// forward; the backward gathers the same units in the opposite order and holds no more (a unit's
// gradient hook frees it before the stage before gathers: autograd runs the accumulators first; the
// test measures that too). Not modelled: activations (they grow with batch and sequence, and no
// stage shards them), autograd's own buffers (a tied lm head's partial gradient of wte waits in the
// engine until the embeddings' backward: vocab x n_embd x 4 bytes), DDP's all-reduce buckets, the
// allocator's caching and fragmentation, and the communication library's buffers. The peaks of the
// parts need not coincide: their sum is an upper bound.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dtlab/model/gpt2_config.h"

namespace dtlab::shard {

// A model as sharding sees it: its units in forward order (Note [Shard units]) and which units
// each stage of the forward reads (ShardContext::stage_units), which says how long FSDP keeps a
// unit gathered.
struct ModelUnits {
  std::vector<std::string> names;
  std::vector<int64_t> numel;                     // elements of each unit (parameters, tied ones once)
  std::vector<std::vector<size_t>> stage_units;  // stage s reads units stage_units[s]

  int64_t parameters() const;
};

// GPT-2's units as gpt2_unit_of (sharded_trainer.h) cuts them, counted as Hugging Face counts
// parameters (a tied lm head once): "embeddings" (wte vocab x n_embd, wpe n_positions x n_embd), each block
// "transformer.h.<i>" (ln_1, c_attn, c_proj, ln_2, c_fc, c_proj with their biases), "head" (ln_f,
// and the lm head when untied); stages as gpt2_stage_units. GPT-2 small is 124,439,808.
ModelUnits gpt2_units(const model::Gpt2Config& config);

// Hugging Face's GPT-2 checkpoints by name: "gpt2" (small, 124M), "gpt2-medium" (355M),
// "gpt2-large" (774M), "gpt2-xl" (1.5B): 50,257 tokens, 1,024 positions. Anything else is a
// dtlab::Error listing the names.
model::Gpt2Config gpt2_checkpoint_config(const std::string& name);

enum class Stage { kOneProcess, kZero1, kZero2, kFsdp };
const char* stage_name(Stage stage);  // "DDP", "ZeRO-1", "ZeRO-2", "FSDP"

// One rank's bytes, each at its own peak during a training step.
struct RankMemory {
  int64_t padding = 0;         // elements of padding over all units (ShardedTrainer::summary's)
  int64_t shard_elements = 0;  // elements of this rank's pieces, padding included (summary's)
  // Whole units' values: the model (ZeRO-1/2: the padded flat buffers), FSDP the most gathered at
  // once (summary's peak_parameter_bytes).
  int64_t parameter_bytes = 0;
  int64_t parameter_piece_bytes = 0;  // FSDP: this rank's pieces, the only copy at rest
  int64_t gradient_bytes = 0;          // the most whole-gradient bytes at once (Note [Memory model])
  int64_t sampled_gradient_bytes = 0;  // what the kit's meter sees of it (summary's peak_gradient_bytes)
  int64_t gradient_piece_bytes = 0;    // the averaged pieces the optimiser reads (shard_gradients)
  int64_t optimizer_state_bytes = 0;   // AdamW's two moments of this rank's real elements

  int64_t total_bytes() const {
    return parameter_bytes + parameter_piece_bytes + gradient_bytes + gradient_piece_bytes + optimizer_state_bytes;
  }
};

// What rank `rank` of `world` holds at `stage` (kOneProcess: each of `world` data-parallel
// replicas, padding none). A world below 1, a rank outside it, a negative unit or a stage that
// names a unit the model lacks is a dtlab::Error.
RankMemory rank_memory(const ModelUnits& model, Stage stage, int world, int rank = 0);

// Note [Reading only what a rank keeps]: the most a sharded rank holds while it loads, before its
// first step (FSDP's; ZeRO-1 and 2 hold one piece less, under 1%): the model drawn at full size (4P:
// every rank draws alike, which spares a broadcast and its flat copy of the whole model), then cut
// into units (make_units), each unit's padded flat buffer made while its parameters' own tensors
// still exist, beside the gradient pieces of the units made before it; FSDP then copies each piece
// before freeing its unit, and reads those of a checkpoint. A whole checkpoint read (ZeRO-1 and 2)
// adds one tensor at a time, smaller than the largest unit's buffer, which is past by then.
// Measured (docs/MEASUREMENTS.md, "Memory a rank holds"): the resident set's load peak above
// start-up within 6% of this (GPT-2 of 6 x 1024 at 1, 2 and 4 ranks).
int64_t load_peak_bytes(const ModelUnits& model, int world);

}  // namespace dtlab::shard
