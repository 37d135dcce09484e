// The offline fixtures: a tiny random BERT in Hugging Face format and a learnable data set in
// GLUE RTE format, written deterministically from a seed. The demo and the tests use them; a
// real run points the same flags at a downloaded model and the real RTE folder.
#pragma once

#include <cstdint>
#include <filesystem>

namespace dtlab::tooling {

struct FixtureOptions {
  uint64_t seed = 0;
  int64_t train_examples = 2490;  // RTE's own sizes, so dev accuracy means something
  int64_t dev_examples = 277;
  int64_t hidden_size = 128;      // the "tiny" BERT: L2/H128/A2
  int64_t num_hidden_layers = 2;
  int64_t num_attention_heads = 2;
  // 0: the vocabulary's own size. Larger: vocab.txt is padded with "[unused<k>]" entries, as
  // BERT-base's holds [unused0]..[unused993], so that the embeddings (and the gradients a
  // data-parallel step sends) have a real model's size while the tokenizer is unchanged.
  int64_t vocab_size = 0;
};

// Writes OUT/bert-tiny/{config.json, model.safetensors, vocab.txt, tokenizer_config.json}
// and OUT/RTE/{train.tsv, dev.tsv}, each file atomically.
//
// The data set: premises are 8 to 14 words drawn from one half of an invented vocabulary; an
// entailed hypothesis repeats 3 to 6 premise words in order; a not_entailment hypothesis does
// the same and inserts one word from the other half, which premises never use. Labels are
// balanced. A tiny BERT learns this in a few epochs; "is every hypothesis word in the
// premise?" alone stays at chance for such a model (see handouts/task1.md).
//
// The model: a randomly initialised BertModel (no classifier, as a pre-trained checkpoint has
// none), lower-cased vocabulary of the invented words, letters and "##" letters.
void write_fixtures(const std::filesystem::path& out, const FixtureOptions& options);

}  // namespace dtlab::tooling
