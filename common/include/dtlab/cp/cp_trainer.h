// The cp exercise's trainer (lm/grid_trainer.h): GPT-2 over a context x data grid of ranks on the
// device mesh (mesh/device_mesh.h, Megatron-LM's order: context the faster axis, so a context
// group's ranks are neighbours and share a host). The ranks of a context group read the same
// rows and each computes two chunks of every sequence (cp/gpt2_cp.h); the data groups read
// different rows, as data-parallel replicas do.
//
// Note [The loss of a split sequence]: one process's loss is the mean over the N target tokens of
// the global batch, (1/N) sum_t ce_t. A rank holds some of those tokens, in its chunks of its
// replica's rows; N is all-reduced over the world first (one scalar), and the rank's loss is
// (1/N) sum over its tokens. Every parameter is replicated, and a rank's gradient of it is its own
// tokens' part of one process's, so the sum over every rank of the world (context and data) is
// one process's gradient: one all-reduce over the world, as Megatron-LM reduces its gradients over
// the data-and-context group at once, not one for each axis. Attention's own exchange is inside
// the ring: each rank's queries see every key, and the key and value gradients go home.
//
// Note [Bytes of a context-parallel step]: each block's ring attention moves the keys and values
// of a rank's two chunks, 2 x B x 2c x C floats (k and v, all heads), N - 1 times in the forward
// and N - 1 times in the backward, and their gradients (the same size) N times, home included:
// (3N - 2) x 8 x B x 2c x C bytes a layer, L layers a step, sent by every rank. The prediction
// is exact for any balanced or contiguous split, and the step's summary holds the measured bytes
// of every send of the context group beside it, and each rank's tensors at a step's peak (the
// counting allocator: all of them, the model and AdamW's state included).
#pragma once

#include <memory>

#include "dtlab/dist/group.h"
#include "dtlab/lm/grid_trainer.h"
#include "dtlab/lm/options.h"
#include "dtlab/model/gpt2.h"

namespace dtlab::cp {

// Every rank of `world`, from the whole model (rank 0's weights, broadcast) and --cp, --cp_block,
// --cp_layout. A dtlab::Error on every rank, before any waits, when --cp does not divide the world.
std::unique_ptr<lm::GridTrainer> make_context_parallel_trainer(model::Gpt2LMHeadModel whole, dist::Group& world,
                                                               const lm::LmOptions& options);

// (3N - 2) x 8 x B x 2c x C x L (Note [Bytes of a context-parallel step]), for rows of `padded`
// tokens (2c = padded / N).
double predicted_ring_bytes(int ranks, int64_t batch, int64_t padded, int64_t n_embd, int64_t n_layer);

}  // namespace dtlab::cp
