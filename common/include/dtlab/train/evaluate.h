// Evaluation on a held-out set: accuracy and mean loss, with dropout off and no gradients.
#pragma once

#include "dtlab/data/glue.h"
#include "dtlab/model/bert.h"

namespace dtlab::train {

struct EvalResult {
  double accuracy = 0;
  double loss = 0;       // mean cross-entropy per example
  int64_t examples = 0;
};

// Runs the model over features in order, batch_size rows at a time. Leaves the model in the
// mode (train or eval) it was in.
EvalResult evaluate(model::BertForSequenceClassification& model, const data::Features& features,
                    int64_t batch_size);

}  // namespace dtlab::train
