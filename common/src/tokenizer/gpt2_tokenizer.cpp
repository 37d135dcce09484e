// GPT-2's byte-level BPE tokenizer as Hugging Face's GPT2TokenizerFast: see gpt2_tokenizer.h.
#include "dtlab/tokenizer/gpt2_tokenizer.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <queue>

#include <nlohmann/json.hpp>

#include "dtlab/core/error.h"
#include "dtlab/io/excerpt.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tokenizer/byte_level.h"
#include "dtlab/tokenizer/unicode.h"

namespace dtlab::tokenizer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kVocabFileName = "vocab.json";
constexpr const char* kMergesFileName = "merges.txt";
constexpr const char* kConfigFileName = "tokenizer_config.json";
constexpr const char* kSpecialTokensMapFileName = "special_tokens_map.json";
constexpr const char* kAddedTokensFileName = "added_tokens.json";
constexpr std::string_view kMergesHeader = "#version";
// tokenizers' BPE cache: this many words, each at most this many bytes.
constexpr size_t kCacheCapacity = 10000;
constexpr size_t kMaxCachedPieceBytes = 256;

// The special-token keys of a tokenizer config, in the order Hugging Face adds their tokens
// (SPECIAL_TOKENS_ATTRIBUTES less additional_special_tokens, which is a list).
constexpr std::array<const char*, 7> kSpecialTokenKeys = {
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};
constexpr const char* kAdditionalSpecialTokensKey = "additional_special_tokens";

// transformers' clean_up_tokenization, applied in this order, each to the previous result.
constexpr std::pair<std::string_view, std::string_view> kCleanUps[] = {
    {" .", "."},     {" ?", "?"},     {" !", "!"},     {" ,", ","},     {" ' ", "'"},
    {" n't", "n't"}, {" 'm", "'m"},   {" 's", "'s"},   {" 've", "'ve"}, {" 're", "'re"},
};

uint64_t pair_key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
}

// Python's str.replace: every non-overlapping occurrence, left to right.
std::string replace_all(const std::string& text, std::string_view from, std::string_view to) {
  std::string out;
  size_t start = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, start)) {
    out.append(text, start, at - start);
    out.append(to);
    start = at + from.size();
  }
  out.append(text, start, std::string::npos);
  return out;
}

// A stretch of text that is one added token (id >= 0) or holds none of those searched for.
struct AddedTokenSplit {
  std::string_view text;
  int64_t added_id = -1;
};

// Cuts plain text around the given added tokens: the leftmost match, the longest of those that
// start there (tokenizers' aho-corasick with LeftmostLongest).
void split_on_added(std::string_view text,
                    const std::vector<std::pair<std::string_view, int64_t>>& tokens,
                    std::vector<AddedTokenSplit>& out) {
  size_t plain_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t match_length = 0;
    int64_t match_id = -1;
    for (const auto& [content, id] : tokens) {
      if (content.size() > match_length && text.compare(i, content.size(), content) == 0) {
        match_length = content.size();
        match_id = id;
      }
    }
    if (match_length == 0) {
      ++i;
      continue;
    }
    if (i > plain_start) out.push_back({text.substr(plain_start, i - plain_start)});
    out.push_back({text.substr(i, match_length), match_id});
    i += match_length;
    plain_start = i;
  }
  if (plain_start < text.size()) out.push_back({text.substr(plain_start)});
}

// vocab.json: {"entry": id, ...} with the ids 0..N-1, each once.
std::vector<std::string> read_vocab_json(const std::string& text, const fs::path& path) {
  const nlohmann::json j = io::parse_json_text(text, path.string());
  if (!j.is_object() || j.empty())
    throw Error(path.string() + ": expected a non-empty JSON object {\"entry\": id, ...}");
  std::vector<std::string> vocab(j.size());
  std::vector<bool> seen(j.size(), false);
  for (const auto& [token, value] : j.items()) {
    if (!value.is_number_integer())
      throw Error(path.string() + ": the id of \"" + io::printable(token) +
                  "\" must be an integer, not " + io::json_excerpt(value));
    const int64_t id = value.get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(vocab.size()))
      throw Error(path.string() + ": \"" + io::printable(token) + "\" has id " + std::to_string(id) +
                  ", outside 0.." + std::to_string(vocab.size() - 1) +
                  " (the ids must number the entries from 0 without gaps)");
    if (seen[id])
      throw Error(path.string() + ": id " + std::to_string(id) + " is given to both \"" +
                  io::printable(vocab[id]) + "\" and \"" + io::printable(token) + "\"");
    seen[id] = true;
    vocab[id] = token;
  }
  return vocab;
}

