// AdamW on one rank's shard, see shard/shard_optimizer.h.
#include "dtlab/shard/shard_optimizer.h"

#include <fmt/format.h>

#include <vector>

#include "dtlab/core/error.h"

namespace dtlab::shard {

namespace {

// The views of rank's piece of one flat buffer (`values`: the piece itself), into the decayed and the
// exempt group.
void add_piece(FlatParameters& flat, int rank, const torch::Tensor& values, const torch::Tensor& shard_gradients,
               std::vector<torch::Tensor>& decay, std::vector<torch::Tensor>& no_decay) {
  const ShardLayout& layout = flat.layout();
  if (!shard_gradients.defined() || shard_gradients.dim() != 1 || shard_gradients.numel() != layout.shard_numel() ||
      shard_gradients.scalar_type() != torch::kFloat) {
    throw Error(fmt::format("the shard's gradients must be a float buffer of {} elements (one piece of {})",
                            layout.shard_numel(), layout.padded_numel()));
  }
  const int64_t begin = layout.begin(rank);
  for (const SegmentPiece& piece : pieces_in(flat.segments(), begin, layout.end(rank))) {
    torch::Tensor part = values.narrow(0, piece.offset - begin, piece.count);
    // Not a leaf of any graph: its gradient is the caller's buffer, set once.
    part.mutable_grad() = shard_gradients.narrow(0, piece.offset - begin, piece.count);
    (piece.segment->exempt_from_weight_decay ? no_decay : decay).push_back(part);
  }
}

}  // namespace

std::unique_ptr<torch::optim::AdamW> make_shard_adamw(FlatParameters& flat, int rank, torch::Tensor shard_gradients,
                                                      const train::OptimizerOptions& o) {
  std::vector<torch::Tensor> decay, no_decay;
  add_piece(flat, rank, flat.shard(flat.values(), rank), shard_gradients, decay, no_decay);
  return train::make_adamw(std::move(decay), std::move(no_decay), o);
}

std::unique_ptr<torch::optim::AdamW> make_shard_adamw(std::vector<ShardUnit>& units, int rank,
                                                      const train::OptimizerOptions& o) {
  std::vector<torch::Tensor> decay, no_decay;
  for (ShardUnit& unit : units) add_piece(*unit.flat, rank, unit.shard_values, unit.shard_gradients, decay, no_decay);
  return train::make_adamw(std::move(decay), std::move(no_decay), o);
}

}  // namespace dtlab::shard
