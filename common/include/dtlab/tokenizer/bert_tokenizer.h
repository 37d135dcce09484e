// The tokenizer of Hugging Face's BertTokenizer (the "slow", Python one, which is the
// reference): basic tokenisation, then greedy longest-match-first WordPiece, then the
// sentence-pair layout [CLS] A [SEP] B [SEP] with token_type_ids, truncation and padding.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dtlab::tokenizer {

struct BertTokenizerOptions {
  bool do_lower_case = true;
  // Unset: strip accents exactly when lower-casing (Hugging Face's strip_accents=None).
  std::optional<bool> strip_accents;
  bool tokenize_chinese_chars = true;
  int max_input_chars_per_word = 100;
  std::string unk_token = "[UNK]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  std::string cls_token = "[CLS]";
  std::string mask_token = "[MASK]";
};

// One encoded example, padded to the requested length.
struct Encoding {
  std::vector<int64_t> input_ids;
  std::vector<int64_t> token_type_ids;
  std::vector<int64_t> attention_mask;  // 1 for real tokens, 0 for padding
};

class BertTokenizer {
 public:
  // vocab: one token per id, in id order (the lines of vocab.txt). Throws dtlab::Error when a
  // special token of options is missing from the vocabulary.
  BertTokenizer(std::vector<std::string> vocab, BertTokenizerOptions options);

  // Reads DIR/vocab.txt and, when present, DIR/tokenizer_config.json (do_lower_case,
  // strip_accents, tokenize_chinese_chars, special tokens as strings or {"content": ...}).
  // vocab.txt is read as Python's load_vocab reads it: "\n", "\r\n" and a lone "\r" end a line,
  // and an empty line is a token (it takes an id). Without do_lower_case in the config,
  // lower-casing is inferred (Hugging Face would assume true): on when no ordinary vocabulary
  // entry (ignoring "[...]" markers and the "##" prefix) has an upper-case letter.
  // A missing vocab.txt is a dtlab::Error that says what DIR must hold; so are invalid UTF-8 in
  // vocab.txt and config settings this class does not implement (do_basic_tokenize=false,
  // never_split).
  static BertTokenizer from_pretrained(const std::filesystem::path& dir);

  // What from_pretrained does once it has read the files: the text of vocab.txt and of
  // tokenizer_config.json (nullopt: no such file); dir names them in errors. The fuzz harness
  // (fuzz/bert_tokenizer.cpp) calls this.
  static BertTokenizer from_texts(const std::filesystem::path& dir, std::string_view vocab_txt,
                                  const std::optional<std::string>& tokenizer_config_json);

  // Text to word pieces ("unaffable" -> "una", "##ffa", "##ble"). Special tokens written in
  // the text ("[SEP]", "[MASK]", ...) stay whole, as in Hugging Face; they are matched before
  // anything else, case-sensitively, so "[sep]" is ordinary text even when lower-casing.
  // Lower-casing is Python's str.lower one character at a time, as Hugging Face applies it
  // ("İ" becomes "i" + U+0307; "Σ" always "σ", never the word-final "ς").
  // Invalid UTF-8 bytes are read as U+FFFD, which cleaning drops like Python would.
  std::vector<std::string> tokenize(std::string_view text) const;

  // Token to id; unknown tokens map to the id of unk_token. A token repeated in the vocabulary
  // has the id of its last line, and id_to_token of an earlier line (or of an id out of range)
  // is unk_token, as with Hugging Face's dictionaries.
  int64_t token_to_id(std::string_view token) const;
  const std::string& id_to_token(int64_t id) const;
  std::vector<int64_t> convert_tokens_to_ids(const std::vector<std::string>& tokens) const;

  // [CLS] a [SEP] (b [SEP]) with token_type_ids 0 for the first segment (with [CLS] and its
  // [SEP]) and 1 for the second. When the result exceeds max_length by n tokens, they come off
  // the ends of the segments as in transformers 4.40's truncate_sequences("longest_first"):
  // first min(n, |len a - len b|) from the longer one, then the rest shared evenly, the odd
  // token from b. (Older versions removed one token at a time from the longer segment, from b
  // on a tie; that gives the same result.) Then padded with pad_token to exactly max_length.
  // Throws dtlab::Error if max_length cannot hold the special tokens (2, or 3 for a pair).
  // One deliberate difference: for a single sentence and max_length == 2, Hugging Face logs an
  // error and returns the sentence untruncated (longer than max_length); we return [CLS] [SEP].
  Encoding encode(std::string_view a, std::optional<std::string_view> b, int max_length) const;

  // Lines of vocab.txt, so ids run from 0 to vocab_size() - 1 (Hugging Face's len(vocab) would
  // not count a repeated entry twice).
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }
  const BertTokenizerOptions& options() const { return options_; }
  int64_t pad_id() const { return pad_id_; }
  int64_t cls_id() const { return cls_id_; }
  int64_t sep_id() const { return sep_id_; }
  int64_t unk_id() const { return unk_id_; }

 private:
  // Hugging Face's BasicTokenizer on text without special tokens: words and punctuation.
  std::vector<std::u32string> basic_tokenize(std::u32string_view text) const;
  // Appends the word pieces of one word, or unk_token.
  void wordpiece(const std::u32string& word, std::vector<std::string>& out) const;
  bool is_special_token(std::u32string_view token) const;

  std::vector<std::string> vocab_;
  std::vector<std::u32string> special_tokens_;  // never lower-cased or split
  std::unordered_map<std::string, int64_t> ids_;
  BertTokenizerOptions options_;
  int64_t pad_id_ = 0, cls_id_ = 0, sep_id_ = 0, unk_id_ = 0;
};

}  // namespace dtlab::tokenizer