// merges.txt as GPT-2's loader reads it: a header line, then "left right" per line.
std::vector<std::pair<std::string, std::string>> read_merges_txt(
    const std::string& text, const fs::path& path, const std::vector<std::string>& vocab) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    lines.push_back(std::string_view(text).substr(start, end == std::string::npos
                                                             ? std::string::npos
                                                             : end - start));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  const std::string file = path.string();
  if (lines.empty() || lines[0].substr(0, kMergesHeader.size()) != kMergesHeader)
    throw Error(file + ":1: expected the header line \"#version: 0.2\" that GPT-2's merges.txt "
                "starts with (Hugging Face skips the first line, whatever it holds)");
  if (text.back() != '\n')
    throw Error(file + ":" + std::to_string(lines.size()) +
                ": the last line has no newline at its end; Hugging Face's loader would drop "
                "it, so end it with a newline (or remove it)");

  std::unordered_map<std::string_view, int64_t> ids;
  for (size_t i = 0; i < vocab.size(); ++i) ids.emplace(vocab[i], static_cast<int64_t>(i));
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(lines.size());
  for (size_t n = 1; n < lines.size(); ++n) {
    const std::string where = file + ":" + std::to_string(n + 1) + ": ";
    // Python's split(): fields separated by runs of whitespace.
    std::vector<std::string_view> fields;
    const std::string_view line = lines[n];
    for (size_t i = 0; i < line.size();) {
      const size_t start = line.find_first_not_of(" \t\r\v\f", i);
      if (start == std::string_view::npos) break;
      const size_t end = std::min(line.find_first_of(" \t\r\v\f", start), line.size());
      fields.push_back(line.substr(start, end - start));
      i = end;
    }
    if (fields.size() != 2)
      throw Error(where + "expected two vocabulary entries separated by a space, got \"" +
                  io::printable(line) + "\"");
    for (std::string_view part : fields)
      if (!ids.count(part))
        throw Error(where + "\"" + io::printable(part) + "\" is not in " + kVocabFileName);
    const std::string merged = std::string(fields[0]) + std::string(fields[1]);
    if (!ids.count(merged))
      throw Error(where + "the merge's result \"" + io::printable(merged) + "\" is not in " +
                  kVocabFileName);
    merges.emplace_back(fields[0], fields[1]);
  }
  return merges;
}

// A token in a config: a string or an AddedToken object {"content": ...}; nullopt for null.
std::optional<std::string> token_content(const nlohmann::json& value, const std::string& where) {
  if (value.is_null()) return std::nullopt;
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value.at("content").is_string()) {
    for (const char* flag : {"lstrip", "rstrip", "single_word"})
      if (value.contains(flag) && value.at(flag).is_boolean() && value.at(flag).get<bool>())
        throw Error(where + ": " + flag + "=true is not supported (only whole-token matching)");
    return value.at("content").get<std::string>();
  }
  throw Error(where + " must be a string, null or {\"content\": string, ...}");
}

nlohmann::json read_optional_json(const std::optional<std::string>& text, const fs::path& path) {
  if (!text) return nlohmann::json::object();
  nlohmann::json j = io::parse_json_text(*text, path.string());
  if (!j.is_object()) throw Error(path.string() + ": expected a JSON object");
  return j;
}

// What from_pretrained needs besides the vocabulary: the added tokens, with the ids the files
// give them (checked once the tokenizer exists), and the decode setting.
struct AddedTokenFiles {
  Gpt2TokenizerOptions options;
  std::vector<std::tuple<std::string, int64_t, std::string>> given_ids;  // token, id, file
};

