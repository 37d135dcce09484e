// Translation pairs as the training loop reads them: language-model rows (data/translation.h's
// make_lm_examples) tokenised once, served as minibatches cut to their longest row.
#pragma once

#include <cstdint>
#include <vector>

#include "dtlab/data/translation.h"
#include "dtlab/lm/special_tokens.h"
#include "dtlab/tokenizer/gpt2_tokenizer.h"
#include "dtlab/train/loop.h"

namespace dtlab::lm {

// The rows of pairs, encoded with the tokenizer (no special tokens inside a sentence).
data::LmExamples encode_pairs(const std::vector<data::TranslationPair>& pairs,
                              const tokenizer::Gpt2Tokenizer& tokenizer, const LmTokenIds& ids,
                              int64_t max_length);

// Note [Padding columns]: rows are padded on the right and GPT-2's attention is causal, so no
// real position ever sees a padding position, and every label that counts lies left of the
// row's real_tokens. A minibatch therefore keeps only as many columns as its longest row: the
// loss and its gradient are those of the full max_length - 1 columns (the fixture's rows are a
// quarter of 128 tokens, so this saves three quarters of the work).
class LmDataset final : public train::Dataset {
 public:
  explicit LmDataset(data::LmExamples examples) : examples_(std::move(examples)) {}
  int64_t size() const override { return examples_.size(); }
  // input_ids, labels, label_weights of these rows (Note [Padding columns]), and an
  // attention_mask of 1 on real tokens and 0 on padding, which the throughput counts. The
  // loss does not pass the mask to the model: with right padding it changes nothing.
  data::Batch batch(const std::vector<int64_t>& rows) const override;
  const data::LmExamples& examples() const { return examples_; }

 private:
  data::LmExamples examples_;
};

}  // namespace dtlab::lm
