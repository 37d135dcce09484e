// The flat buffer of a model's parameters and its pieces, see shard/flat_parameters.h.
#include "dtlab/shard/flat_parameters.h"

#include <fmt/format.h>
#include <torch/utils.h>

#include <algorithm>
#include <unordered_set>

#include "dtlab/core/error.h"
#include "dtlab/core/storage.h"
#include "dtlab/train/optimizer.h"

namespace dtlab::shard {

ShardLayout shard_layout(int64_t numel, int world) {
  if (world < 1) throw Error(fmt::format("a shard layout needs a world of at least 1 rank, not {}", world));
  if (numel < 0) throw Error(fmt::format("a shard layout of {} elements", numel));
  ShardLayout layout;
  layout.numel = numel;
  layout.world = world;
  return layout;
}

std::vector<SegmentPiece> pieces_in(const std::vector<FlatSegment>& segments, int64_t begin, int64_t end) {
  std::vector<SegmentPiece> pieces;
  for (const FlatSegment& s : segments) {
    const int64_t from = std::max(begin, s.offset), to = std::min(end, s.offset + s.numel);
    if (from < to) pieces.push_back({&s, from, to - from});
  }
  return pieces;
}

namespace {

// The parameters of a module a flat buffer holds: those that require a gradient, a tied one once.
std::vector<std::pair<std::string, torch::Tensor>> trainable(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) named.emplace_back(item.key(), item.value());
  return named;
}

}  // namespace

FlatParameters::FlatParameters(torch::nn::Module& module, int world) : FlatParameters(trainable(module), world) {}

FlatParameters::FlatParameters(const std::vector<std::pair<std::string, torch::Tensor>>& named, int world) {
  std::unordered_set<const void*> seen;  // a tied parameter (GPT-2's wte and lm_head) once
  int64_t numel = 0;
  for (const auto& [name, p] : named) {
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    if (p.scalar_type() != torch::kFloat) {
      throw Error(fmt::format("flat parameters: {} is {}, and the flat buffer holds float32 only", name,
                              std::string(c10::toString(p.scalar_type()))));
    }
    if (!parameters_.empty() && p.device() != parameters_.front().device()) {
      throw Error(fmt::format("flat parameters: {} is on {} and {} on {}: one buffer lies on one device",
                              name, p.device().str(), segments_.front().name,
                              parameters_.front().device().str()));
    }
    segments_.push_back({name, numel, p.numel(), p.sizes().vec(), train::exempt_from_weight_decay(p)});
    parameters_.push_back(p);
    numel += p.numel();
  }
  layout_ = shard_layout(numel, world);
  const auto options = torch::TensorOptions()
                           .dtype(torch::kFloat)
                           .device(parameters_.empty() ? torch::Device(torch::kCPU) : parameters_.front().device());
  values_ = torch::zeros({layout_.padded_numel()}, options);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const FlatSegment& s = segments_[i];
    torch::Tensor piece = values_.narrow(0, s.offset, s.numel).view(s.shape);
    piece.copy_(parameters_[i]);
    // The parameter keeps its identity (autograd, the module, an optimiser's keys) and takes the
    // buffer's storage: the module's own code reads and writes the buffer from now on.
    parameters_[i].set_data(piece);
  }
}

torch::Tensor FlatParameters::shard(const torch::Tensor& flat, int rank) const {
  if (rank < 0 || rank >= layout_.world) {
    throw Error(fmt::format("flat parameters: no rank {} in a world of {}", rank, layout_.world));
  }
  if (!flat.defined() || flat.dim() != 1 || flat.numel() != layout_.padded_numel()) {
    throw Error(fmt::format("flat parameters: the piece of a buffer of {} elements, where a flat buffer has {}",
                            flat.defined() ? flat.numel() : 0, layout_.padded_numel()));
  }
  return flat.narrow(0, layout_.begin(rank), layout_.shard_numel());
}

void FlatParameters::flatten_gradients() {
  torch::NoGradGuard no_grad;
  if (!gradients_.defined()) {
    gradients_ = torch::zeros_like(values_);
  } else {
    gradients_.narrow(0, layout_.numel, layout_.padding()).zero_();
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const FlatSegment& s = segments_[i];
    torch::Tensor piece = gradients_.narrow(0, s.offset, s.numel);
    const torch::Tensor& g = parameters_[i].grad();
    if (g.defined()) {
      piece.copy_(g.reshape({-1}));
    } else {
      piece.zero_();
    }
  }
}

void FlatParameters::free_values() { release_storage(values_); }

void FlatParameters::allocate_values() {
  restore_storage(values_, static_cast<size_t>(layout_.padded_numel()) * sizeof(float));
}

bool FlatParameters::values_allocated() const {
  return holds_storage(values_, static_cast<size_t>(layout_.padded_numel()) * sizeof(float));
}

int64_t FlatParameters::bytes() const {
  int64_t total = 0;
  if (values_allocated()) total += values_.numel() * static_cast<int64_t>(values_.element_size());
  if (gradients_.defined()) total += gradients_.numel() * static_cast<int64_t>(gradients_.element_size());
  return total;
}

}  // namespace dtlab::shard