AddedTokenFiles read_added_tokens(const fs::path& dir, const Gpt2Tokenizer::Files& files) {
  const fs::path config_path = dir / kConfigFileName;
  const nlohmann::json config = read_optional_json(files.tokenizer_config_json, config_path);
  const std::string config_name = config_path.string();
  AddedTokenFiles out;
  if (config.contains("add_prefix_space") && config.at("add_prefix_space").is_boolean() &&
      config.at("add_prefix_space").get<bool>())
    throw Error(config_name + ": add_prefix_space=true is not supported");
  if (config.contains("clean_up_tokenization_spaces")) {
    if (!config.at("clean_up_tokenization_spaces").is_boolean())
      throw Error(config_name + ": \"clean_up_tokenization_spaces\" must be true or false");
    out.options.clean_up_tokenization_spaces =
        config.at("clean_up_tokenization_spaces").get<bool>();
  }

  // Special-token keys: what the config says, maybe overridden by special_tokens_map.json.
  std::map<std::string, nlohmann::json> keys;
  std::map<std::string, std::string> key_source;
  auto take_keys = [&](const nlohmann::json& j, const std::string& source) {
    for (const char* key : kSpecialTokenKeys) {
      if (!j.contains(key)) continue;
      keys[key] = j.at(key);
      key_source[key] = source;
    }
    if (j.contains(kAdditionalSpecialTokensKey)) {
      keys[kAdditionalSpecialTokensKey] = j.at(kAdditionalSpecialTokensKey);
      key_source[kAdditionalSpecialTokensKey] = source;
    }
  };
  take_keys(config, config_name);

  std::vector<std::pair<int64_t, AddedToken>> by_id;
  if (config.contains("added_tokens_decoder")) {
    const nlohmann::json& decoder = config.at("added_tokens_decoder");
    if (!decoder.is_object())
      throw Error(config_name + ": \"added_tokens_decoder\" must be an object {\"id\": token}");
    for (const auto& [id_text, value] : decoder.items()) {
      const std::string where =
          config_name + ": added_tokens_decoder[\"" + io::printable(id_text) + "\"]";
      int64_t id = -1;
      try {
        size_t used = 0;
        id = std::stoll(id_text, &used);
        if (used != id_text.size()) id = -1;
      } catch (const std::exception&) {
      }
      if (id < 0) throw Error(where + ": the key must be a token id");
      const std::optional<std::string> content = token_content(value, where);
      if (!content) throw Error(where + " must not be null");
      const bool special = value.is_object() && value.contains("special") &&
                           value.at("special").is_boolean() && value.at("special").get<bool>();
      by_id.push_back({id, {*content, special}});
      out.given_ids.emplace_back(*content, id, config_name);
    }
  } else {
    // Hugging Face's legacy path: only without added_tokens_decoder are these files read.
    const fs::path map_path = dir / kSpecialTokensMapFileName;
    take_keys(read_optional_json(files.special_tokens_map_json, map_path), map_path.string());
    const fs::path added_path = dir / kAddedTokensFileName;
    const nlohmann::json added_tokens = read_optional_json(files.added_tokens_json, added_path);
    for (const auto& [content, id] : added_tokens.items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0)
        throw Error(added_path.string() + ": the id of \"" + io::printable(content) +
                    "\" must be an integer");
      by_id.push_back({id.get<int64_t>(), {content, false}});
      out.given_ids.emplace_back(content, id.get<int64_t>(), added_path.string());
    }
  }
  std::stable_sort(by_id.begin(), by_id.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  std::vector<std::string> specials;
  for (const char* key : kSpecialTokenKeys) {
    const auto it = keys.find(key);
    if (it == keys.end()) {
      // GPT2TokenizerFast's own defaults.
      const std::string k = key;
      if (k == "bos_token" || k == "eos_token" || k == "unk_token")
        specials.emplace_back(kGpt2EndOfText);
      continue;
    }
    if (auto content = token_content(it->second, key_source[key] + ": \"" + key + "\""))
      specials.push_back(*content);
  }
  if (const auto it = keys.find(kAdditionalSpecialTokensKey); it != keys.end()) {
    const std::string where =
        key_source[kAdditionalSpecialTokensKey] + ": \"" + kAdditionalSpecialTokensKey + "\"";
    if (!it->second.is_null() && !it->second.is_array()) throw Error(where + " must be a list");
    if (it->second.is_array())
      for (const nlohmann::json& v : it->second)
        if (auto content = token_content(v, where)) specials.push_back(*content);
  }

  // Tokens of added_tokens.json are special when they are also special-token values.
  for (auto& [id, token] : by_id) {
    if (std::find(specials.begin(), specials.end(), token.content) != specials.end())
      token.special = true;
    out.options.added_tokens.push_back(token);
  }
  for (const std::string& s : specials) out.options.added_tokens.push_back({s, true});
  return out;
}

}  // namespace

// Note [Word cache]: the BPE of a piece depends only on the piece, and text repeats pieces
// ("Ġthe"), so results are kept as tokenizers keeps them: up to kCacheCapacity pieces, then no
// more are added. A mutex makes encode safe to call from several threads.
struct Gpt2Tokenizer::WordCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int64_t>> ids;
};

