// The tensor-parallel GPT-2 gathered and saved as one Hugging Face folder, see tp/save.h.
#include "dtlab/tp/save.h"

#include <fmt/format.h>

#include <algorithm>

#include "dtlab/core/error.h"
#include "dtlab/model/checkpoint.h"
#include "dtlab/lm/model.h"

namespace dtlab::tp {

using model::key_ends_with;
torch::Tensor unshard(const std::string& name, const std::vector<torch::Tensor>& shards,
                      const model::Gpt2Config& config) {
  const int tp = static_cast<int>(shards.size());
  if (tp == 0) throw Error("unshard " + name + ": no shards");
  for (const auto& s : shards) {
    if (s.sizes() != shards.front().sizes()) {
      throw Error(fmt::format("unshard {}: the shards differ in shape ([{}] and [{}])", name,
                              fmt::join(shards.front().sizes(), ", "), fmt::join(s.sizes(), ", ")));
    }
  }
  if (is_replicated(name)) return shards.front().clone();
  if (name == "transformer.wte.weight") {  // rows, padded: the padding rows are dropped
    return torch::cat(shards, 0).narrow(0, 0, config.vocab_size).clone();
  }
  if (key_ends_with(name, ".attn.c_attn.weight") || key_ends_with(name, ".attn.c_attn.bias")) {
    // Each rank's columns are its heads' q, k and v (shard_gpt2_attention_columns): put them back.
    const int64_t dim = shards.front().dim() - 1;
    std::vector<torch::Tensor> columns;
    for (int r = 0; r < tp; ++r) columns.push_back(shard_gpt2_attention_columns(config.n_embd, config.n_head, r, tp));
    const torch::Tensor all = torch::cat(shards, dim);
    return torch::empty_like(all).index_copy_(dim, torch::cat(columns).to(all.device()), all);
  }
  if (key_ends_with(name, ".c_proj.weight")) return torch::cat(shards, 0);  // rows: attention's and MLP's
  return torch::cat(shards, shards.front().dim() - 1);                      // c_fc's columns
}

model::Gpt2LMHeadModel gather_tensor_parallel_gpt2(TensorParallelGpt2Impl& model, dist::Group& group) {
  model::Gpt2LMHeadModel whole(model.config());
  gather_tensor_parallel_gpt2_into(model, group, *whole);
  return whole;
}

void gather_tensor_parallel_gpt2_into(TensorParallelGpt2Impl& model, dist::Group& group,
                                      model::Gpt2LMHeadModelImpl& whole) {
  const model::Gpt2Config& config = model.config();
  torch::NoGradGuard no_grad;
  const auto shards = model.named_parameters(/*recurse=*/false);
  // The whole model's parameters in its own order, the same on every rank: the same all_gathers.
  for (auto& item : whole.named_parameters()) {
    std::string key = item.key();
    std::replace(key.begin(), key.end(), '.', '/');
    const torch::Tensor* mine = shards.find(key);
    if (!mine) throw Error("the tensor-parallel GPT-2 has no shard of " + item.key());
    const std::vector<torch::Tensor> all = group.all_gather(mine->detach().contiguous(), "tp gather " + item.key());
    item.value().copy_(unshard(item.key(), all, config));
  }
}

void save_tensor_parallel_gpt2(TensorParallelGpt2Impl& model, Grid& grid, const std::filesystem::path& dir,
                               const std::filesystem::path& tokenizer_dir) {
  if (grid.dp_rank() != 0) return;  // its shards equal DP rank 0's
  const model::Gpt2LMHeadModel whole = gather_tensor_parallel_gpt2(model, grid.tensor());
  if (grid.tp_rank() != 0) return;
  if (tokenizer_dir.empty()) {
    model::save_pretrained(whole, dir);
  } else {
    lm::save_model_folder(whole, tokenizer_dir, dir);
  }
}

}  // namespace dtlab::tp
