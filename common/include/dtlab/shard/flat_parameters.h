// Note [Flat parameters]: ZeRO and FSDP shard a model by cutting one flat buffer of its parameters
// into world-size equal pieces, rank r owning piece r. The kit provides the buffer and the views;
// the zero exercise moves the pieces (reduce-scatter, all-gather) and updates only its own.
//
//   flat  = FlatParameters(model, world)     // every parameter now a view of flat.values()
//   flat.flatten_gradients()                  // after backward: the gradients, end to end
//   ... reduce-scatter flat.gradients() into this rank's piece, update flat.shard(values, rank),
//   ... all-gather the pieces back into flat.values(): the model has the new weights.
//
// Why one buffer and not one shard per parameter: a collective per parameter costs its latency
// ~150 times a step for GPT-2; one flat buffer (in buckets or units for ZeRO-2 and FSDP) makes each
// piece one contiguous range, the same size on every rank, which is what reduce_scatter and
// all_gather move. Where the size does not divide by the world, the buffer is padded with zeros
// to world * ceil(numel / world): the padding is part of the last pieces, is reduced and gathered
// like the rest, and is never a parameter (FlatSegment lists what is).
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtlab::shard {

// Where each rank's piece of a flat buffer of `numel` elements lies, cut into `world` pieces.
struct ShardLayout {
  int64_t numel = 0;  // real elements (parameters), before padding
  int world = 1;

  int64_t shard_numel() const { return (numel + world - 1) / world; }  // ceil(numel / world)
  int64_t padded_numel() const { return shard_numel() * world; }
  int64_t padding() const { return padded_numel() - numel; }
  int64_t begin(int rank) const { return rank * shard_numel(); }
  int64_t end(int rank) const { return begin(rank) + shard_numel(); }  // may lie in the padding
};

// The layout of numel elements over world ranks; a dtlab::Error names the bad argument.
ShardLayout shard_layout(int64_t numel, int world);

// One parameter's place in the flat buffer.
struct FlatSegment {
  std::string name;             // the module's name for it ("transformer.h.0.attn.c_attn.weight")
  int64_t offset = 0;           // its first element in the flat buffer
  int64_t numel = 0;
  std::vector<int64_t> shape;
  bool exempt_from_weight_decay = false;  // train::exempt_from_weight_decay of the whole parameter
};

// The part of a segment inside [begin, end): `count` elements from `offset` in the flat buffer,
// `count` == 0 when they do not meet.
struct SegmentPiece {
  const FlatSegment* segment = nullptr;
  int64_t offset = 0, count = 0;
};
std::vector<SegmentPiece> pieces_in(const std::vector<FlatSegment>& segments, int64_t begin, int64_t end);

class FlatParameters {
 public:
  // Copies every parameter of `module` that requires a gradient (named_parameters order, a tied
  // parameter once) into one float buffer padded for `world` ranks, and makes each parameter a
  // view of its segment: writing the buffer writes the model, and the model's own code (forward,
  // save, load) is unchanged. Every parameter must be a float tensor on one device (the error
  // names the first that is not).
  FlatParameters(torch::nn::Module& module, int world);
  // The same for a list of named parameters (a unit of the model, shard/units.h).
  FlatParameters(const std::vector<std::pair<std::string, torch::Tensor>>& named, int world);

  const ShardLayout& layout() const { return layout_; }
  const std::vector<FlatSegment>& segments() const { return segments_; }
  // The parameters, in segment order (the module's tensors: their data lives in values()).
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }

  torch::Tensor& values() { return values_; }          // [padded_numel]; padding is zeros
  // [padded_numel], made by the first flatten_gradients (undefined before it and after
  // release_gradients: ZeRO-2 and FSDP never hold a whole gradient).
  torch::Tensor& gradients() { return gradients_; }
  // Rank r's piece of a flat buffer (values() or gradients()): a [shard_numel] view of it.
  torch::Tensor shard(const torch::Tensor& flat, int rank) const;

  // Copies each parameter's gradient into gradients() (zeros for a parameter without one, and
  // in the padding: as with FSDP's flat parameters, such a parameter then takes AdamW's update of
  // a zero gradient where one process's AdamW would skip it; GPT-2 has none). A gradient is never a view of the buffer: the kit's step sets gradients to
  // none after each update, and autograd then makes new ones.
  void flatten_gradients();
  void release_gradients() { gradients_ = torch::Tensor(); }

  // FSDP (ZeRO-3): the parameters' memory given back and taken again. free_values() leaves
  // values() (and so every parameter, a view of it) without memory: its storage has 0 bytes, as
  // PyTorch FSDP's storage resize_(0), and a parameter read then is an error of the strategy;
  // allocate_values() gives it padded_numel floats again, uninitialised, in the same storage, so
  // the parameters and every tensor autograd saved of them see what is written there next (the
  // all-gather before backward).
  void free_values();
  void allocate_values();
  bool values_allocated() const;

  // The bytes this object holds: the flat values, and the flat gradients while they exist.
  int64_t bytes() const;

 private:
  ShardLayout layout_;
  std::vector<FlatSegment> segments_;
  std::vector<torch::Tensor> parameters_;
  torch::Tensor values_, gradients_;
};

}  // namespace dtlab::shard
