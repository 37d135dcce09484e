// The layout's added tokens, see lm/special_tokens.h.
#include "dtlab/lm/special_tokens.h"

#include "dtlab/core/error.h"

namespace dtlab::lm {

data::LmExampleOptions LmTokenIds::example_options(int64_t max_length) const {
  data::LmExampleOptions o;
  o.eos_src_id = eos_source;
  o.eos_tgt_id = eos_target;
  o.pad_id = pad;
  o.max_length = max_length;
  return o;
}

LmTokenIds lm_token_ids(const tokenizer::Gpt2Tokenizer& tokenizer, const std::string& where) {
  auto id_of = [&](const char* token) {
    const std::optional<int64_t> id = tokenizer.token_to_id(token);
    if (!id) {
      throw Error(std::string("the tokenizer in ") + where + " has no " + token + " token: the "
                  "language-model layout needs <eos_de>, <eos_en> and <pad> as added tokens "
                  "(dtlab-fixtures writes fixtures/gpt2-tiny with them, trained by the kit's BPE "
                  "trainer)");
    }
    return *id;
  };
  return {id_of(kEosSource), id_of(kEosTarget), id_of(kPad)};
}

}  // namespace dtlab::lm
