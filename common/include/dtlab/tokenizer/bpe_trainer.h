// A byte-level BPE trainer that learns what tokenizers' ByteLevelBPETokenizer.train (tokenizers
// 0.19's BpeTrainer behind GPT-2's ByteLevel pre-tokenizer) learns from the same lines, and
// writes it as a folder GPT2TokenizerFast.from_pretrained and Gpt2Tokenizer load as they are.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dtlab/tokenizer/gpt2_tokenizer.h"

namespace dtlab::tokenizer {

struct BpeTrainerOptions {
  // Stop once the vocabulary (special tokens + 256 byte symbols + merged tokens) has this many
  // entries. Below 256 + special tokens nothing is merged and nothing is removed.
  int64_t vocab_size = 30000;
  // Stop when the most frequent pair occurs fewer times than this. 2 is ByteLevelBPETokenizer
  // .train's default (BpeTrainer's own is 0); a pair must occur at least once either way.
  int64_t min_frequency = 2;
  // Ids 0, 1, ... in this order, ahead of the byte symbols. In the training text they are
  // ordinary text, as in tokenizers (which adds them to the tokenizer only after training).
  std::vector<std::string> special_tokens;
};

// What training learns: the vocabulary in id order and the merges in rank order, both as
// byte-level strings (byte_level.h).
struct TrainedBpe {
  std::vector<std::string> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::string> special_tokens;

  // The tokenizer these describe, with the special tokens as added special tokens and
  // clean_up_tokenization_spaces off, as the saved tokenizer_config.json says.
  Gpt2Tokenizer tokenizer() const;

  // Writes, each atomically (io::write_file_atomically), into dir (created if missing):
  //   vocab.json   {"entry": id, ...} in id order, compact, as tokenizers' save_model writes it;
  //   merges.txt   "#version: 0.2", then "left right" per merge in rank order, "\n" after each;
  //   tokenizer_config.json and special_tokens_map.json, so that GPT2TokenizerFast knows the
  //     special tokens (added_tokens_decoder and additional_special_tokens), does not add its
  //     default "<|endoftext|>" (bos, eos and unk are null) and decodes without clean-up
  //     (byte-level BPE gives the text back exactly; clean-up would drop spaces before ",").
  void save(const std::filesystem::path& dir) const;
};

// Note [BPE training order]
// Exactly tokenizers 0.19's BpeTrainer (src/models/bpe/trainer.rs), so the merges agree:
//  1. Ids: the special tokens first (a repeated one once), then the 256 byte symbols sorted by
//     code point (which is GPT-2's order: '!'..'~', '¡'..'¬', '®'..'ÿ', 'Ā'..'Ń'), then each
//     merged token when it is first made.
//  2. Words: each line is pre-tokenised as GPT-2 (byte_level::pre_tokenize, no prefix space)
//     and turned into byte symbols; equal words are counted together.
//  3. Each step takes the pair of adjacent symbols with the highest count, summed over the
//     words; on a tie the smallest pair of ids, comparing the left id first, then the right
//     (so pairs of older tokens win, and byte symbols in code-point order). It stops when the
//     vocabulary is full or the best count is below max(min_frequency, 1).
//  4. The pair is merged left to right without overlap in every word ("a a a" -> "aa a"). If
//     the merged string is already an entry (another split of the same string, or a special
//     token), that id is reused and the vocabulary does not grow, but the merge is recorded.
// Counts are updated incrementally: only words holding the merged pair are visited, and the
// best pair comes from a max-heap with lazily refreshed counts, as in tokenizers.
// Where tokenizers' bookkeeping is not a plain recount we copy it: once merged, a pair keeps
// its old count (tokenizers does not zero it), and a heap entry merges only the words recorded
// with it. This differs from a recount only after a merge re-makes an earlier merged token
// (rule 4), which could queue one pair twice; tokenizers' order would then depend on its hash
// maps. The golden cases have no such merge (trainer.json lists re-made entries: one, a special
// token, which cannot be queued twice), nor did 3,000 small random corpora we tried.
// A pair listed twice keeps its last rank in merges, as tokenizers' save_model writes it.
class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options);

  // Counts the words of one line (one sentence, or one side of a sentence pair). Any text,
  // newlines included; invalid UTF-8 is read as byte_level::pre_tokenize reads it.
  void feed(std::string_view line);
  void feed(const std::vector<std::string>& lines);

  // Learns merges from everything fed so far. Throws dtlab::Error for vocab_size < 1 or
  // min_frequency < 0, or an empty special token.
  TrainedBpe train() const;

  int64_t distinct_words() const { return static_cast<int64_t>(word_counts_.size()); }

 private:
  BpeTrainerOptions options_;
  std::unordered_map<std::string, int64_t> word_counts_;  // byte-level word -> occurrences
  std::vector<std::string> word_order_;                   // first-seen order, for determinism
};

}  // namespace dtlab::tokenizer
