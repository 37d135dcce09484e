// Accuracy and loss on the dev set, see glue/evaluate.h.
#include "dtlab/glue/evaluate.h"

#include <torch/utils.h>

#include <cmath>

#include "dtlab/core/device.h"

namespace dtlab::glue {

train::EvalResult evaluate(model::BertForSequenceClassification& model, const data::Features& features,
                    int64_t batch_size) {
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  train::EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0;
  const int64_t n = features.size();
  const torch::Device device = device_of(*model);
  auto rows = [&](const torch::Tensor& t, int64_t start, int64_t end) { return t.slice(0, start, end).to(device); };
  for (int64_t start = 0; start < n; start += batch_size) {
    const int64_t end = std::min(n, start + batch_size);
    const torch::Tensor labels = rows(features.labels, start, end);
    const model::ClassifierOutput out =
        model->forward(rows(features.input_ids, start, end), rows(features.attention_mask, start, end),
                       rows(features.token_type_ids, start, end), labels);
    loss_sum += out.loss.item<double>() * double(end - start);
    correct += out.logits.argmax(-1).eq(labels).sum().item<int64_t>();
  }
  model->train(was_training);
  r.examples = n;
  r.accuracy = n ? double(correct) / double(n) : 0.0;
  r.loss = n ? loss_sum / double(n) : 0.0;
  return r;
}

train::EvalResult evaluate_distributed(model::BertForSequenceClassification& model,
                                       const data::Features& dev, int64_t batch, dist::Group& group) {
  std::vector<int64_t> mine;
  for (int64_t i = group.rank(); i < dev.size(); i += group.size()) mine.push_back(i);
  double correct = 0, loss_sum = 0;
  if (!mine.empty()) {
    const data::Batch rows = data::make_batch(dev, mine);
    const data::Features part{rows.input_ids, rows.attention_mask, rows.token_type_ids, rows.labels};
    const train::EvalResult r = evaluate(model, part, batch);
    correct = std::round(*r.accuracy * double(r.examples));
    loss_sum = r.loss * double(r.examples);
  }
  torch::Tensor sums = torch::tensor({correct, loss_sum, double(mine.size())}, torch::kFloat64);
  group.all_reduce(sums, dist::ReduceOp::SUM, "eval");
  const double n = sums[2].item<double>();
  train::EvalResult r;
  r.accuracy = n ? sums[0].item<double>() / n : 0.0;
  r.loss = n ? sums[1].item<double>() / n : 0.0;
  r.examples = static_cast<int64_t>(n);
  return r;
}

}  // namespace dtlab::glue
