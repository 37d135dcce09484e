// Hugging Face's slow BertTokenizer (transformers 4.40) in C++: see bert_tokenizer.h.
#include "dtlab/tokenizer/bert_tokenizer.h"

#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "dtlab/core/error.h"
#include "dtlab/io/excerpt.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tokenizer/unicode.h"

namespace dtlab::tokenizer {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kContinuationPrefix = "##";
constexpr const char* kBertVocabFile = "vocab.txt";
constexpr const char* kBertConfigFile = "tokenizer_config.json";
constexpr int kSpecialTokensOfSingle = 2;  // [CLS] a [SEP]
constexpr int kSpecialTokensOfPair = 3;    // [CLS] a [SEP] b [SEP]
constexpr char32_t kNul = 0x0000;
constexpr char32_t kReplacementCharacter = 0xFFFD;

// A stretch of text that either is exactly one special token or holds none.
struct SpecialTokenSplit {
  std::u32string text;
  bool special = false;
};

// Cuts text around special tokens, leftmost match first and the longest one where several
// start at the same place, as transformers' Trie.split does before any other processing.
std::vector<SpecialTokenSplit> split_on_special_tokens(std::u32string_view text,
                                             const std::vector<std::u32string>& specials) {
  std::vector<SpecialTokenSplit> out;
  size_t plain_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t match = 0;
    for (const std::u32string& s : specials)
      if (s.size() > match && text.compare(i, s.size(), s) == 0) match = s.size();
    if (match == 0) {
      ++i;
      continue;
    }
    if (i > plain_start) out.push_back({std::u32string(text.substr(plain_start, i - plain_start))});
    out.push_back({std::u32string(text.substr(i, match)), true});
    i += match;
    plain_start = i;
  }
  if (plain_start < text.size()) out.push_back({std::u32string(text.substr(plain_start))});
  return out;
}

// Python's str.split(): runs of whitespace separate words, empty words are dropped.
std::vector<std::u32string> split_on_python_space(std::u32string_view text) {
  std::vector<std::u32string> words;
  std::u32string word;
  for (char32_t c : text) {
    if (unicode::is_python_space(c)) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word.push_back(c);
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// Every punctuation character becomes a word of its own (_run_split_on_punc).
void split_on_punctuation(const std::u32string& word, std::vector<std::u32string>& out) {
  std::u32string current;
  for (char32_t c : word) {
    if (unicode::is_punctuation(c)) {
      if (!current.empty()) out.push_back(std::move(current));
      current.clear();
      out.push_back(std::u32string(1, c));
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) out.push_back(std::move(current));
}

// The lines of vocab.txt as Python's text-mode readlines() sees them: "\n", "\r\n" and a lone
// "\r" all end a line (universal newlines), and an empty line is a token like any other.
std::vector<std::string> split_vocab_lines(std::string_view bytes, const fs::path& path) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = bytes.find_first_of("\r\n", start);
    if (end == std::string_view::npos) {
      lines.emplace_back(bytes.substr(start));
      break;
    }
    lines.emplace_back(bytes.substr(start, end - start));
    start = end + (bytes.compare(end, 2, "\r\n") == 0 ? 2 : 1);
  }
  // Python would fail to decode the file; we say where.
  for (size_t i = 0; i < lines.size(); ++i)
    if (!unicode::is_valid_utf8(lines[i]))
      throw Error(path.string() + ":" + std::to_string(i + 1) + ": not valid UTF-8");
  return lines;
}

// Entries such as "[CLS]" or "[unused0]" are markers, not text, and say nothing about casing.
bool is_bracketed_marker(const std::string& entry) {
  return entry.size() >= 2 && entry.front() == '[' && entry.back() == ']';
}

// An uncased vocabulary was built from lower-cased text, so it has no upper-case letters.
bool vocabulary_looks_uncased(const std::vector<std::string>& vocab) {
  for (const std::string& entry : vocab) {
    if (is_bracketed_marker(entry)) continue;
    std::string_view text = entry;
    if (text.substr(0, kContinuationPrefix.size()) == kContinuationPrefix)
      text.remove_prefix(kContinuationPrefix.size());
    for (char32_t c : unicode::decode_utf8(text))
      if (unicode::is_upper_case_letter(c)) return false;
  }
  return true;
}

// Reads an optional boolean; JSON null counts as absent, as None does in Hugging Face.
std::optional<bool> optional_bool(const nlohmann::json& config, const char* key,
                                  const fs::path& path) {
  if (!config.contains(key) || config.at(key).is_null()) return std::nullopt;
  if (!config.at(key).is_boolean())
    throw Error(path.string() + ": \"" + key + "\" must be true, false or null");
  return config.at(key).get<bool>();
}

// Special tokens are saved either as strings or as AddedToken objects {"content": ...}.
void read_token(const nlohmann::json& config, const char* key, const fs::path& path,
                std::string& token) {
  if (!config.contains(key) || config.at(key).is_null()) return;
  const nlohmann::json& value = config.at(key);
  if (value.is_string()) {
    token = value.get<std::string>();
  } else if (value.is_object() && value.contains("content") && value.at("content").is_string()) {
    token = value.at("content").get<std::string>();
  } else {
    throw Error(path.string() + ": \"" + key + "\" must be a string or {\"content\": string}");
  }
}

}  // namespace

