// The files of a Hugging Face model folder that hold its weights, read for any model of the kit.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dtlab/io/safetensors.h"

namespace dtlab::model {

// Reads DIR/model.safetensors, or every shard named by DIR/model.safetensors.index.json
// ({"weight_map": {tensor name: shard file name}}). A folder with only pytorch_model.bin is a
// dtlab::Error that gives the one-line conversion; a folder with neither is a dtlab::Error that
// ends with `what_to_try` (e.g. "point --model_name_or_path at a Hugging Face BERT folder").
io::TensorMap load_checkpoint_tensors(const std::filesystem::path& dir, const std::string& what_to_try);

// The same files opened for reads of their parts (Note [Reading only what a rank keeps] in
// io/safetensors.h): every tensor's name and entry from the headers, its data read on demand
// (load_checkpoint_tensors reads them all through it). A tensor named by two shards is an error
// naming both.
class CheckpointFiles {
 public:
  CheckpointFiles(const std::filesystem::path& dir, const std::string& what_to_try);
  struct Located {
    const io::SafetensorsFile* file = nullptr;
    const io::SafetensorsEntry* entry = nullptr;
  };
  const std::map<std::string, Located>& tensors() const { return tensors_; }
  const Located* find(const std::string& name) const;  // null when absent
  uint64_t bytes_read() const;                         // of every file's data, so far

 private:
  std::vector<std::unique_ptr<io::SafetensorsFile>> files_;
  std::map<std::string, Located> tensors_;
};

// Writes DIR/model.safetensors (every parameter as F32 under its Hugging Face key) and
// DIR/config.json, each atomically: the save_pretrained of every model of the kit.
void save_checkpoint(const torch::nn::Module& model, const nlohmann::json& config,
                     const std::filesystem::path& dir);

// Whether a state-dict key starts with a prefix ("transformer.", "bert.") or ends with a suffix.
bool key_starts_with(const std::string& key, const std::string& prefix);
bool key_ends_with(const std::string& key, const std::string& suffix);

// "[3, 24]": a shape as error messages write it.
std::string shape_string(at::IntArrayRef sizes);

}  // namespace dtlab::model
