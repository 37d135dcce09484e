// mesh: the axes composed. One GPT-2 trained on a device mesh of data x pipeline x tensor ranks,
// as Megatron-LM, picotron and torchtitan train theirs: each rank holds one pipeline stage's
// layers, each layer split over its tensor group, and reads its data replica's rows. The pieces
// are the ones you wrote: pp's schedules and protocol carry the stages' boundaries, tp's
// operators split every block, zero's ZeRO-1 shards the optimiser over the data group when asked,
// and what is new is where each piece's messages go. The contract
// between the kit and the student: tasks/mesh/ implements what this header declares,
// solutions/mesh/ is the reference; handouts/mesh.md explains each TODO. The mesh also compiles
// the student's own tasks/pp/, tasks/tp/ and tasks/zero/ (exercises.txt's uses=pp,tp,zero).
//
// The kit (mesh/mesh_trainer.h) runs, on every rank, every step:
//
//   the mesh                 = DeviceMesh(world, the layout coordinates_of gives)   // yours
//   previous, next           = stage_neighbours(mesh)                                // yours
//   pp's run_stage over the stage's micro-batches: tp's blocks inside, the activations sent to
//     previous/next                                                                   // pp's, tp's
//   the tied embedding's gradient summed with tied_embedding_peer(mesh)'s           // yours
//   average_over_data(gradients, mesh)                                               // yours
//     or, with --zero_stage 1, zero's ZeRO-1 over mesh.group(kData): reduce-scatter, AdamW on this
//     rank's piece, all-gather                                                       // zero's
//   clip by whole_model_gradient_norm(gradients, mesh, sharded), AdamW               // yours, the kit's
//
// Axes are listed slowest first (Note [The mesh's order] in mesh/layout.h): Megatron's order is
// pipeline, data, tensor, so that a tensor group's ranks are neighbours and share a host.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "dtlab/mesh/device_mesh.h"

namespace dtlab::mesh {

// Part 1: the layout, a function of the sizes alone (no process: the grader asks it about meshes
// too large to run here).

// Yours. World rank `rank`'s coordinate on each axis of a mesh whose axes have `sizes`, slowest
// first: as the rank grows the last axis's coordinate turns fastest, and an axis turns once each
// time every axis after it has gone round (an odometer's wheels). A dtlab::Error naming the rank
// and the world for a rank outside [0, product of sizes).
std::vector<int> coordinates_of(int rank, const std::vector<int>& sizes);

// Yours. The world ranks of `rank`'s group on axis `axis` (an index into sizes): every rank whose
// coordinates equal rank's on every other axis, in the order of their coordinate on `axis` (the
// group's i-th member sits at coordinate i). A dtlab::Error for an axis outside sizes.
std::vector<int> group_of(int rank, int axis, const std::vector<int>& sizes);

// Part 2: the composition. `mesh` is this rank's: mesh.coordinate(kData), mesh.size(kPipeline),
// mesh.group(kTensor), mesh.layout().rank_of(coordinates in the mesh's order), mesh.world().

// The world ranks this rank's stage exchanges its boundary tensors with; -1 where there is none.
struct StageNeighbours {
  int previous = -1;  // the previous stage's rank (none on the first stage)
  int next = -1;      // the next stage's rank (none on the last stage)
};

// Yours. The ranks of the neighbouring stages that this rank sends to and receives from: the
// same data replica and the same tensor rank. Every tensor rank of a stage holds the whole
// boundary activation (tp's g made it whole), so each sends its own copy to its own counterpart.
StageNeighbours stage_neighbours(DeviceMesh& mesh);

// Yours. GPT-2's tied embedding is used by the first stage (wte) and the last (the head): each
// holds a copy of this tensor rank's slice, and the two copies' gradients are summed. Returns the
// world rank that holds the other copy of THIS rank's slice, or -1 where there is no other copy
// (one stage holds both uses, or this stage holds neither).
int tied_embedding_peer(DeviceMesh& mesh);

// Yours. Each of `grads` (this rank's gradients of its stage's slices) replaced, in place, by its
// mean over the replicas that hold the same slices. At most one collective per call: the kit's
// dist::all_reduce_tensors (dtlab/dist/all_reduce_tensors.h) reduces a list of tensors in one.
void average_over_data(const std::vector<torch::Tensor>& grads, DeviceMesh& mesh);

// One of this rank's gradients for the norm: its Hugging Face name, the gradient of this rank's
// slice (or whole copy), and whether every tensor rank holds the same whole parameter.
struct SliceGradient {
  std::string name;
  torch::Tensor grad;
  bool replicated = false;
};

// Yours. The norm of the whole model's gradient, as one process holding the whole model would
// compute it: every parameter counted once, whatever the ranks that hold slices or copies of it.
// The same value on every rank of the mesh. sharded_over_data: ZeRO-1 (--zero_stage 1), each of
// grads is this rank's piece of its slice's gradient (zero's reduce-scatter over the data group),
// the data group's ranks holding different pieces of it; otherwise each replica holds the same
// whole slices.
double whole_model_gradient_norm(const std::vector<SliceGradient>& grads, DeviceMesh& mesh, bool sharded_over_data);

}  // namespace dtlab::mesh