Gpt2Tokenizer::Gpt2Tokenizer(std::vector<std::string> vocab,
                             std::vector<std::pair<std::string, std::string>> merges,
                             Gpt2TokenizerOptions options)
    : tokens_(std::move(vocab)), cache_(std::make_shared<WordCache>()) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const auto [it, inserted] = ids_.emplace(tokens_[i], static_cast<int64_t>(i));
    if (!inserted)
      throw Error("vocabulary entry \"" + io::printable(tokens_[i]) + "\" appears twice (ids " +
                  std::to_string(it->second) + " and " + std::to_string(i) + ")");
  }
  for (int b = 0; b < byte_level::kByteCount; ++b) {
    const auto it = ids_.find(byte_level::byte_symbols()[b]);
    if (it == ids_.end()) {
      throw Error("the vocabulary lacks \"" + byte_level::byte_symbols()[b] +
                  "\", the byte-level symbol of byte " + std::to_string(b) +
                  ": a byte-level BPE vocabulary holds all 256 (see byte_level.h)");
    }
    byte_ids_.push_back(it->second);
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const std::string where = "merge " + std::to_string(rank + 1) + " (\"" +
                              io::printable(left + " " + right) + "\"): ";
    for (const std::string* part : {&left, &right})
      if (!ids_.count(*part))
        throw Error(where + "\"" + io::printable(*part) + "\" is not in the vocabulary");
    const auto result = ids_.find(left + right);
    if (result == ids_.end())
      throw Error(where + "the result \"" + io::printable(left + right) +
                  "\" is not in the vocabulary");
    // emplace keeps the first rank of a pair listed twice.
    merges_.emplace(pair_key(ids_.at(left), ids_.at(right)),
                    MergeRule{static_cast<int64_t>(rank), result->second});
  }
  is_special_.assign(tokens_.size(), false);

  options_.clean_up_tokenization_spaces = options.clean_up_tokenization_spaces;
  add_tokens(options.added_tokens);
}

void Gpt2Tokenizer::add_tokens(const std::vector<AddedToken>& tokens) {
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) throw Error("an added token is empty");
    // A repeated one counts once, with its first settings.
    if (std::any_of(options_.added_tokens.begin(), options_.added_tokens.end(),
                    [&](const AddedToken& t) { return t.content == token.content; }))
      continue;
    auto it = ids_.find(token.content);
    if (it == ids_.end()) {
      it = ids_.emplace(token.content, static_cast<int64_t>(tokens_.size())).first;
      tokens_.push_back(token.content);
      is_special_.push_back(false);
    }
    options_.added_tokens.push_back(token);
    added_ids_.push_back(it->second);
    if (token.special) is_special_[it->second] = true;
  }
}

Gpt2Tokenizer Gpt2Tokenizer::from_pretrained(const fs::path& dir) {
  const fs::path vocab_path = dir / kVocabFileName;
  const fs::path merges_path = dir / kMergesFileName;
  for (const fs::path& p : {vocab_path, merges_path}) {
    if (!fs::is_regular_file(p)) {
      throw Error(p.string() + " does not exist: " + dir.string() + " must hold vocab.json and "
                  "merges.txt (as GPT2TokenizerFast.save_pretrained, ByteLevelBPETokenizer."
                  "save_model or dtlab's BPE trainer write them; a tokenizer.json alone is not "
                  "read)");
    }
  }
  Files files;
  files.vocab_json = io::read_file(vocab_path);
  files.merges_txt = io::read_file(merges_path);
  auto read_if_present = [&](const char* name, std::optional<std::string>& text) {
    if (fs::exists(dir / name)) text = io::read_file(dir / name);
  };
  read_if_present(kConfigFileName, files.tokenizer_config_json);
  read_if_present(kSpecialTokensMapFileName, files.special_tokens_map_json);
  read_if_present(kAddedTokensFileName, files.added_tokens_json);
  return from_texts(dir, files);
}

Gpt2Tokenizer Gpt2Tokenizer::from_texts(const fs::path& dir, const Files& files) {
  std::vector<std::string> vocab = read_vocab_json(files.vocab_json, dir / kVocabFileName);
  auto merges = read_merges_txt(files.merges_txt, dir / kMergesFileName, vocab);
  AddedTokenFiles added = read_added_tokens(dir, files);
  Gpt2Tokenizer tokenizer(std::move(vocab), std::move(merges), std::move(added.options));
  for (const auto& [content, id, file] : added.given_ids) {
    const int64_t actual = tokenizer.token_to_id(content).value_or(-1);
    if (actual != id)
      throw Error(file + ": added token \"" + io::printable(content) + "\" has id " + std::to_string(id) +
                  " there, but " + std::to_string(actual) + " with " + kVocabFileName +
                  " (tokens not in the vocabulary follow it in order)");
  }
  return tokenizer;
}