BertTokenizer::BertTokenizer(std::vector<std::string> vocab, BertTokenizerOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  // A repeated entry maps to its last line, as in Hugging Face's dict-based vocabulary.
  for (size_t i = 0; i < vocab_.size(); ++i) ids_[vocab_[i]] = static_cast<int64_t>(i);
  auto id_of = [&](const std::string& token, const char* role) {
    const auto it = ids_.find(token);
    if (it == ids_.end())
      throw Error(std::string(role) + " \"" + io::printable(token) + "\" is not in the vocabulary (" +
                  std::to_string(vocab_.size()) + " entries)");
    return it->second;
  };
  unk_id_ = id_of(options_.unk_token, "unk_token");
  sep_id_ = id_of(options_.sep_token, "sep_token");
  pad_id_ = id_of(options_.pad_token, "pad_token");
  cls_id_ = id_of(options_.cls_token, "cls_token");
  id_of(options_.mask_token, "mask_token");
  for (const std::string* token : {&options_.unk_token, &options_.sep_token, &options_.pad_token,
                                   &options_.cls_token, &options_.mask_token}) {
    std::u32string decoded = unicode::decode_utf8(*token);
    if (!decoded.empty() && !is_special_token(decoded)) special_tokens_.push_back(decoded);
  }
}

BertTokenizer BertTokenizer::from_pretrained(const fs::path& dir) {
  const fs::path vocab_path = dir / kBertVocabFile;
  if (!fs::is_regular_file(vocab_path)) {
    throw Error(vocab_path.string() + " does not exist: the tokenizer folder must be a Hugging "
                "Face BERT folder (vocab.txt, optionally tokenizer_config.json), or run "
                "dtlab-fixtures to make the offline one");
  }
  const fs::path config_path = dir / kBertConfigFile;
  std::optional<std::string> config_text;
  if (fs::exists(config_path)) config_text = io::read_file(config_path);
  return from_texts(dir, io::read_file(vocab_path), config_text);
}

BertTokenizer BertTokenizer::from_texts(const fs::path& dir, std::string_view vocab_txt,
                                        const std::optional<std::string>& tokenizer_config_json) {
  const fs::path vocab_path = dir / kBertVocabFile;
  std::vector<std::string> vocab = split_vocab_lines(vocab_txt, vocab_path);

  BertTokenizerOptions options;
  std::optional<bool> do_lower_case;
  const fs::path config_path = dir / kBertConfigFile;
  if (tokenizer_config_json) {
    const nlohmann::json config = io::parse_json_text(*tokenizer_config_json, config_path.string());
    if (!config.is_object()) throw Error(config_path.string() + ": expected a JSON object");
    do_lower_case = optional_bool(config, "do_lower_case", config_path);
    options.strip_accents = optional_bool(config, "strip_accents", config_path);
    options.tokenize_chinese_chars =
        optional_bool(config, "tokenize_chinese_chars", config_path).value_or(true);
    // Settings that would change the result but that this tokenizer does not implement.
    if (!optional_bool(config, "do_basic_tokenize", config_path).value_or(true))
      throw Error(config_path.string() + ": do_basic_tokenize=false is not supported");
    if (config.contains("never_split") && !config.at("never_split").is_null() &&
        !config.at("never_split").empty())
      throw Error(config_path.string() + ": never_split is not supported");
    read_token(config, "unk_token", config_path, options.unk_token);
    read_token(config, "sep_token", config_path, options.sep_token);
    read_token(config, "pad_token", config_path, options.pad_token);
    read_token(config, "cls_token", config_path, options.cls_token);
    read_token(config, "mask_token", config_path, options.mask_token);
  }
  // Hugging Face would default to true; a cased vocabulary lower-cased would lose every
  // upper-case entry, so we look at the vocabulary instead.
  options.do_lower_case = do_lower_case.value_or(vocabulary_looks_uncased(vocab));
  return BertTokenizer(std::move(vocab), std::move(options));
}

