// German->English translation data: the files on disk, and the language-model examples the GPT-2
// exercise trains on (the original's collate_batch: source, <eos_de>, target, <eos_en>, padding).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "dtlab/data/translation_jsonl.h"

namespace dtlab::data {

// The data folder holds three files, one per split:
//   DIR/train.jsonl  DIR/validation.jsonl  DIR/test.jsonl
// UTF-8, one JSON object per line: {"de": "<German source>", "en": "<English target>"}. This is
// what Hugging Face's translation datasets hold in their "translation" column, so the wrapped
// form {"translation": {"de": ..., "en": ...}} (what Dataset.to_json writes) is read as well.
// Other keys are ignored; blank lines are skipped. The original exercise uses the first 5,000 /
// 1,000 / 100 examples of IWSLT14 (bbaaaa/iwslt14-de-en-preprocess); dtlab-fixtures writes a
// learnable invented set, dtlab-translation-data a real one from the Ding dictionary, and
// scripts/fetch_iwslt14.sh the original (needs internet).
// The splits a data folder holds, in order: "train", "validation", "test".
const std::vector<std::string>& translation_splits();

// Reads DIR/<split>.jsonl (parse_translation_jsonl, data/translation_jsonl.h, on its text). Errors are dtlab::Error: a missing file says what the folder must
// hold and how to make it; a bad line is "FILE:LINE: ..." (not JSON, not an object, no "de" or
// "en", a value that is not a string); a file without any example says so.
std::vector<TranslationPair> read_translation_split(const std::filesystem::path& dir,
                                                    const std::string& split);

// Writes pairs as DIR/<split>.jsonl in the format above (atomically; creates DIR).
void write_translation_split(const std::filesystem::path& dir, const std::string& split,
                             const std::vector<TranslationPair>& pairs);

// Text to token ids, without special tokens (the GPT-2 BPE tokenizer's encode).
using TokenEncoder = std::function<std::vector<int64_t>(const std::string&)>;

struct LmExampleOptions {
  int64_t eos_src_id = -1;  // <eos_de>, ends the source
  int64_t eos_tgt_id = -1;  // <eos_en>, ends the target; generation stops at it
  int64_t pad_id = -1;      // <pad>
  // Length of the whole sequence before the one-token shift: input_ids and labels have
  // max_length - 1 columns. (The GPT-2 exercise's collate passes model_max_length + 1 here, so
  // that the model sees exactly model_max_length positions.)
  int64_t max_length = 128;
};

// Language-model examples, one row per pair:
//   ids    = encode(de) + [eos_src] + encode(en) + [eos_tgt], cut to max_length, then padded
//            with pad_id to max_length;
//   target = 0 for each source token and eos_src, 1 for each target token and eos_tgt, 0 for
//            padding (cut and padded alike);
//   input_ids = ids[:-1], labels = ids[1:], label_token_weights = target[1:].
// So the label at position t is token t+1, and it counts in the loss
// sum(ce * w) / sum(w) exactly when token t+1 belongs to the English side: the first counted
// prediction is the first English token, made from <eos_de>; the last is <eos_en> (unless the
// row was cut).
struct LmExamples {
  torch::Tensor input_ids;            // [N, max_length - 1] int64
  torch::Tensor labels;               // [N, max_length - 1] int64
  torch::Tensor label_token_weights;  // [N, max_length - 1] float32, 0 or 1
  // Per row, the input_ids positions that hold a real token rather than padding
  // (min(len(ids), max_length - 1)), int64 [N]: the tokens a throughput figure should count.
  // (The original counts every position, padding included.)
  torch::Tensor real_tokens;
  int64_t truncated = 0;  // rows whose ids were longer than max_length and were cut
  int64_t size() const { return input_ids.defined() ? input_ids.size(0) : 0; }
};

// Builds the examples. Throws dtlab::Error when max_length < 2 or an id option is unset (< 0).
LmExamples make_lm_examples(const std::vector<TranslationPair>& pairs, const TokenEncoder& encode,
                            const LmExampleOptions& options);

}  // namespace dtlab::data
