// GPT-2's byte-level BPE tokenizer as Hugging Face's GPT2TokenizerFast (transformers 4.40,
// tokenizers 0.19) runs it from a vocab.json + merges.txt folder: added tokens cut out whole,
// GPT-2's pre-tokenisation, byte-level symbols, BPE merges by rank; and the way back, ids to
// text. No BOS/EOS is added and nothing is truncated or padded: that is the caller's layout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dtlab::tokenizer {

// GPT-2's one special token; GPT2TokenizerFast uses it as bos, eos and unk unless told otherwise.
inline constexpr std::string_view kGpt2EndOfText = "<|endoftext|>";

// A token matched in the text before anything else and never split ("<eos_de>", "<pad>").
// Special ones are what decode's skip_special_tokens drops.
struct AddedToken {
  std::string content;
  bool special = true;
  bool operator==(const AddedToken& o) const {
    return content == o.content && special == o.special;
  }
};

struct Gpt2TokenizerOptions {
  // In order. One already in the vocabulary keeps its id; the others get the ids after the
  // vocabulary, in this order, as Hugging Face's add_tokens gives them.
  std::vector<AddedToken> added_tokens;
  // transformers' clean_up_tokenization on decode (" ." -> ".", " n't" -> "n't", ...). Its
  // default is true in transformers 4.40, even for GPT-2, whose BPE round-trips text exactly.
  bool clean_up_tokenization_spaces = true;
};

struct DecodeOptions {
  bool skip_special_tokens = false;
  // Unset: the tokenizer's own clean_up_tokenization_spaces.
  std::optional<bool> clean_up_tokenization_spaces;
};

// Thread-safe once built: encode may be called from several threads (the word cache is locked).
// Copies share the cache.
class Gpt2Tokenizer {
 public:
  // vocab: one entry per id, in id order, byte-level strings (see byte_level.h). merges: pairs
  // of entries, highest priority first. Throws dtlab::Error when a merge part or its result is
  // not in the vocabulary ("merge 17 (\"Ġ t\"): ..."), when one of the 256 byte symbols is
  // missing (the tokenizer could not encode every text), or when an added token is empty.
  // A pair listed twice keeps its first rank, as GPT2TokenizerFast converted from these files.
  Gpt2Tokenizer(std::vector<std::string> vocab,
                std::vector<std::pair<std::string, std::string>> merges,
                Gpt2TokenizerOptions options = {});

  // Reads DIR/vocab.json and DIR/merges.txt (what save_pretrained, ByteLevelBPETokenizer's
  // save_model and dtlab's BPE trainer write) and, when present, the added tokens of
  // DIR/tokenizer_config.json, special_tokens_map.json and added_tokens.json as
  // GPT2TokenizerFast.from_pretrained reads them:
  //   - bos_token, eos_token, unk_token default to "<|endoftext|>" when no file sets them (null
  //     unsets them); sep, pad, cls, mask and additional_special_tokens have no default;
  //   - with "added_tokens_decoder" in tokenizer_config.json, that and the config's token keys
  //     are all; without it, special_tokens_map.json overrides the config's keys and
  //     added_tokens.json ({"token": id}) adds tokens, special when also a special-token key;
  //   - order for new ids: added_tokens_decoder by id (or added_tokens.json by id), then bos,
  //     eos, unk, sep, pad, cls, mask, additional_special_tokens.
  // clean_up_tokenization_spaces comes from tokenizer_config.json (default true).
  // merges.txt must start with GPT-2's "#version: 0.2" line (Hugging Face skips the first line
  // whatever it holds) and end with a newline (Hugging Face drops the last line), and every
  // other line must be two vocabulary entries separated by a space.
  // dtlab::Error, naming the file (and line or key), for: a missing vocab.json or merges.txt
  // (saying what DIR must hold), vocab.json that is not an object of entry -> id with ids
  // 0..N-1 each once, a malformed merges line, a merge whose parts or result are not in
  // vocab.json, an added token whose id disagrees with the vocabulary, and settings this class
  // does not implement (add_prefix_space=true; lstrip, rstrip or single_word on an added token).
  static Gpt2Tokenizer from_pretrained(const std::filesystem::path& dir);

  // The text of the files from_pretrained reads; nullopt for an optional file that is absent.
  struct Files {
    std::string vocab_json, merges_txt;
    std::optional<std::string> tokenizer_config_json, special_tokens_map_json, added_tokens_json;
  };
  // What from_pretrained does once it has read the files (dir names them in errors). The fuzz
  // harness (fuzz/gpt2_tokenizer.cpp) calls this.
  static Gpt2Tokenizer from_texts(const std::filesystem::path& dir, const Files& files);

  // Hugging Face's add_tokens: each token (if not added already) becomes an added token, with
  // its vocabulary id when it is an entry and the next free id otherwise. Not thread-safe: call
  // it before sharing the tokenizer.
  void add_tokens(const std::vector<AddedToken>& tokens);

  // Text to ids. Added tokens are cut out first (special ones, then the others, each time the
  // leftmost match and the longest where several start there); the rest is pre-tokenised and
  // every piece, as byte-level symbols, is merged by BPE: always the lowest-ranked pair
  // present, the leftmost where it occurs more than once (tokenizers' Word::merge_all).
  // Invalid UTF-8 is read as Python's bytes.decode("utf-8", errors="replace") reads it (one
  // U+FFFD per maximal invalid sequence, byte_level::utf8_lossy). "" gives no ids.
  std::vector<int64_t> encode(std::string_view text) const;
  // The same as vocabulary entries ("Hello", "Ġworld").
  std::vector<std::string> tokenize(std::string_view text) const;

  // Ids to text as GPT2TokenizerFast.decode: each token becomes the bytes of its byte-level
  // symbols (a token with any other character, such as an added "<é>", is taken as its own
  // UTF-8), the bytes are joined and read as UTF-8 with every invalid sequence replaced by
  // U+FFFD (byte_level::utf8_lossy), then clean-up if enabled. Ids that are out of range
  // (negative or >= vocab_size) are skipped, as Hugging Face skips them.
  std::string decode(const std::vector<int64_t>& ids, const DecodeOptions& options = {}) const;

  // Any entry, including added tokens; nullopt when absent or out of range.
  std::optional<int64_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int64_t id) const;
  // Vocabulary entries plus added tokens that were not among them.
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::vector<AddedToken>& added_tokens() const { return options_.added_tokens; }
  const Gpt2TokenizerOptions& options() const { return options_; }

 private:
  struct MergeRule {
    int64_t rank;
    int64_t result;
  };
  struct WordCache;

  void encode_text(std::string_view text, std::vector<int64_t>& ids) const;
  void encode_piece(const std::string& piece, std::vector<int64_t>& ids) const;
  std::vector<int64_t> bpe(const std::string& piece) const;
  const MergeRule* find_merge(int64_t left, int64_t right) const;

  std::vector<std::string> tokens_;  // id -> entry, added tokens included
  std::unordered_map<std::string, int64_t> ids_;
  std::unordered_map<uint64_t, MergeRule> merges_;  // (left id << 32 | right id) -> rule
  std::vector<int64_t> byte_ids_;                   // byte -> id of its symbol
  std::vector<int64_t> added_ids_;                  // id of options_.added_tokens[i]
  std::vector<bool> is_special_;                    // by id
  Gpt2TokenizerOptions options_;
  std::shared_ptr<WordCache> cache_;
};

}  // namespace dtlab::tokenizer