bool BertTokenizer::is_special_token(std::u32string_view token) const {
  return std::find(special_tokens_.begin(), special_tokens_.end(), token) != special_tokens_.end();
}

std::vector<std::string> BertTokenizer::tokenize(std::string_view text) const {
  std::u32string chars = unicode::decode_utf8(text);
  if (options_.do_lower_case) {
    // PreTrainedTokenizer.tokenize lower-cases everything but the special tokens before it
    // looks for them, one character at a time (a regex matching ".+?"): so "[sep]" is not
    // [SEP], and Python's final-sigma rule never applies (a lone "Σ" lowers to "σ").
    std::u32string lowered;
    for (const SpecialTokenSplit& s : split_on_special_tokens(chars, special_tokens_))
      lowered += s.special ? s.text : unicode::to_lower(s.text);
    chars = std::move(lowered);
  }
  std::vector<std::string> pieces;
  for (const SpecialTokenSplit& segment : split_on_special_tokens(chars, special_tokens_)) {
    if (segment.special) {
      pieces.push_back(unicode::encode_utf8(segment.text));
      continue;
    }
    for (const std::u32string& word : basic_tokenize(segment.text)) wordpiece(word, pieces);
  }
  return pieces;
}

std::vector<std::u32string> BertTokenizer::basic_tokenize(std::u32string_view text) const {
  // _clean_text: drop NUL, U+FFFD and control characters; every whitespace becomes a space.
  std::u32string cleaned;
  cleaned.reserve(text.size());
  for (char32_t c : text) {
    if (c == kNul || c == kReplacementCharacter || unicode::is_control(c)) continue;
    cleaned.push_back(unicode::is_whitespace(c) ? U' ' : c);
  }
  // _tokenize_chinese_chars: each CJK ideograph becomes a word of its own.
  std::u32string spaced;
  spaced.reserve(cleaned.size());
  for (char32_t c : cleaned) {
    if (options_.tokenize_chinese_chars && unicode::is_chinese_char(c)) {
      spaced.push_back(U' ');
      spaced.push_back(c);
      spaced.push_back(U' ');
    } else {
      spaced.push_back(c);
    }
  }
  // NFC so that "é" typed as e + U+0301 and as U+00E9 look up the same vocabulary entry.
  const bool strip = options_.strip_accents.value_or(options_.do_lower_case);
  std::vector<std::u32string> split;
  for (std::u32string& word : split_on_python_space(unicode::nfc(spaced))) {
    // A special token can surface only here (e.g. "[MA\u200BSK]" once U+200B is dropped);
    // like Hugging Face's never_split it is then neither lower-cased nor split.
    if (is_special_token(word)) {
      split.push_back(std::move(word));
      continue;
    }
    if (options_.do_lower_case) word = unicode::to_lower(word);
    if (strip) word = unicode::strip_accents(word);
    split_on_punctuation(word, split);
  }
  // Hugging Face re-splits the joined result on whitespace; only empty words can change here.
  std::vector<std::u32string> words;
  for (const std::u32string& w : split)
    for (std::u32string& part : split_on_python_space(w)) words.push_back(std::move(part));
  return words;
}

