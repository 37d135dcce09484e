// LoadReport: what a from_pretrained found in a checkpoint, in Hugging Face's terms, for every
// model of the kit (BERT, GPT-2).
#pragma once

#include <string>
#include <vector>

namespace dtlab::model {

struct LoadReport {
  std::vector<std::string> missing_keys;     // in the model, not in the checkpoint: initialised
  std::vector<std::string> unexpected_keys;  // in the checkpoint, not in the model: ignored
  std::string model_class;                   // the class loaded, as Hugging Face names it
  std::string describe(const std::string& checkpoint) const;  // Hugging Face-style notice
};

}  // namespace dtlab::model
