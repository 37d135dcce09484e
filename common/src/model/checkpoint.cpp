// Reading the weight files of a Hugging Face model folder (single or sharded safetensors).
#include "dtlab/model/checkpoint.h"

#include <set>
#include <sstream>

#include "dtlab/core/error.h"
#include "dtlab/io/json_file.h"

namespace fs = std::filesystem;

namespace dtlab::model {
namespace {

// The one-line conversion offered when a folder has only a PyTorch pickle.
std::string conversion_hint(const fs::path& dir) {
  const std::string bin = (dir / "pytorch_model.bin").string();
  const std::string out = (dir / "model.safetensors").string();
  return "LibTorch 1.13 cannot read Hugging Face's pytorch_model.bin (pytorch#100741). Convert it "
         "once, with Python and the safetensors package:\n  python3 -c \"import torch; from "
         "safetensors.torch import save_file; sd = torch.load('" + bin +
         "', map_location='cpu'); save_file({k: v.clone().contiguous() for k, v in sd.items()}, '" +
         out + "', metadata={'format': 'pt'})\"";
}

// The safetensors files of DIR, or the error that says what DIR holds instead.
std::vector<fs::path> checkpoint_files(const fs::path& dir, const std::string& what_to_try) {
  const fs::path single = dir / "model.safetensors";
  if (fs::exists(single)) return {single};
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    // Sharded checkpoint: {"weight_map": {tensor name: shard file name}}.
    const nlohmann::json j = io::read_json_file(index);
    if (!j.contains("weight_map") || !j.at("weight_map").is_object()) {
      throw Error(index.string() + ": expected an object \"weight_map\"");
    }
    std::set<std::string> shards;
    for (const auto& [name, file] : j.at("weight_map").items()) {
      if (!file.is_string()) throw Error(index.string() + ": shard of " + name + " is not a file name");
      shards.insert(file.get<std::string>());
    }
    std::vector<fs::path> files;
    for (const std::string& shard : shards) files.push_back(dir / shard);
    return files;
  }
  if (fs::exists(dir / "pytorch_model.bin")) {
    throw Error(dir.string() + " has pytorch_model.bin but no model.safetensors. " +
                conversion_hint(dir));
  }
  throw Error(dir.string() + " has no model.safetensors: " + what_to_try);
}

}  // namespace

io::TensorMap load_checkpoint_tensors(const fs::path& dir, const std::string& what_to_try) {
  const CheckpointFiles files(dir, what_to_try);
  io::TensorMap all;
  for (const auto& [name, located] : files.tensors()) all[name] = located.file->read(*located.entry);
  return all;
}

CheckpointFiles::CheckpointFiles(const fs::path& dir, const std::string& what_to_try) {
  for (const fs::path& path : checkpoint_files(dir, what_to_try)) {
    files_.push_back(std::make_unique<io::SafetensorsFile>(path));
    const io::SafetensorsFile& file = *files_.back();
    for (const io::SafetensorsEntry& e : file.entries()) {
      auto [at, added] = tensors_.emplace(e.name, Located{&file, &e});
      if (!added) {
        throw Error(dir.string() + ": " + e.name + " is in both " + at->second.file->source() + " and " +
                    file.source() + ": a sharded checkpoint names each tensor once");
      }
    }
  }
}

const CheckpointFiles::Located* CheckpointFiles::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

uint64_t CheckpointFiles::bytes_read() const {
  uint64_t total = 0;
  for (const auto& f : files_) total += f->bytes_read();
  return total;
}

std::string shape_string(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "]";
  return out.str();
}

void save_checkpoint(const torch::nn::Module& model, const nlohmann::json& config,
                     const std::filesystem::path& dir) {
  io::TensorMap tensors;
  for (const auto& item : model.named_parameters()) {
    tensors[item.key()] = item.value().detach().to(torch::kCPU, torch::kFloat32).contiguous();
  }
  io::save_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  io::write_json_file(dir / "config.json", config);
}

bool key_starts_with(const std::string& key, const std::string& prefix) {
  return key.compare(0, prefix.size(), prefix) == 0;
}

bool key_ends_with(const std::string& key, const std::string& suffix) {
  return key.size() >= suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace dtlab::model
