// Loss, perplexity and BLEU, see lm/evaluate.h.
#include "dtlab/lm/evaluate.h"

#include <torch/utils.h>

#include "dtlab/core/device.h"
#include "dtlab/lm/dataset.h"
#include "dtlab/lm/loss.h"

namespace dtlab::lm {
namespace {

// This rank's share: r, r + world, ... (everything on one process).
std::vector<int64_t> share(int64_t n, const dist::Group* group) {
  std::vector<int64_t> rows;
  const int64_t rank = group ? group->rank() : 0, world = group ? group->size() : 1;
  for (int64_t i = rank; i < n; i += world) rows.push_back(i);
  return rows;
}

metrics::BleuStats bleu_stats(const EvalInputs& in, const std::vector<int64_t>& rows,
                              std::vector<Translation>* translations) {
  std::vector<std::string> sources;
  for (int64_t i : rows) sources.push_back((*in.test)[i].de);
  model::Gpt2LMHeadModel model = in.model;
  const std::vector<std::string> hypotheses = translate(model, *in.tokenizer, in.ids, sources, in.translate);
  metrics::BleuStats stats;
  for (size_t k = 0; k < rows.size(); ++k) {
    const data::TranslationPair& pair = (*in.test)[rows[k]];
    stats += metrics::segment_bleu_stats(hypotheses[k], {pair.en});
    if (translations) translations->push_back({pair.de, pair.en, hypotheses[k]});
  }
  return stats;
}

// Every sum of this evaluation in one float64 tensor (exact for counts below 2^53), summed over
// the ranks in one all_reduce: loss sum, tokens, then BLEU's matches, totals, sys_len, ref_len.
void sum_over_ranks(TokenLoss& loss, metrics::BleuStats& stats, dist::Group& group) {
  std::vector<double> v = {loss.sum, loss.tokens};
  for (int n = 0; n < metrics::kBleuMaxOrder; ++n) v.push_back(double(stats.matches[n]));
  for (int n = 0; n < metrics::kBleuMaxOrder; ++n) v.push_back(double(stats.totals[n]));
  v.push_back(double(stats.sys_len));
  v.push_back(double(stats.ref_len));
  torch::Tensor t = torch::tensor(v, torch::kFloat64);
  group.all_reduce(t, dist::ReduceOp::SUM, "eval");
  const double* s = t.data_ptr<double>();
  loss = {s[0], s[1]};
  for (int n = 0; n < metrics::kBleuMaxOrder; ++n) {
    stats.matches[n] = static_cast<int64_t>(s[2 + n]);
    stats.totals[n] = static_cast<int64_t>(s[2 + metrics::kBleuMaxOrder + n]);
  }
  stats.sys_len = static_cast<int64_t>(s[2 + 2 * metrics::kBleuMaxOrder]);
  stats.ref_len = static_cast<int64_t>(s[3 + 2 * metrics::kBleuMaxOrder]);
}

}  // namespace

TokenLoss validation_loss(model::Gpt2LMHeadModel& model, const data::LmExamples& examples,
                          const std::vector<int64_t>& rows, int64_t batch_size) {
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  const LmDataset dataset(examples);
  TokenLoss total;
  for (size_t begin = 0; begin < rows.size(); begin += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(rows.size(), begin + static_cast<size_t>(batch_size));
    const data::Batch b = dataset.batch({rows.begin() + begin, rows.begin() + end}).to(device_of(*model));
    const double tokens = b.label_weights.sum().item<double>();
    const torch::Tensor logits = model->forward(b.input_ids).logits;
    total.sum += weighted_token_loss(logits, b.labels, b.label_weights).item<double>() * tokens;
    total.tokens += tokens;
  }
  model->train(was_training);
  return total;
}

train::EvalResult evaluate_translation(const EvalInputs& in, dist::Group* group,
                                       std::vector<Translation>* translations) {
  model::Gpt2LMHeadModel model = in.model;
  TokenLoss loss = validation_loss(model, *in.validation, share(in.validation->size(), group), in.batch_size);
  const int64_t test_pairs = static_cast<int64_t>(in.test->size());
  metrics::BleuStats stats;
  if (test_pairs > 0) stats = bleu_stats(in, share(test_pairs, group), translations);
  if (group) sum_over_ranks(loss, stats, *group);
  train::EvalResult r;
  r.loss = loss.tokens > 0 ? loss.sum / loss.tokens : 0.0;
  r.examples = in.validation->size();
  r.metrics["perplexity"] = metrics::perplexity(r.loss);
  if (test_pairs > 0) r.metrics["bleu"] = metrics::bleu_from_stats(stats).score;
  return r;
}

}  // namespace dtlab::lm
