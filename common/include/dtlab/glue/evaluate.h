// Evaluation of a BERT classifier on a GLUE dev set: accuracy and mean loss, with dropout off and
// no gradients; on every rank of a run, each evaluating its share.
#pragma once

#include "dtlab/data/glue.h"
#include "dtlab/dist/group.h"
#include "dtlab/model/bert.h"
#include "dtlab/train/train_state.h"

namespace dtlab::glue {

// Runs the model over features in order, batch_size rows at a time. Leaves the model in the
// mode (train or eval) it was in.
train::EvalResult evaluate(model::BertForSequenceClassification& model, const data::Features& features,
                           int64_t batch_size);

// The same split over the ranks: rank r reads dev examples r, r + world, ... and the counts are
// summed, so no rank waits for another to evaluate the whole set.
train::EvalResult evaluate_distributed(model::BertForSequenceClassification& model,
                                       const data::Features& features, int64_t batch_size,
                                       dist::Group& group);

}  // namespace dtlab::glue
