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
  // BEGIN TODO(tp): x through f (its gradient must be summed over the ranks), then this rank's columns: x·W + b.
  const torch::Tensor y = torch::matmul(copy_to_tensor_parallel(x, group, tag), weight);
  return bias.defined() ? y + bias : y;
  // END TODO
}

torch::Tensor row_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                  dist::Group& group, const std::string& tag) {
  if (x.size(-1) != weight.size(0)) {
    throw Error(fmt::format("row_parallel_linear: input of width {} against a weight shard of {} rows",
                            x.size(-1), weight.size(0)));
  }
  // BEGIN TODO(tp): this rank's partial product x_r·W_r, summed by g; the whole bias after the sum, so that it counts once.
  const torch::Tensor y = reduce_from_tensor_parallel(torch::matmul(x, weight), group, tag);
  return bias.defined() ? y + bias : y;
  // END TODO
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
  // BEGIN TODO(tp): this rank's heads are a contiguous run of n_embd / TP columns in each of q, k and v; take that run from each third.
  const int64_t width = n_embd / tp;
  std::vector<torch::Tensor> runs;
  for (int64_t part = 0; part < 3; ++part) {  // q, k, v
    const int64_t first = part * n_embd + rank * width;
    runs.push_back(torch::arange(first, first + width, torch::kLong));
  }
  return torch::cat(runs);
  // END TODO
}

}  // namespace dtlab::tp
