// GLUE RTE files to examples to features (run_glue.py's RteProcessor and
// convert_examples_to_features).
#include "dtlab/data/glue.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "dtlab/core/error.h"

namespace dtlab::data {

std::vector<InputExample> read_rte_examples(const std::filesystem::path& tsv,
                                            const std::string& set_type) {
  std::ifstream in(tsv, std::ios::binary);
  if (!in) {
    throw Error("cannot open " + tsv.string() + ": --data_dir must hold RTE's train.tsv and "
                "dev.tsv (run dtlab-fixtures for the offline data set)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error("cannot read " + tsv.string());
  return parse_rte_tsv(text.str(), tsv.string(), set_type);
}

Features convert_examples_to_features(const std::vector<InputExample>& examples,
                                      const tokenizer::BertTokenizer& tokenizer,
                                      int max_seq_length) {
  const int64_t n = static_cast<int64_t>(examples.size());
  const auto options = torch::TensorOptions().dtype(torch::kInt64);
  Features f;
  f.input_ids = torch::empty({n, max_seq_length}, options);
  f.attention_mask = torch::empty({n, max_seq_length}, options);
  f.token_type_ids = torch::empty({n, max_seq_length}, options);
  f.labels = torch::empty({n}, options);
  auto copy_row = [max_seq_length](torch::Tensor& dst, int64_t row, const std::vector<int64_t>& v) {
    std::copy(v.begin(), v.end(), dst.data_ptr<int64_t>() + row * max_seq_length);
  };
  for (int64_t i = 0; i < n; ++i) {
    const InputExample& e = examples[i];
    const tokenizer::Encoding enc = tokenizer.encode(e.text_a, e.text_b, max_seq_length);
    copy_row(f.input_ids, i, enc.input_ids);
    copy_row(f.attention_mask, i, enc.attention_mask);
    copy_row(f.token_type_ids, i, enc.token_type_ids);
    f.labels.data_ptr<int64_t>()[i] = e.label;
  }
  return f;
}


Batch make_batch(const Features& features, const std::vector<int64_t>& indices) {
  const torch::Tensor index = torch::tensor(indices, torch::TensorOptions().dtype(torch::kInt64));
  Batch b;
  b.input_ids = features.input_ids.index_select(0, index);
  b.attention_mask = features.attention_mask.index_select(0, index);
  b.token_type_ids = features.token_type_ids.index_select(0, index);
  b.labels = features.labels.index_select(0, index);
  return b;
}

}  // namespace dtlab::data
