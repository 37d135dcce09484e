// Translation files (JSON lines) and the language-model examples built from them, see
// data/translation.h.
#include "dtlab/data/translation.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"

namespace fs = std::filesystem;

namespace dtlab::data {
namespace {

constexpr const char* kSource = "de";
constexpr const char* kTarget = "en";

std::string folder_contents_hint() {
  return "the data folder must hold train.jsonl, validation.jsonl and test.jsonl, one "
         "{\"de\": ..., \"en\": ...} object per line (dtlab-fixtures writes an offline set in "
         "OUT/translation, dtlab-translation-data one from the Ding dictionary, "
         "scripts/fetch_iwslt14.sh the original)";
}

}  // namespace

const std::vector<std::string>& translation_splits() {
  static const std::vector<std::string> splits = {"train", "validation", "test"};
  return splits;
}

std::vector<TranslationPair> read_translation_split(const fs::path& dir, const std::string& split) {
  const fs::path path = dir / (split + ".jsonl");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path.string() + ": " + folder_contents_hint());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error("cannot read " + path.string());
  return parse_translation_jsonl(text.str(), path.string(), folder_contents_hint());
}

void write_translation_split(const fs::path& dir, const std::string& split,
                             const std::vector<TranslationPair>& pairs) {
  std::string text;
  for (const TranslationPair& p : pairs) {
    text += nlohmann::json{{kSource, p.de}, {kTarget, p.en}}.dump() + "\n";
  }
  io::write_file_atomically(dir / (split + ".jsonl"), text);
}

LmExamples make_lm_examples(const std::vector<TranslationPair>& pairs, const TokenEncoder& encode,
                            const LmExampleOptions& options) {
  const int64_t max_length = options.max_length;
  if (max_length < 2) {
    throw Error("max_length is " + std::to_string(max_length) +
                ": it must be at least 2 (the inputs and labels have max_length - 1 columns)");
  }
  if (options.eos_src_id < 0 || options.eos_tgt_id < 0 || options.pad_id < 0) {
    throw Error("make_lm_examples: eos_src_id, eos_tgt_id and pad_id must all be set (>= 0)");
  }
  const int64_t n = static_cast<int64_t>(pairs.size());
  const int64_t columns = max_length - 1;
  torch::Tensor ids = torch::full({n, max_length}, options.pad_id, torch::kInt64);
  torch::Tensor target = torch::zeros({n, max_length}, torch::kFloat32);
  LmExamples out;
  out.real_tokens = torch::empty({n}, torch::kInt64);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> row = encode(pairs[i].de);
    row.push_back(options.eos_src_id);
    const int64_t source_length = static_cast<int64_t>(row.size());
    const std::vector<int64_t> en = encode(pairs[i].en);
    row.insert(row.end(), en.begin(), en.end());
    row.push_back(options.eos_tgt_id);
    if (static_cast<int64_t>(row.size()) > max_length) {
      row.resize(max_length);
      ++out.truncated;
    }
    const int64_t length = static_cast<int64_t>(row.size());
    std::copy(row.begin(), row.end(), ids.data_ptr<int64_t>() + i * max_length);
    float* t = target.data_ptr<float>() + i * max_length;
    std::fill(t + std::min(source_length, length), t + length, 1.0f);
    out.real_tokens.data_ptr<int64_t>()[i] = std::min(length, columns);
  }
  using torch::indexing::Slice;
  out.input_ids = ids.index({Slice(), Slice(0, columns)}).contiguous();
  out.labels = ids.index({Slice(), Slice(1, max_length)}).contiguous();
  out.label_token_weights = target.index({Slice(), Slice(1, max_length)}).contiguous();
  return out;
}

}  // namespace dtlab::data
