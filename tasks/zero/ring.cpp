// Your file: replace every `throw dtlab::NotImplemented(...)` below with your code.
// (Generated from the reference solution by dtlab-skeletons; the handout explains each TODO.)
// zero, part 1: reduce-scatter and all-gather as rings over send/recv (dtlab/tasks/zero.h).
#include <fmt/format.h>

#include "dtlab/core/error.h"
#include "dtlab/dist/ring_step.h"
#include "dtlab/tasks/zero.h"

namespace dtlab::zero {
namespace {

// Piece k of flat, k taken modulo the world (the ring wraps).
[[maybe_unused]] torch::Tensor piece(torch::Tensor& flat, int k, int world) {
  const int64_t size = flat.numel() / world;
  return flat.narrow(0, ((k % world) + world) % world * size, size);
}

void check_divides(const torch::Tensor& flat, const dist::Group& group, const char* what) {
  if (flat.dim() != 1 || flat.numel() % group.size() != 0) {
    throw Error(fmt::format("{}: a flat buffer of {} elements does not cut into {} equal pieces (pad it: "
                            "shard/flat_parameters.h)", what, flat.numel(), group.size()));
  }
}

}  // namespace

void ring_reduce_scatter(torch::Tensor& flat, dist::Group& group, const std::string& tag) {
  check_divides(flat, group, "ring_reduce_scatter");
  if (group.size() == 1) return;
  // TODO(zero): N-1 steps; at step s send piece rank-s-1 to the next rank, receive piece rank-s-2 from the previous one and add it to yours. After the last step piece `rank` is the sum over every rank.
  throw dtlab::NotImplemented("TODO(zero): N-1 steps; at step s send piece rank-s-1 to the next rank, receive piece rank-s-2 from the previous one and add it to yours. After the last step piece `rank` is the sum over every rank.");
}

void ring_all_gather(torch::Tensor& flat, dist::Group& group, const std::string& tag) {
  check_divides(flat, group, "ring_all_gather");
  if (group.size() == 1) return;
  // TODO(zero): N-1 steps; at step s send piece rank-s (yours first, then the one received at the step before) to the next rank and receive piece rank-s-1 from the previous one into its place.
  throw dtlab::NotImplemented("TODO(zero): N-1 steps; at step s send piece rank-s (yours first, then the one received at the step before) to the next rank and receive piece rank-s-1 from the previous one into its place.");
}

}  // namespace dtlab::zero
