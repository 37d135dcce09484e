// The pieces both GLUE drivers (fine-tuning, glue/run.h; task 4's traffic, glue/traffic_run.h)
// build their runs from: the tokenised data set, the model's loss, the optimiser.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/data/glue.h"
#include "dtlab/glue/options.h"
#include "dtlab/model/bert.h"
#include "dtlab/tokenizer/bert_tokenizer.h"
#include "dtlab/train/loop.h"
#include "dtlab/train/train_state.h"

namespace dtlab::glue {

// The features of DATA_DIR/<split>.tsv ("train" or "dev"), tokenised once.
data::Features read_features(const GlueOptions& o, const tokenizer::BertTokenizer& tokenizer,
                             const std::string& split);

// Features as the training loop reads them.
class FeaturesDataset final : public train::Dataset {
 public:
  explicit FeaturesDataset(const data::Features& features) : features_(features) {}
  int64_t size() const override { return features_.size(); }
  data::Batch batch(const std::vector<int64_t>& rows) const override {
    return data::make_batch(features_, rows);
  }

 private:
  const data::Features& features_;
};

// The overrides the flags ask for (--dropout) and the task's number of labels.
model::BertOverrides overrides_from(const GlueOptions& o, int64_t num_labels);

// The classifier's cross-entropy on a minibatch.
std::function<torch::Tensor(const data::Batch&)> classification_loss(model::BertForSequenceClassification model);

// AdamW with run_glue's groups and the linear warmup schedule over total_steps, into state.
void add_optimizer(train::TrainState& state, const GlueOptions& o, int64_t total_steps);

}  // namespace dtlab::glue
