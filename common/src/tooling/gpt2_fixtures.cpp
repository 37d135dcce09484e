// The offline GPT-2 and its tokenizer, see tooling/gpt2_fixtures.h.
#include "dtlab/tooling/gpt2_fixtures.h"

#include <torch/utils.h>

#include "dtlab/core/error.h"
#include "dtlab/lm/special_tokens.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/tokenizer/bpe_trainer.h"

namespace dtlab::tooling {

// Note [gpt2-tiny]: the demo trains it for a few epochs of the 5,000 fixture pairs on 2 CPU
// cores. A fixture pair is about 30 tokens, so an epoch is about 150k tokens; with n_embd 128,
// two layers (0.4M weights) and a 2,000-entry output layer (0.26M multiply-adds per token), a
// step's forward and backward cost about 4 MFLOP per token, so an epoch is well under a minute
// of matrix products on two cores. Two layers of four heads are enough to learn the fixture's
// one reordering rule (the verb of a dass/weil clause moves), which word-for-word copying cannot.

void write_gpt2_fixture(const std::filesystem::path& dir,
                        const std::vector<data::TranslationPair>& train,
                        const Gpt2FixtureOptions& o) {
  if (train.empty()) throw Error("the GPT-2 fixture's tokenizer needs training pairs; got none");
  tokenizer::BpeTrainerOptions bpe_options;
  bpe_options.vocab_size = o.vocab_size;
  bpe_options.special_tokens = {lm::kEosSource, lm::kEosTarget, lm::kPad};
  tokenizer::BpeTrainer trainer(bpe_options);
  for (const data::TranslationPair& pair : train) {
    trainer.feed(pair.de);
    trainer.feed(pair.en);
  }
  const tokenizer::TrainedBpe bpe = trainer.train();
  bpe.save(dir);
  const lm::LmTokenIds ids = lm::lm_token_ids(bpe.tokenizer(), dir.string());

  model::Gpt2Config config;
  config.vocab_size = static_cast<int64_t>(bpe.vocab.size());
  config.n_positions = o.n_positions;
  config.n_embd = o.n_embd;
  config.n_layer = o.n_layer;
  config.n_head = o.n_head;
  config.bos_token_id = std::nullopt;
  config.eos_token_id = ids.eos_target;
  config.pad_token_id = ids.pad;
  torch::manual_seed(o.seed);
  model::save_pretrained(model::Gpt2LMHeadModel(config), dir);
}

}  // namespace dtlab::tooling
