// GPT-2 on a device mesh of data x pipeline x tensor ranks: the three axes in one step (the mesh
// exercise's kit side, issue 48). It calls the student's functions of three exercises: pp's
// schedules and protocol (dtlab/tasks/pp.h), tp's operators through the tensor-parallel GPT-2
// (tp/gpt2_tp.h), and the mesh's layout and composition (dtlab/tasks/mesh.h). A rank holds one
// pipeline stage's layers, each of them split over its tensor group, and reads its data
// replica's rows:
//
//   the stage's micro-batches run by pp's schedule and protocol (the student's run_stage), its
//     activations and their gradients sent to the SAME tensor rank of the neighbouring stage
//     (a tensor rank's boundary tensors are whole and equal on every tensor rank, Note [Replicated
//     gradients need no TP sync] in tp/tp_step.h, so each tensor rank carries its own copy);
//   inside each stage, tp's operators: two all-reduces per block and direction over the tensor
//     group, the vocabulary-parallel loss on the last stage;
//   the tied embedding: the first stage's wte slice and the last stage's (the head's) are one
//     parameter; each tensor rank sums its slice's gradient with the same tensor rank of the
//     other end (the student's tied_embedding_peer; the kit's lm::exchange_tied_gradient), never
//     across tensor ranks, whose slices differ;
//   every gradient averaged over the data group (the student's average_over_data);
//   the clip by the whole model's norm (the student's whole_model_gradient_norm), AdamW on this
//     rank's slices of its stage.
//
// Note [ZeRO-1 on the mesh]: with --zero_stage 1 the data group shards what AdamW keeps, as ZeRO-1
// does for plain data parallelism, with the student's own zero (tasks/zero): this rank's slices
// laid end to end in one flat buffer cut into data-size pieces (shard/flat_parameters.h), the
// student's Zero1 strategy reduce-scattering the gradients over mesh.group(kData) into this rank's
// piece, AdamW (the kit's, shard/shard_optimizer.h) on that piece only, and the strategy's
// all-gather giving every replica the new slices. The clip reads the pieces: the student's
// whole_model_gradient_norm is told that the data group's ranks hold different pieces, not copies.
// The same numbers as the plain average (the grader's losses-zero1 check), AdamW's state 1/data.
//
// The student's layout is checked before any group is made, on every rank alike: coordinates_of
// must place every rank once (mesh::MeshLayout's check), and group_of must give, for every rank and
// axis, the ranks that share the other coordinates. Their ORDER is the student's: a layout that puts
// the tensor axis slowest trains the same numbers (the figure of the mesh exercise shows what it
// costs), so the grader holds coordinates_of to Megatron's order by asking it directly.
//
// The loss of micro-batch i on the last stage is D / N x the sum of its target tokens' cross-
// entropy (N the global batch's target tokens, D the replicas: Note [Data-parallel loss] in
// lm/loss.h), so the update is one process's on the global batch.
//
// Note [A rank holds its stage's slices]: the tensor-parallel GPT-2 is made whole-model on every
// rank (its slices of every stage), then the parameters of the other stages are given back
// (core/storage.h): a rank's parameters, gradients and AdamW state are its stage's slices only.
// The run's whole GPT-2 is given back too, and made again only to gather the model for
// evaluation and saving.
//
// Note [The sends measured]: results.json's "mesh" section says what the grader checks the
// composition by: each rank's coordinates on the mesh as the student's layout placed it, and the
// sends each rank made to each other, counted from the kit's log of every operation by kind (the
// activations, their gradients, the tied embedding's gradient): the peers measured, not the peers
// asked for.
//
// Note [The data group's traffic]: the same section gives each rank's operations and bytes on its
// data group per step, counted from that group's log around the student's average_over_data
// only: one all-reduce of every gradient of the rank's slices (float32: its parameter bytes) is
// what the average needs; an all-reduce per gradient moves the same bytes in as many operations
// as the stage has tensors, each paying the link's latency, and trains the same numbers.
//
// Note [Each group's bytes]: and what every other group carried, per rank and step, for the
// grader to hold against what GPT-2's shape predicts (grader/checks_mesh.cpp's traffic): the tensor
// group's operations by kind and their bytes (tp's operators inside the stage's micro-batches),
// the operations and bytes the student's whole_model_gradient_norm ran on any of the mesh's groups,
// the replica's positions (rows x sequence) a step, the most micro-batches the stage stored for
// backward at once and the most bytes of boundary tensors it held (pipeline/stage_step.h's Note
// [Held, not only stored]), beside the model's shape and each rank's parameter bytes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dtlab/dist/group.h"
#include "dtlab/lm/grid_trainer.h"
#include "dtlab/mesh/layout.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/pipeline/stage_schedule.h"

namespace dtlab::mesh {

struct MeshPlan {
  int data = 1, pipeline = 1, tensor = 1;
  std::vector<std::string> order = kMegatronOrder;  // slowest axis first (Note [The mesh's order])
  int micro_batches = 1;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::k1F1B;
  // The stage of each of GPT-2's n_layer + 2 stages of Note [Stages] (pipeline/gpt2_layout.h's
  // gpt2_layer_devices); empty: as even as the layers' sizes allow.
  std::vector<int> layer_stages;
  // Note [ZeRO-1 on the mesh]: shard AdamW's state over the data group with the student's zero.
  bool zero1 = false;
};

// Every rank of `world`, at the same point, from the whole model (every rank's the same: rank
// 0's, broadcast). A dtlab::Error on every rank before any waits when the sizes' product is not the
// world's size, when the tensor size does not divide the heads and the MLP, or when a stage
// would hold no layer.
std::unique_ptr<lm::GridTrainer> make_mesh_trainer(MeshPlan plan, model::Gpt2LMHeadModel whole, dist::Group& world);

// The run's trainer from the flags (lm::GridParts' make): pipeline --stages (--balance's layers
// each), tensor --tp, data the world's ranks left, in --mesh_order; --micro_batches, --schedule.
std::unique_ptr<lm::GridTrainer> make_mesh_grid_trainer(model::Gpt2LMHeadModel whole, dist::Group& world,
                                                        const lm::LmOptions& options);

// "pipeline,data,tensor" as the axes slowest first; a dtlab::Error naming --mesh_order unless
// each of data, pipeline and tensor is named once.
std::vector<std::string> parse_order(const std::string& text);

// The student's layout (coordinates_of, group_of) for `shape`, checked as the header says.
MeshLayout student_layout(const MeshShape& shape);

// The grading aid --probe layout (common/exercises/mesh/probe.cpp): the student's coordinates_of
// and group_of for every rank and axis of the mesh --mesh_sizes, asked as functions (no process
// per rank: meshes too large to run here), written to OUTPUT_DIR/results.json. The exit code.
int run_probe(const lm::LmOptions& options);

}  // namespace dtlab::mesh
