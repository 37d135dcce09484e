// The three added tokens of the German->English language-model layout (data/translation.h):
// <eos_de> ends the source, <eos_en> ends the target (generation stops there), <pad> fills a row.
// The kit's BPE fixture gives them ids 0, 1, 2; a tokenizer folder from elsewhere must list them
// as added tokens.
#pragma once

#include <cstdint>
#include <string>

#include "dtlab/data/translation.h"
#include "dtlab/tokenizer/gpt2_tokenizer.h"

namespace dtlab::lm {

inline constexpr const char* kEosSource = "<eos_de>";
inline constexpr const char* kEosTarget = "<eos_en>";
inline constexpr const char* kPad = "<pad>";

// The ids of the three tokens in one tokenizer.
struct LmTokenIds {
  int64_t eos_source = -1;
  int64_t eos_target = -1;
  int64_t pad = -1;

  // make_lm_examples' options with these ids and max_length.
  data::LmExampleOptions example_options(int64_t max_length) const;
};

// Looks the three tokens up. A missing one is a dtlab::Error naming `where` (the tokenizer's
// folder) and how to make a folder that has them.
LmTokenIds lm_token_ids(const tokenizer::Gpt2Tokenizer& tokenizer, const std::string& where);

}  // namespace dtlab::lm
