// LoadReport: what a from_pretrained found in a checkpoint, in Hugging Face's terms, for every
// model of the kit (BERT, GPT-2).
#pragma once

#include <string>
#include <vector>

namespace dtlab::model {

struct LoadReport {
  std::vector<std::string> missing_keys;     // in the model, not in the checkpoint: initialised
  std::vector<std::string> unexpected_keys;  // in the checkpoint, not in the model: ignored
  // In both with different shapes, initialised afresh (only with ignore_mismatched_sizes):
  // "classifier.weight: found shape [3, 24] in the checkpoint and [2, 24] in the model".
  std::vector<std::string> mismatched_keys;
  std::string model_class;                   // the class loaded, as Hugging Face names it
  std::string describe(const std::string& checkpoint) const;  // Hugging Face-style notice
};

}  // namespace dtlab::model
