// Accuracy and loss on the dev set, see train/evaluate.h.
#include "dtlab/train/evaluate.h"

#include <torch/utils.h>

namespace dtlab::train {

EvalResult evaluate(model::BertForSequenceClassification& model, const data::Features& features,
                    int64_t batch_size) {
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0;
  const int64_t n = features.size();
  for (int64_t start = 0; start < n; start += batch_size) {
    const int64_t end = std::min(n, start + batch_size);
    const torch::Tensor labels = features.labels.slice(0, start, end);
    const model::ClassifierOutput out =
        model->forward(features.input_ids.slice(0, start, end),
                       features.attention_mask.slice(0, start, end),
                       features.token_type_ids.slice(0, start, end), labels);
    loss_sum += out.loss.item<double>() * double(end - start);
    correct += out.logits.argmax(-1).eq(labels).sum().item<int64_t>();
  }
  model->train(was_training);
  r.examples = n;
  r.accuracy = n ? double(correct) / double(n) : 0.0;
  r.loss = n ? loss_sum / double(n) : 0.0;
  return r;
}

}  // namespace dtlab::train