void BertTokenizer::wordpiece(const std::u32string& word, std::vector<std::string>& out) const {
  if (static_cast<int64_t>(word.size()) > options_.max_input_chars_per_word) {
    out.push_back(options_.unk_token);
    return;
  }
  // Byte offset of each code point, so that candidate pieces are plain substrings.
  const size_t n = word.size();
  std::string utf8;
  std::vector<size_t> offset(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    offset[i] = utf8.size();
    utf8 += unicode::encode_utf8(word.substr(i, 1));
  }
  offset[n] = utf8.size();

  std::vector<std::string> pieces;
  size_t start = 0;
  while (start < n) {
    // Greedy: the longest vocabulary entry that starts here; "##" marks a continuation.
    std::string found;
    size_t end = n;
    for (; end > start; --end) {
      std::string candidate = start > 0 ? std::string(kContinuationPrefix) : std::string();
      candidate += utf8.substr(offset[start], offset[end] - offset[start]);
      if (ids_.count(candidate)) {
        found = std::move(candidate);
        break;
      }
    }
    if (end == start) {
      // One position without any match makes the whole word unknown, not just that part.
      out.push_back(options_.unk_token);
      return;
    }
    pieces.push_back(std::move(found));
    start = end;
  }
  out.insert(out.end(), std::make_move_iterator(pieces.begin()),
             std::make_move_iterator(pieces.end()));
}

int64_t BertTokenizer::token_to_id(std::string_view token) const {
  const auto it = ids_.find(std::string(token));
  return it == ids_.end() ? unk_id_ : it->second;
}

const std::string& BertTokenizer::id_to_token(int64_t id) const {
  // Out of range, or a line shadowed by a later duplicate: unk_token, as Hugging Face does.
  if (id < 0 || id >= vocab_size()) return options_.unk_token;
  const std::string& token = vocab_[static_cast<size_t>(id)];
  return ids_.at(token) == id ? token : options_.unk_token;
}

std::vector<int64_t> BertTokenizer::convert_tokens_to_ids(
    const std::vector<std::string>& tokens) const {
  std::vector<int64_t> ids;
  ids.reserve(tokens.size());
  for (const std::string& t : tokens) ids.push_back(token_to_id(t));
  return ids;
}

Encoding BertTokenizer::encode(std::string_view a, std::optional<std::string_view> b,
                               int max_length) const {
  const int specials = b ? kSpecialTokensOfPair : kSpecialTokensOfSingle;
  if (max_length < specials) {
    throw Error("max_length " + std::to_string(max_length) + " cannot hold the " +
                std::to_string(specials) + " special tokens of " +
                (b ? "a sentence pair ([CLS] a [SEP] b [SEP])" : "a sentence ([CLS] a [SEP])"));
  }
  std::vector<int64_t> ids_a = convert_tokens_to_ids(tokenize(a));
  std::vector<int64_t> ids_b = b ? convert_tokens_to_ids(tokenize(*b)) : std::vector<int64_t>{};
  const int64_t len_a = static_cast<int64_t>(ids_a.size());
  const int64_t len_b = static_cast<int64_t>(ids_b.size());
  const int64_t excess = len_a + len_b + specials - max_length;
  if (excess > 0) {
    // truncate_sequences(longest_first) of transformers 4.40: first the difference in length
    // comes off the longer segment, then the rest is split evenly, the odd token from b.
    const int64_t first_remove = std::min(std::abs(len_b - len_a), excess);
    const int64_t second_remove = excess - first_remove;
    int64_t remove_a = 0;
    int64_t remove_b = 0;
    if (len_a > len_b) {
      remove_a = first_remove + second_remove / 2;
      remove_b = second_remove - second_remove / 2;
    } else {
      remove_a = second_remove / 2;
      remove_b = first_remove + second_remove - second_remove / 2;
    }
    ids_a.resize(static_cast<size_t>(len_a - remove_a));
    ids_b.resize(static_cast<size_t>(len_b - remove_b));
  }

  Encoding e;
  e.input_ids.reserve(static_cast<size_t>(max_length));
  e.input_ids.push_back(cls_id_);
  e.input_ids.insert(e.input_ids.end(), ids_a.begin(), ids_a.end());
  e.input_ids.push_back(sep_id_);
  e.token_type_ids.assign(e.input_ids.size(), 0);
  if (b) {
    e.input_ids.insert(e.input_ids.end(), ids_b.begin(), ids_b.end());
    e.input_ids.push_back(sep_id_);
    e.token_type_ids.resize(e.input_ids.size(), 1);
  }
  e.attention_mask.assign(e.input_ids.size(), 1);
  const size_t padded = static_cast<size_t>(max_length);
  e.input_ids.resize(padded, pad_id_);
  e.token_type_ids.resize(padded, 0);
  e.attention_mask.resize(padded, 0);
  return e;
}

}  // namespace dtlab::tokenizer
