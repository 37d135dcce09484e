// Translation pairs as minibatches, see lm/dataset.h.
#include "dtlab/lm/dataset.h"

namespace dtlab::lm {

data::LmExamples encode_pairs(const std::vector<data::TranslationPair>& pairs,
                              const tokenizer::Gpt2Tokenizer& tokenizer, const LmTokenIds& ids,
                              int64_t max_length) {
  return data::make_lm_examples(
      pairs, [&tokenizer](const std::string& text) { return tokenizer.encode(text); },
      ids.example_options(max_length));
}

data::Batch LmDataset::batch(const std::vector<int64_t>& rows) const {
  const torch::Tensor index = torch::tensor(rows, torch::kInt64);
  const torch::Tensor real = examples_.real_tokens.index_select(0, index);
  const int64_t width = rows.empty() ? 0 : real.max().item<int64_t>();
  auto cut = [&](const torch::Tensor& t) { return t.index_select(0, index).narrow(1, 0, width); };
  data::Batch b;
  b.input_ids = cut(examples_.input_ids);
  b.labels = cut(examples_.labels);
  b.label_weights = cut(examples_.label_token_weights);
  b.attention_mask = torch::arange(width, torch::kInt64).unsqueeze(0).lt(real.unsqueeze(1)).to(torch::kInt64);
  return b;
}

}  // namespace dtlab::lm
