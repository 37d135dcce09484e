// GLUE data in the original file format (tab-separated, one header line), turned into
// fixed-length features the way run_glue.py's convert_examples_to_features does.
#pragma once

#include <torch/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/data/batch.h"
#include "dtlab/data/glue_tsv.h"
#include "dtlab/tokenizer/bert_tokenizer.h"

namespace dtlab::data {

// Reads DIR/train.tsv or DIR/dev.tsv of RTE (parse_rte_tsv, data/glue_tsv.h, on its text): a
// header line "index sentence1 sentence2 label" then one example per line, fields separated by
// tabs, no quoting. A line with the wrong number of fields, a missing header or an unknown label
// is a dtlab::Error "FILE:LINE: ..." that says what was expected.
std::vector<InputExample> read_rte_examples(const std::filesystem::path& tsv,
                                            const std::string& set_type);

// Tokenised examples, padded to max_seq_length, stacked as [N, max_seq_length] int64 tensors.
struct Features {
  torch::Tensor input_ids, attention_mask, token_type_ids;
  torch::Tensor labels;  // [N] int64
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

Features convert_examples_to_features(const std::vector<InputExample>& examples,
                                      const tokenizer::BertTokenizer& tokenizer,
                                      int max_seq_length);

// The rows `indices` of features, in that order.
Batch make_batch(const Features& features, const std::vector<int64_t>& indices);

}  // namespace dtlab::data
