// Fuzzes GPT-2's tokenizer files (tokenizer/gpt2_tokenizer.h's from_texts: vocab.json,
// merges.txt, tokenizer_config.json, special_tokens_map.json, added_tokens.json), then encodes
// and decodes text with what they built.
// Input: vocab.json "\n@@\n" merges.txt, then optionally "\n@@\n" and each of
// tokenizer_config.json, special_tokens_map.json, added_tokens.json (empty: no such file), and
// "\n@@\n" a text.
#include "dtlab/tokenizer/gpt2_tokenizer.h"

#include "fuzz_common.h"

namespace {

std::optional<std::string> optional_file(const std::vector<std::string_view>& parts, size_t i) {
  if (i >= parts.size() || parts[i].empty()) return std::nullopt;
  return std::string(parts[i]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts = dtlab::fuzz::split_parts(dtlab::fuzz::as_text(data, size));
  dtlab::fuzz::expect_error_or_success([&] {
    dtlab::tokenizer::Gpt2Tokenizer::Files files;
    files.vocab_json = std::string(parts[0]);
    // merges.txt ends with a newline, which the separator took.
    if (parts.size() > 1) files.merges_txt = std::string(parts[1]) + "\n";
    files.tokenizer_config_json = optional_file(parts, 2);
    files.special_tokens_map_json = optional_file(parts, 3);
    files.added_tokens_json = optional_file(parts, 4);
    const auto tokenizer = dtlab::tokenizer::Gpt2Tokenizer::from_texts("fuzz", files);
    const std::string_view text = parts.size() > 5 ? parts[5] : "Hello world<|endoftext|> 123!";
    const std::vector<int64_t> ids = tokenizer.encode(text);
    for (int64_t id : ids)
      if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
    (void)tokenizer.decode(ids);
    (void)tokenizer.decode(ids, {/*skip_special_tokens=*/true, /*clean_up=*/false});
  });
  return 0;
}
