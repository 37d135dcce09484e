// Model FLOPs per token (model/flops.h) against the counts worked out by hand for GPT-2 small and
// BERT base, and the attention term's growth with the sequence.
#include <gtest/gtest.h>

#include "dtlab/model/flops.h"

namespace {

TEST(ModelFlops, Gpt2SmallPerTokenIsSixTimesItsProductsPlusAttention) {
  const dtlab::model::Gpt2Config c;  // GPT-2 small: 12 layers of 768, MLP 3072, vocabulary 50257
  // 12 x (4 x 768^2 + 2 x 768 x 3072) = 84,934,656 weights in the blocks' products, 38,597,376 in
  // the head; attention 12 x 12 x 1024 x 768 at 1024 tokens.
  const double want = 6.0 * (84'934'656.0 + 38'597'376.0) + 12.0 * 12 * 1024 * 768;
  EXPECT_DOUBLE_EQ(dtlab::model::gpt2_training_flops_per_token(c, 1024), want);
  EXPECT_NEAR(want, 854.4e6, 0.1e6);
}

TEST(ModelFlops, AttentionGrowsWithTheSequenceAlone) {
  const dtlab::model::Gpt2Config c;
  const double at_512 = dtlab::model::gpt2_training_flops_per_token(c, 512);
  const double at_1024 = dtlab::model::gpt2_training_flops_per_token(c, 1024);
  EXPECT_DOUBLE_EQ(at_1024 - at_512, 12.0 * 12 * 512 * 768);
}

TEST(ModelFlops, BertBaseCountsItsPoolerAndClassifierOnceARow) {
  dtlab::model::BertConfig c;  // BERT base: 12 layers of 768, intermediate 3072, 2 labels
  const double blocks = 12.0 * (4.0 * 768 * 768 + 2.0 * 768 * 3072);
  const double head = 768.0 * 768 + 768.0 * 2;
  EXPECT_DOUBLE_EQ(dtlab::model::bert_training_flops_per_token(c, 128),
                   6.0 * (blocks + head / 128) + 12.0 * 12 * 128 * 768);
}

}  // namespace
