// The notice from_pretrained prints, worded as Hugging Face words it.
#include "dtlab/model/load_report.h"

namespace dtlab::model {

std::string LoadReport::describe(const std::string& checkpoint) const {
  const std::string model = model_class.empty() ? "the model" : model_class;
  std::string text;
  auto list = [](const std::vector<std::string>& keys) {
    std::string s = "[";
    for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + keys[i];
    return s + "]";
  };
  if (!unexpected_keys.empty()) {
    text += "Some weights of the model checkpoint at " + checkpoint +
            " were not used when initializing " + model + ": " + list(unexpected_keys) +
            "\n- This is expected when the checkpoint was trained on another task or with "
            "another architecture (e.g. pre-training heads).\n";
  }
  if (!missing_keys.empty()) {
    text += "Some weights of " + model + " were not initialized from the model checkpoint at " +
            checkpoint + " and are newly initialized: " + list(missing_keys) +
            "\nYou should probably TRAIN this model on a down-stream task to be able to use it "
            "for predictions and inference.\n";
  }
  if (!mismatched_keys.empty()) {
    text += "Some weights of " + model + " were not initialized from the model checkpoint at " +
            checkpoint + " and are newly initialized because the shapes did not match:\n";
    for (const std::string& key : mismatched_keys) text += "- " + key + "\n";
    text += "You should probably TRAIN this model on a down-stream task to be able to use it "
            "for predictions and inference.\n";
  }
  return text;
}

}  // namespace dtlab::model
