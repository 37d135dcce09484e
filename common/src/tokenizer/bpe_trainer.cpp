// Byte-level BPE training as tokenizers' BpeTrainer does it: see bpe_trainer.h.
#include "dtlab/tokenizer/bpe_trainer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "dtlab/core/error.h"
#include "dtlab/io/excerpt.h"
#include "dtlab/io/file.h"
#include "dtlab/tokenizer/byte_level.h"
#include "dtlab/tokenizer/unicode.h"

namespace dtlab::tokenizer {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMergesFirstLine = "#version: 0.2\n";

using Pair = uint64_t;  // left id << 32 | right id: ordering these orders pairs left id first

Pair make_pair_key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
}
int64_t left_of(Pair p) { return static_cast<int64_t>(p >> 32); }
int64_t right_of(Pair p) { return static_cast<int64_t>(p & 0xFFFFFFFFu); }

// A candidate merge in the heap: its count when queued and the words it was seen in.
struct Candidate {
  int64_t count;
  Pair pair;
  std::vector<int32_t> words;
};

// Heap order: the highest count on top, then the smallest pair (tokenizers' Merge::cmp).
bool lower_priority(const Candidate& a, const Candidate& b) {
  if (a.count != b.count) return a.count < b.count;
  return a.pair > b.pair;
}

struct Change {
  Pair pair;
  int delta;  // +1 or -1 occurrence in this word
};

// tokenizers' Word::merge: replaces each (left, right), scanning left to right without
// overlap, and reports how the counts of the neighbouring pairs change. The merged pair's own
// count is left alone (see Note [BPE training order]).
void merge_word(std::vector<int32_t>& symbols, int32_t left, int32_t right, int32_t merged,
                std::vector<Change>& changes) {
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (symbols[i] != left || i + 1 >= symbols.size() || symbols[i + 1] != right) continue;
    if (i > 0) {
      changes.push_back({make_pair_key(symbols[i - 1], left), -1});
      changes.push_back({make_pair_key(symbols[i - 1], merged), +1});
    }
    symbols[i] = merged;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    if (i + 1 < symbols.size()) {
      changes.push_back({make_pair_key(right, symbols[i + 1]), -1});
      changes.push_back({make_pair_key(merged, symbols[i + 1]), +1});
    }
  }
}

// Adds word to the list of a pair unless it is already the last one (words are visited in
// order, so that keeps each list free of repeats).
void note_word(std::vector<int32_t>& words, int32_t word) {
  if (words.empty() || words.back() != word) words.push_back(word);
}

// The 256 byte symbols in code-point order (tokenizers sorts its alphabet by char).
std::vector<int> bytes_by_symbol_code_point() {
  std::vector<std::pair<char32_t, int>> order;
  for (int b = 0; b < byte_level::kByteCount; ++b)
    order.emplace_back(unicode::decode_utf8(byte_level::byte_symbols()[b]).at(0), b);
  std::sort(order.begin(), order.end());
  std::vector<int> bytes;
  for (const auto& entry : order) bytes.push_back(entry.second);
  return bytes;
}

}  // namespace

BpeTrainer::BpeTrainer(BpeTrainerOptions options) : options_(std::move(options)) {}

void BpeTrainer::feed(std::string_view line) {
  for (std::string& word : byte_level::pre_tokenize(line)) {
    auto [it, inserted] = word_counts_.emplace(std::move(word), 0);
    if (inserted) word_order_.push_back(it->first);
    ++it->second;
  }
}

void BpeTrainer::feed(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) feed(line);
}

