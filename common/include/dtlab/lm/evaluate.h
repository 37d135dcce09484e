// Evaluation of a GPT-2 translation model after every epoch: the loss per target token on the
// validation rows and its perplexity, and the BLEU of greedy translations of test pairs. On one
// process, or split over the ranks of a data-parallel run with the sums reduced.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dtlab/data/translation.h"
#include "dtlab/dist/group.h"
#include "dtlab/lm/special_tokens.h"
#include "dtlab/lm/translate.h"
#include "dtlab/metrics/bleu.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/tokenizer/gpt2_tokenizer.h"
#include "dtlab/train/train_state.h"

namespace dtlab::lm {

// A target-token loss as its two sums, so that shares add up: loss = sum / tokens.
struct TokenLoss {
  double sum = 0;     // sum of ce * w
  double tokens = 0;  // sum of w
};

// The loss sums of rows of examples, batch_size rows at a time, in eval mode without gradients
// (leaves the model's mode as it was).
TokenLoss validation_loss(model::Gpt2LMHeadModel& model, const data::LmExamples& examples,
                          const std::vector<int64_t>& rows, int64_t batch_size);

struct Translation {
  std::string source, reference, hypothesis;
};

// What an evaluation reads; the references must outlive it.
struct EvalInputs {
  model::Gpt2LMHeadModel model{nullptr};
  const tokenizer::Gpt2Tokenizer* tokenizer = nullptr;
  LmTokenIds ids;
  const data::LmExamples* validation = nullptr;
  const std::vector<data::TranslationPair>* test = nullptr;  // the pairs BLEU translates (may be empty)
  int64_t batch_size = 64;
  TranslateOptions translate;
};

// EvalResult{loss per validation target token, examples: validation rows, metrics
// {"perplexity": exp(loss), "bleu": corpus BLEU of the test translations (only when there are
// test pairs)}}. With a group, rank r evaluates rows r, r + world, ... of both sets and the loss
// sums and BLEU statistics are summed over the ranks (BLEU's statistics add up over segments,
// so the score is the one corpus_bleu gives for all pairs). This rank's translations go to
// `translations` when given, in its order.
train::EvalResult evaluate_translation(const EvalInputs& inputs, dist::Group* group,
                                       std::vector<Translation>* translations = nullptr);

}  // namespace dtlab::lm
