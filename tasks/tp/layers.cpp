// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// tp, part 2: column- and row-parallel linear layers on Conv1D-layout shards, and which columns
// of GPT-2's fused c_attn a rank holds (dtlab/tasks/tp.h).
#include <fmt/format.h>

#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/tasks/tp.h"

namespace dtlab::tp {

torch::Tensor column_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                     dist::Group& group, const std::string& tag) {
  if (x.size(-1) != weight.size(0)) {
    throw Error(fmt::format("column_parallel_linear: input of width {} against a weight shard of {} rows",
                            x.size(-1), weight.size(0)));
  }
  // TODO(tp): x through f (its gradient must be summed over the ranks), then this rank's columns: x·W + b.
  throw dtlab::NotImplemented("TODO(tp): x through f (its gradient must be summed over the ranks), then this rank's columns: x·W + b.");
}

torch::Tensor row_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                  dist::Group& group, const std::string& tag) {
  if (x.size(-1) != weight.size(0)) {
    throw Error(fmt::format("row_parallel_linear: input of width {} against a weight shard of {} rows",
                            x.size(-1), weight.size(0)));
  }
  // TODO(tp): this rank's partial product x_r·W_r, summed by g; the whole bias after the sum, so that it counts once.
  throw dtlab::NotImplemented("TODO(tp): this rank's partial product x_r·W_r, summed by g; the whole bias after the sum, so that it counts once.");
}

torch::Tensor shard_gpt2_attention_columns(int64_t n_embd, int64_t n_head, int rank, int tp) {
  if (tp <= 0 || rank < 0 || rank >= tp) {
    throw Error(fmt::format("shard_gpt2_attention_columns: rank {} of a tensor-parallel group of {}", rank, tp));
  }
  if (n_head % tp != 0) {
    throw Error(fmt::format("tensor parallelism of {} does not divide GPT-2's {} attention heads: each rank "
                            "computes whole heads, so the TP size must divide n_head",
                            tp, n_head));
  }
  // TODO(tp): this rank's heads are a contiguous run of n_embd / TP columns in each of q, k and v; take that run from each third.
  throw dtlab::NotImplemented("TODO(tp): this rank's heads are a contiguous run of n_embd / TP columns in each of q, k and v; take that run from each third.");
}

}  // namespace dtlab::tp