TrainedBpe BpeTrainer::train() const {
  if (options_.vocab_size < 1)
    throw Error("BPE training: vocab_size must be at least 1, not " +
                std::to_string(options_.vocab_size));
  if (options_.min_frequency < 0)
    throw Error("BPE training: min_frequency must be at least 0, not " +
                std::to_string(options_.min_frequency));
  TrainedBpe out;
  out.special_tokens = options_.special_tokens;
  std::unordered_map<std::string, int32_t> ids;
  auto add_entry = [&](const std::string& entry) {
    const auto [it, inserted] = ids.emplace(entry, static_cast<int32_t>(out.vocab.size()));
    if (inserted) out.vocab.push_back(entry);
    return it->second;
  };

  // 1. Special tokens, then the byte symbols.
  for (const std::string& token : options_.special_tokens) {
    if (token.empty()) throw Error("BPE training: a special token is empty");
    if (!unicode::is_valid_utf8(token))
      throw Error("BPE training: special token \"" + io::printable(token) +
                  "\" is not valid UTF-8");
    add_entry(token);
  }
  std::vector<int32_t> byte_id(byte_level::kByteCount);
  for (int b : bytes_by_symbol_code_point()) byte_id[b] = add_entry(byte_level::byte_symbols()[b]);

  // 2. Words as symbol ids, and the initial pair counts.
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  words.reserve(word_order_.size());
  for (const std::string& word : word_order_) {
    std::vector<int32_t> symbols;
    symbols.reserve(word.size());
    for (char c : word) symbols.push_back(byte_id[static_cast<uint8_t>(c)]);
    words.push_back(std::move(symbols));
    counts.push_back(word_counts_.at(word));
  }
  std::unordered_map<Pair, int64_t> pair_counts;
  std::unordered_map<Pair, std::vector<int32_t>> pair_words;
  for (size_t w = 0; w < words.size(); ++w) {
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const Pair p = make_pair_key(words[w][i], words[w][i + 1]);
      pair_counts[p] += counts[w];
      note_word(pair_words[p], static_cast<int32_t>(w));
    }
  }
  std::vector<Candidate> heap;
  heap.reserve(pair_words.size());
  auto push = [&](Candidate c) {
    heap.push_back(std::move(c));
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  };
  auto queue_words = [&] {
    for (auto& [pair, list] : pair_words) {
      const int64_t count = pair_counts[pair];
      if (count > 0) push({count, pair, std::move(list)});
    }
    pair_words.clear();
  };
  queue_words();

  // 3. and 4. Merge the best pair until the vocabulary is full or no pair is frequent enough.
  std::vector<Pair> merged_pairs;
  std::vector<Change> changes;
  while (static_cast<int64_t>(out.vocab.size()) < options_.vocab_size && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    Candidate top = std::move(heap.back());
    heap.pop_back();
    const int64_t current = pair_counts[top.pair];
    if (top.count != current) {
      // Queued before later merges changed its count: requeue it with the count it has now.
      top.count = current;
      push(std::move(top));
      continue;
    }
    if (top.count < 1 || top.count < options_.min_frequency) break;

    const int32_t left = static_cast<int32_t>(left_of(top.pair));
    const int32_t right = static_cast<int32_t>(right_of(top.pair));
    const int32_t merged = add_entry(out.vocab[left] + out.vocab[right]);
    merged_pairs.push_back(top.pair);
    for (int32_t w : top.words) {
      changes.clear();
      merge_word(words[w], left, right, merged, changes);
      for (const Change& c : changes) {
        pair_counts[c.pair] += c.delta * counts[w];
        if (c.delta > 0) note_word(pair_words[c.pair], w);
      }
    }
    queue_words();
  }

  // A pair merged twice keeps its last rank (tokenizers collects merges into a map).
  std::unordered_map<Pair, size_t> last_rank;
  for (size_t r = 0; r < merged_pairs.size(); ++r) last_rank[merged_pairs[r]] = r;
  for (size_t r = 0; r < merged_pairs.size(); ++r) {
    if (last_rank.at(merged_pairs[r]) != r) continue;
    out.merges.emplace_back(out.vocab[left_of(merged_pairs[r])],
                            out.vocab[right_of(merged_pairs[r])]);
  }
  return out;
}

Gpt2Tokenizer TrainedBpe::tokenizer() const {
  Gpt2TokenizerOptions options;
  for (const std::string& token : special_tokens) options.added_tokens.push_back({token, true});
  options.clean_up_tokenization_spaces = false;
  return Gpt2Tokenizer(vocab, merges, options);
}

void TrainedBpe::save(const fs::path& dir) const {
  nlohmann::ordered_json vocab_json = nlohmann::ordered_json::object();
  for (size_t id = 0; id < vocab.size(); ++id) vocab_json[vocab[id]] = id;
  io::write_file_atomically(dir / "vocab.json", vocab_json.dump());

  std::string merges_text(kMergesFirstLine);
  for (const auto& [left, right] : merges) merges_text += left + " " + right + "\n";
  io::write_file_atomically(dir / "merges.txt", merges_text);

  // The special tokens as Hugging Face's save_pretrained records added tokens.
  nlohmann::ordered_json decoder = nlohmann::ordered_json::object();
  nlohmann::ordered_json specials = nlohmann::ordered_json::array();
  for (const std::string& token : special_tokens) {
    if (std::find(specials.begin(), specials.end(), token) != specials.end()) continue;
    const auto id = std::find(vocab.begin(), vocab.end(), token) - vocab.begin();
    decoder[std::to_string(id)] = {{"content", token},   {"lstrip", false},
                                   {"normalized", false}, {"rstrip", false},
                                   {"single_word", false}, {"special", true}};
    specials.push_back(token);
  }
  nlohmann::ordered_json config = {
      {"add_prefix_space", false},
      {"added_tokens_decoder", decoder},
      {"additional_special_tokens", specials},
      // Unset, so that GPT2TokenizerFast does not add its default "<|endoftext|>".
      {"bos_token", nullptr},
      {"eos_token", nullptr},
      {"unk_token", nullptr},
      {"clean_up_tokenization_spaces", false},
      {"tokenizer_class", "GPT2Tokenizer"},
  };
  io::write_file_atomically(dir / "tokenizer_config.json", config.dump(2) + "\n");
  const nlohmann::ordered_json special_map = {{"additional_special_tokens", specials}};
  io::write_file_atomically(dir / "special_tokens_map.json", special_map.dump(2) + "\n");
}

}  // namespace dtlab::tokenizer
