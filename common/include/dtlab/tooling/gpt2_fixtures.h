// The offline GPT-2 of the translation exercises: a byte-level BPE learnt by the kit's own
// trainer from the translation fixture's training pairs, and a randomly initialised small GPT-2
// whose vocabulary is that tokenizer's, both in Hugging Face's files. Deterministic from the
// seed. Tooling: dtlab-fixtures writes it; a real run points --model_name_or_path elsewhere.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "dtlab/data/translation.h"

namespace dtlab::tooling {

struct Gpt2FixtureOptions {
  uint64_t seed = 0;
  // The BPE stops here or earlier, once no pair occurs twice. The invented languages have a few
  // hundred distinct words, so 2,000 leaves every fixture word one or two tokens and the output
  // layer small (Note [gpt2-tiny] in gpt2_fixtures.cpp).
  int64_t vocab_size = 2000;
  int64_t n_embd = 128;
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_positions = 256;  // a 128-token training row, or a prompt and its translation
};

// Writes into dir (created if missing), each file atomically:
//   vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json  the BPE trained on
//     both sides of every training pair, special tokens <eos_de>, <eos_en>, <pad> (ids 0, 1, 2);
//   config.json, model.safetensors  GPT-2 with vocab_size = the tokenizer's, eos_token_id
//     <eos_en>, pad_token_id <pad>, no bos, weights drawn after torch::manual_seed(seed) as
//     GPT2LMHeadModel(config) draws them, written by model::save_pretrained.
void write_gpt2_fixture(const std::filesystem::path& dir,
                        const std::vector<data::TranslationPair>& train,
                        const Gpt2FixtureOptions& options);

}  // namespace dtlab::tooling
