// GLUE RTE files to examples to features (run_glue.py's RteProcessor and
// convert_examples_to_features).
#include "dtlab/data/glue.h"

#include <algorithm>
#include <cctype>
#include <fstream>

#include "dtlab/core/error.h"

namespace dtlab::data {
namespace {

constexpr size_t kRteFields = 4;  // index, sentence1, sentence2, label

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

GlueTask glue_task(const std::string& name) {
  if (lower(name) == "rte") return {"rte", {"entailment", "not_entailment"}};
  throw Error("--task_name " + name + " is not supported: the kit provides RTE");
}

std::vector<InputExample> read_rte_examples(const std::filesystem::path& tsv,
                                            const std::string& set_type) {
  std::ifstream in(tsv, std::ios::binary);
  if (!in) {
    throw Error("cannot open " + tsv.string() + ": --data_dir must hold RTE's train.tsv and "
                "dev.tsv (run dtlab-fixtures for the offline data set)");
  }
  const std::vector<std::string> labels = glue_task("rte").labels;
  std::vector<InputExample> examples;
  std::string line;
  size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = tsv.string() + ":" + std::to_string(line_number) + ": ";
    const std::vector<std::string> fields = split_tabs(line);
    if (line_number == 1) {
      if (fields.size() != kRteFields || fields[0] != "index") {
        throw Error(where + "expected the header line \"index<TAB>sentence1<TAB>sentence2<TAB>label\"");
      }
      continue;
    }
    if (fields.size() != kRteFields) {
      throw Error(where + "expected 4 tab-separated fields (index, sentence1, sentence2, label), "
                  "found " + std::to_string(fields.size()));
    }
    const auto label = std::find(labels.begin(), labels.end(), fields[3]);
    if (label == labels.end()) {
      throw Error(where + "label \"" + fields[3] + "\" is not entailment or not_entailment");
    }
    examples.push_back({set_type + "-" + fields[0], fields[1], fields[2],
                        static_cast<int64_t>(label - labels.begin())});
  }
  if (line_number == 0) throw Error(tsv.string() + ": the file is empty (expected a header line)");
  return examples;
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
