// What one rank holds at one step, written for the grader: the checks of docs/DESIGN.md's "Numbers
// that must hold" compare these files across ranks and against the kit's single-process run,
// so they never depend on a student's printing.
//
// DIR/rank<r>.safetensors holds:
//   param.<name>  the parameter before the step's update (step 1: the initial weights)
//   grad.<name>   its gradient after synchronisation, before clipping
//   shard         int64, the examples this rank reads in epoch 1, in order
//   batch         int64, the examples of this rank's minibatch at the step
// and metadata rank, world_size, step, global_batch_size.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/io/safetensors.h"
#include "dtlab/train/step.h"

namespace dtlab::train {

struct RankDump {
  int rank = 0, world_size = 1, step = 1;
  int64_t global_batch_size = 0;
  std::vector<int64_t> shard, batch;
};

std::filesystem::path rank_dump_path(const std::filesystem::path& dir, int rank);

// Writes dir/rank<r>.safetensors atomically. Parameters without a gradient get no grad entry.
void write_rank_dump(const std::filesystem::path& dir, const torch::nn::Module& model,
                     const RankDump& info);

// The dump as the step's "gradients are synchronised" hook (train/step.h): at step dump_step it
// writes this rank's file with `shard`, the data set examples it reads in epoch 1. The loop's
// rows index the data set the loop reads; when that is a view of the data set (a partition),
// example_of_row[row] is the data set index of row, and empty means the rows are the indices.
AfterSync rank_dump_hook(std::filesystem::path dir, int dump_step, int rank, int world,
                         int64_t global_batch_size, std::vector<int64_t> shard,
                         std::vector<int64_t> example_of_row = {});

}  // namespace dtlab::train
