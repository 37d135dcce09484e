// GPT-2's layers on the stages of a pipeline, see pipeline/gpt2_layout.h.
#include "dtlab/pipeline/gpt2_layout.h"

#include <fmt/format.h>

#include <set>

#include "dtlab/core/device.h"
#include "dtlab/core/error.h"
#include "dtlab/pipeline/balance.h"

namespace dtlab::pipeline {

std::vector<int64_t> gpt2_layer_costs(const model::Gpt2LMHeadModel& model) {
  const model::Gpt2Config& c = model->config();
  std::vector<int64_t> costs;
  costs.push_back(0);  // embeddings: a lookup
  for (int64_t i = 0; i < c.n_layer; ++i) {
    int64_t n = 0;
    for (const auto& p : model->transformer->block(i)->parameters()) n += p.numel();
    costs.push_back(n);
  }
  costs.push_back(c.vocab_size * c.n_embd + 2 * c.n_embd);  // lm_head's product and ln_f
  return costs;
}

std::vector<int> gpt2_layer_devices(const model::Gpt2LMHeadModel& model, int stages, const std::vector<int>& balance) {
  const int layers = static_cast<int>(model->num_stages());
  std::vector<int> counts = balance;
  if (counts.empty()) {
    if (stages < 1 || stages > layers) {
      throw Error(fmt::format("--stages {}: GPT-2 with {} blocks has {} layers (embeddings, blocks, head): give "
                              "1 to {} stages", stages, layers - 2, layers, layers));
    }
    counts = balance_by_size(gpt2_layer_costs(model), stages);
  } else {
    if (static_cast<int>(counts.size()) != stages) {
      throw Error(fmt::format("--balance lists {} stages and --stages is {}: give both the same number of stages",
                              counts.size(), stages));
    }
    try {
      check_balance(counts, layers);
    } catch (const Error& e) {
      throw Error(fmt::format("--balance: {} (GPT-2 here has {} layers: embeddings, {} blocks, head)", e.what(),
                              layers, layers - 2));
    }
  }
  return stage_of_layers(counts);
}

std::string gpt2_layer_name(int64_t layer, int64_t layers) {
  if (layer == 0) return "embeddings";
  return layer == layers - 1 ? "head" : fmt::format("block {}", layer - 1);
}

void place_layers(model::Gpt2LMHeadModel& model, const std::vector<int>& devices) {
  const int64_t layers = model->num_stages();
  if (static_cast<int64_t>(devices.size()) != layers) {
    throw Error(fmt::format("place_layers: {} devices for GPT-2's {} layers", devices.size(), layers));
  }
  torch::NoGradGuard no_grad;
  std::set<const void*> placed;
  for (int64_t layer = 0; layer < layers; ++layer) {
    const torch::Device device = stage_device(devices[static_cast<size_t>(layer)], cuda_availability());
    for (auto& [name, parameter] : model->stage_parameters(layer)) {
      if (!placed.insert(parameter.unsafeGetTensorImpl()).second) continue;  // tied: its first user's
      if (parameter.device() != device) parameter.set_data(parameter.data().to(device));
    }
  }
}

}  // namespace dtlab::pipeline
