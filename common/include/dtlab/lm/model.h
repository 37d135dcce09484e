// The model and tokenizer the flags name, and the trained model's folder: GPT-2 from a Hugging
// Face folder or a preset with random weights, its BPE tokenizer, and at the end both written
// as one folder that gpt2_from_pretrained and Gpt2Tokenizer::from_pretrained read back.
#pragma once

#include <filesystem>

#include "dtlab/lm/options.h"
#include "dtlab/lm/special_tokens.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/model/load_report.h"
#include "dtlab/tokenizer/gpt2_tokenizer.h"

namespace dtlab::lm {

// The tokenizer of tokenizer_folder(o) (Gpt2Tokenizer::from_pretrained and its errors).
tokenizer::Gpt2Tokenizer load_tokenizer(const LmOptions& o);

// --model_name_or_path: gpt2_from_pretrained (report filled in); --model_config: the preset's
// shape with the tokenizer's vocabulary size, <eos_en> as eos and <pad> as pad, weights drawn
// after torch::manual_seed(o.seed). --dropout applies to both. dtlab::Error when the tokenizer
// has ids the model has no embedding for, or a --max_length row is longer than n_positions.
// Weights: whether --model_name_or_path's weights are read into the model now (kWhole), or left
// for a sharded rank to read its pieces of (kLater: the model drawn from config.json as a preset
// is, the report filled from the files' headers; Note [Reading only what a rank keeps]).
enum class Weights { kWhole, kLater };
model::Gpt2LMHeadModel load_model(const LmOptions& o, const tokenizer::Gpt2Tokenizer& tokenizer,
                                  const LmTokenIds& ids, model::LoadReport* report, Weights weights = Weights::kWhole);

// save_pretrained into dir, with the tokenizer files of tokenizer_dir copied beside it
// (vocab.json, merges.txt and those of tokenizer_config.json, special_tokens_map.json,
// added_tokens.json that exist), each atomically.
void save_model_folder(const model::Gpt2LMHeadModel& model, const std::filesystem::path& tokenizer_dir,
                       const std::filesystem::path& dir);

int64_t count_parameters(const torch::nn::Module& module);

}  // namespace dtlab::lm
