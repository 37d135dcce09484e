// Fuzzes BERT's tokenizer files (tokenizer/bert_tokenizer.h's from_texts: vocab.txt and
// tokenizer_config.json), then tokenises and encodes text with what they built.
// Input: vocab.txt, then optionally "\n@@\n" tokenizer_config.json (empty: no such file),
// "\n@@\n" sentence a, "\n@@\n" sentence b.
#include "dtlab/tokenizer/bert_tokenizer.h"

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts = dtlab::fuzz::split_parts(dtlab::fuzz::as_text(data, size));
  dtlab::fuzz::expect_error_or_success([&] {
    std::optional<std::string> config;
    if (parts.size() > 1 && !parts[1].empty()) config = std::string(parts[1]);
    const auto tokenizer = dtlab::tokenizer::BertTokenizer::from_texts("fuzz", parts[0], config);
    const std::string_view a = parts.size() > 2 ? parts[2] : "Hello, world! unaffable [SEP]";
    std::optional<std::string_view> b;
    if (parts.size() > 3) b = parts[3];
    for (const std::string& piece : tokenizer.tokenize(a))
      if (tokenizer.id_to_token(tokenizer.token_to_id(piece)).empty() && !piece.empty()) std::abort();
    constexpr int kMaxLength = 16;
    const dtlab::tokenizer::Encoding e = tokenizer.encode(a, b, kMaxLength);
    if (e.input_ids.size() != kMaxLength || e.token_type_ids.size() != kMaxLength ||
        e.attention_mask.size() != kMaxLength)
      std::abort();
  });
  return 0;
}