std::vector<int64_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  if (unicode::is_valid_utf8(text)) {
    encode_text(text, ids);
  } else {
    encode_text(byte_level::utf8_lossy(text), ids);
  }
  return ids;
}

std::vector<std::string> Gpt2Tokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> tokens;
  for (int64_t id : encode(text)) tokens.push_back(tokens_[id]);
  return tokens;
}

void Gpt2Tokenizer::encode_text(std::string_view text, std::vector<int64_t>& ids) const {
  // Special tokens are cut out first, then the others in what is left (tokenizers'
  // AddedVocabulary does two passes the same way).
  std::vector<std::pair<std::string_view, int64_t>> specials, others;
  for (size_t i = 0; i < added_ids_.size(); ++i)
    (options_.added_tokens[i].special ? specials : others)
        .emplace_back(options_.added_tokens[i].content, added_ids_[i]);
  std::vector<AddedTokenSplit> first, segments;
  split_on_added(text, specials, first);
  for (const AddedTokenSplit& s : first) {
    if (s.added_id >= 0) {
      segments.push_back(s);
    } else {
      split_on_added(s.text, others, segments);
    }
  }
  for (const AddedTokenSplit& s : segments) {
    if (s.added_id >= 0) {
      ids.push_back(s.added_id);
      continue;
    }
    for (const std::string& piece : byte_level::pre_tokenize(s.text)) encode_piece(piece, ids);
  }
}

void Gpt2Tokenizer::encode_piece(const std::string& piece, std::vector<int64_t>& ids) const {
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    const auto it = cache_->ids.find(piece);
    if (it != cache_->ids.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> piece_ids = bpe(piece);
  ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (cache_->ids.size() < kCacheCapacity) cache_->ids.emplace(piece, std::move(piece_ids));
  }
}

const Gpt2Tokenizer::MergeRule* Gpt2Tokenizer::find_merge(int64_t left, int64_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

std::vector<int64_t> Gpt2Tokenizer::bpe(const std::string& piece) const {
  // tokenizers' Word::merge_all: symbols in a linked list, candidate merges in a queue by
  // (rank, position); an entry whose pair has changed since it was queued is skipped.
  struct Symbol {
    int64_t id;
    int64_t prev, next;  // -1 at the ends
    bool removed = false;
  };
  struct Candidate {
    int64_t rank, pos, result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const int64_t n = static_cast<int64_t>(piece.size());
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (int64_t i = 0; i < n; ++i)
    symbols.push_back({byte_ids_[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1});

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int64_t pos) {
    const int64_t next = symbols[pos].next;
    if (next < 0) return;
    if (const MergeRule* rule = find_merge(symbols[pos].id, symbols[next].id))
      queue.push({rule->rank, pos, rule->result});
  };
  for (int64_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.removed || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const MergeRule* rule = find_merge(left.id, right.id);
    if (rule == nullptr || rule->result != top.result) continue;  // expired
    left.id = top.result;
    right.removed = true;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  std::vector<int64_t> ids;
  for (const Symbol& s : symbols)
    if (!s.removed) ids.push_back(s.id);
  return ids;
}

std::string Gpt2Tokenizer::decode(const std::vector<int64_t>& ids,
                                  const DecodeOptions& options) const {
  std::string bytes;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    if (options.skip_special_tokens && is_special_[id]) continue;
    // tokenizers' ByteLevel decoder: a token made only of byte-level symbols becomes their
    // bytes; any other token (an added one with other characters) is taken as it is.
    const std::string& token = tokens_[id];
    std::string token_bytes;
    bool all_symbols = true;
    for (char32_t c : unicode::decode_utf8(token)) {
      const std::optional<uint8_t> b = byte_level::symbol_byte(c);
      if (!b) {
        all_symbols = false;
        break;
      }
      token_bytes.push_back(static_cast<char>(*b));
    }
    bytes += all_symbols ? token_bytes : token;
  }
  std::string text = byte_level::utf8_lossy(bytes);
  if (options.clean_up_tokenization_spaces.value_or(options_.clean_up_tokenization_spaces))
    for (const auto& [from, to] : kCleanUps) text = replace_all(text, from, to);
  return text;
}

std::optional<int64_t> Gpt2Tokenizer::token_to_id(std::string_view token) const {
  const auto it = ids_.find(std::string(token));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Gpt2Tokenizer::id_to_token(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return std::nullopt;
  return tokens_[id];
}

}  // namespace dtlab::tokenizer
