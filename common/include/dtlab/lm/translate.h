// Greedy translation with a GPT-2 trained on the language-model layout: the prompt is the source
// tokens and <eos_de>, the model continues until <eos_en>, and the continuation is the English.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dtlab/lm/special_tokens.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/tokenizer/gpt2_tokenizer.h"

namespace dtlab::lm {

struct TranslateOptions {
  int64_t batch_size = 64;      // prompts decoded together (left-padded)
  int64_t max_length = 128;     // a prompt keeps at most max_length - 1 tokens, as a training row
  int64_t max_new_tokens = 64;  // and gets at most this many, within the model's n_positions
};

// One translation per source, in order: greedy decoding (model::generate_greedy, with the key/
// value cache) of encode(source) + <eos_de>, the new tokens up to the first <eos_en>, decoded
// without special tokens. A source too long for its prompt keeps its first tokens. Runs in eval
// mode without gradients and leaves the model's mode as it was.
std::vector<std::string> translate(model::Gpt2LMHeadModel& model,
                                   const tokenizer::Gpt2Tokenizer& tokenizer, const LmTokenIds& ids,
                                   const std::vector<std::string>& sources,
                                   const TranslateOptions& options);

}  // namespace dtlab::lm
