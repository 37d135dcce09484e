// The tensor-parallel GPT-2 (tp/gpt2_tp.h) as one Hugging Face folder, and back.
//
// Saving: the TP ranks' shards are gathered (the kit's all_gather on the tensor group, one per
// parameter) into the whole GPT-2, and model::save_pretrained (or lm::save_model_folder, with a
// tokenizer) writes it on TP rank 0 of DP rank 0: the folder is what one process that trained
// the whole model would write, and any GPT-2 reader loads it (model::gpt2_from_pretrained,
// transformers' GPT2LMHeadModel.from_pretrained). The DP ranks hold the same shards (their
// gradients are averaged every step), so one tensor group is enough.
//
// Loading needs no function of its own: read the folder whole and cut it,
//
//   tp::TensorParallelGpt2 model(model::gpt2_from_pretrained(dir), grid.tensor());
//
// on every rank (each reads the folder; shard_of keeps its slice and the whole is dropped).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/dist/group.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/tp/gpt2_tp.h"
#include "dtlab/tp/grid.h"

namespace dtlab::tp {

// The inverse of shard_of: the whole parameter `name` from every TP rank's shard, in rank order
// (wte's padding rows dropped). A dtlab::Error when the shards are not TP of one shape.
torch::Tensor unshard(const std::string& name, const std::vector<torch::Tensor>& shards,
                      const model::Gpt2Config& config);

// The whole GPT-2 of the tensor group's shards, on every rank of `group` (every rank calls it:
// one all_gather per parameter, tagged "tp gather <name>"). Its weights are drawn first as
// Gpt2LMHeadModel(config) draws them (from the global generator), then overwritten.
model::Gpt2LMHeadModel gather_tensor_parallel_gpt2(TensorParallelGpt2Impl& model, dist::Group& group);
// The same into `whole` (a GPT-2 of the model's config), which draws nothing: the run's own model
// before evaluation and saving, whose generator must stay where one process's would be (dropout).
void gather_tensor_parallel_gpt2_into(TensorParallelGpt2Impl& model, dist::Group& group,
                                      model::Gpt2LMHeadModelImpl& whole);

// Every rank calls it. DP rank 0's tensor group gathers the whole model and its TP rank 0
// writes `dir` (save_pretrained; with tokenizer_dir not empty, lm::save_model_folder, which
// copies the tokenizer's files beside it); the other DP ranks return at once, without
// communication. The folder is complete when TP rank 0 of DP rank 0 returns; a rank that reads
// it must wait for that one (a barrier on the world).
void save_tensor_parallel_gpt2(TensorParallelGpt2Impl& model, Grid& grid, const std::filesystem::path& dir,
                               const std::filesystem::path& tokenizer_dir = {});

}  // namespace dtlab::tp
