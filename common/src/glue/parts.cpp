// The shared pieces of the GLUE drivers, see glue/parts.h.
#include "dtlab/glue/parts.h"

namespace dtlab::glue {

data::Features read_features(const GlueOptions& o, const tokenizer::BertTokenizer& tokenizer,
                             const std::string& split) {
  return data::convert_examples_to_features(
      data::read_rte_examples(std::filesystem::path(o.data_dir) / (split + ".tsv"), split), tokenizer,
      o.max_seq_length);
}

model::BertOverrides overrides_from(const GlueOptions& o, int64_t num_labels) {
  model::BertOverrides overrides;
  if (o.dropout) overrides = model::BertOverrides::dropout(*o.dropout);
  overrides.num_labels = num_labels;
  overrides.ignore_mismatched_sizes = o.ignore_mismatched_sizes;
  return overrides;
}

std::function<torch::Tensor(const data::Batch&)> classification_loss(model::BertForSequenceClassification model) {
  return [model](const data::Batch& b) mutable {
    return model->forward(b.input_ids, b.attention_mask, b.token_type_ids, b.labels).loss;
  };
}

void add_optimizer(train::TrainState& state, const GlueOptions& o, int64_t total_steps) {
  state.max_grad_norm = o.max_grad_norm;
  state.optimizer = train::make_adamw(*state.module, {o.learning_rate, o.weight_decay, o.adam_epsilon});
  state.scheduler = std::make_unique<train::LinearWarmupSchedule>(*state.optimizer, o.warmup_steps, total_steps);
}

}  // namespace dtlab::glue
