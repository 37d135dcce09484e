// Fuzzes the BPE trainer's input (tokenizer/bpe_trainer.h): the lines of a translation set as
// dtlab-fixtures feeds them, with a small vocabulary; without special tokens the trained
// tokenizer must then give every line of valid UTF-8 back exactly (byte-level BPE loses
// nothing; a special token made of byte-level symbols would decode to their bytes, as in
// Hugging Face).
// Input: byte 0 picks the merges allowed (0..255), byte 1 min_frequency (0..3), then lines; a
// first line starting with "special:" lists special tokens separated by spaces.
#include "dtlab/tokenizer/bpe_trainer.h"
#include "dtlab/tokenizer/unicode.h"

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  dtlab::tokenizer::BpeTrainerOptions options;
  const std::string_view text = dtlab::fuzz::as_text(data + 2, size - 2);
  std::vector<std::string> lines;
  for (size_t start = 0; start <= text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  constexpr std::string_view kSpecial = "special:";
  if (lines[0].rfind(kSpecial, 0) == 0) {
    const std::string list = lines[0].substr(kSpecial.size());
    for (size_t start = 0; start < list.size();) {
      const size_t end = std::min(list.find(' ', start), list.size());
      options.special_tokens.push_back(list.substr(start, end - start));
      start = end + 1;
    }
    lines.erase(lines.begin());
  }
  options.vocab_size = static_cast<int64_t>(options.special_tokens.size()) + 256 + data[0];
  options.min_frequency = data[1] % 4;
  dtlab::fuzz::expect_error_or_success([&] {
    dtlab::tokenizer::BpeTrainer trainer(options);
    trainer.feed(lines);
    const dtlab::tokenizer::TrainedBpe trained = trainer.train();
    if (static_cast<int64_t>(trained.vocab.size()) > options.vocab_size) std::abort();
    const dtlab::tokenizer::Gpt2Tokenizer tokenizer = trained.tokenizer();
    if (!options.special_tokens.empty()) return;
    for (const std::string& line : lines) {
      if (!dtlab::tokenizer::unicode::is_valid_utf8(line)) continue;
      const std::string back = tokenizer.decode(tokenizer.encode(line));
      if (back != line) {
        std::fprintf(stderr, "round trip changed \"%s\" into \"%s\"\n", line.c_str(), back.c_str());
        std::abort();
      }
    }
  });
  return 0;
}
