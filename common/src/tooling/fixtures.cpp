// The offline fixture generator, see tooling/fixtures.h.
#include "dtlab/tooling/fixtures.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <random>
#include <set>
#include <sstream>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/io/safetensors.h"
#include "dtlab/model/bert.h"

namespace fs = std::filesystem;

namespace dtlab::tooling {
namespace {

constexpr int kPremiseWords = 400;  // the half of the vocabulary premises use
constexpr int kForeignWords = 200;  // the half they never use
constexpr int kMinPremise = 8, kMaxPremise = 14;
constexpr int kMinHypothesis = 3, kMaxHypothesis = 6;

// Deterministic on every platform: std::mt19937_64 is specified exactly; the distributions of
// <random> are not, so draw integers by hand.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  int64_t below(int64_t n) { return static_cast<int64_t>(engine_() % static_cast<uint64_t>(n)); }
  int64_t between(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }

 private:
  std::mt19937_64 engine_;
};

// Pronounceable invented words ("bako", "tulime"), all distinct.
std::vector<std::string> invent_words(Rng& rng, int count) {
  static const char* kOnsets[] = {"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"};
  static const char* kVowels[] = {"a", "e", "i", "o", "u"};
  std::set<std::string> seen;
  std::vector<std::string> words;
  while (static_cast<int>(words.size()) < count) {
    std::string w;
    const int64_t syllables = rng.between(2, 3);
    for (int64_t s = 0; s < syllables; ++s) {
      w += kOnsets[rng.below(std::size(kOnsets))];
      w += kVowels[rng.below(std::size(kVowels))];
    }
    if (seen.insert(w).second) words.push_back(w);
  }
  return words;
}

std::string capitalised(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

std::string sentence(const std::vector<std::string>& words) {
  std::string s;
  for (size_t i = 0; i < words.size(); ++i) s += (i ? " " : "") + (i ? words[i] : capitalised(words[i]));
  return s + ".";
}

std::string make_tsv(Rng& rng, int64_t n, const std::vector<std::string>& premise_vocab,
                     const std::vector<std::string>& foreign_vocab) {
  std::ostringstream out;
  out << "index\tsentence1\tsentence2\tlabel\n";
  for (int64_t i = 0; i < n; ++i) {
    std::vector<std::string> premise(rng.between(kMinPremise, kMaxPremise));
    for (auto& w : premise) w = premise_vocab[rng.below(premise_vocab.size())];
    // Hypothesis: an ordered subset of the premise words.
    const int64_t keep = rng.between(kMinHypothesis, std::min<int64_t>(kMaxHypothesis, premise.size()));
    std::vector<size_t> positions(premise.size());
    for (size_t p = 0; p < positions.size(); ++p) positions[p] = p;
    for (size_t p = 0; p < positions.size(); ++p) std::swap(positions[p], positions[p + rng.below(positions.size() - p)]);
    positions.resize(keep);
    std::sort(positions.begin(), positions.end());
    std::vector<std::string> hypothesis;
    for (size_t p : positions) hypothesis.push_back(premise[p]);
    const bool entailed = (i % 2) == 0;  // balanced; the order is shuffled by the sampler
    if (!entailed) {
      const int64_t at = rng.below(hypothesis.size() + 1);
      hypothesis.insert(hypothesis.begin() + at, foreign_vocab[rng.below(foreign_vocab.size())]);
    }
    out << i << "\t" << sentence(premise) << "\t" << sentence(hypothesis) << "\t"
        << (entailed ? "entailment" : "not_entailment") << "\n";
  }
  return out.str();
}

}  // namespace

void write_fixtures(const fs::path& out, const FixtureOptions& o) {
  if (o.train_examples <= 0 || o.dev_examples <= 0) throw Error("fixture example counts must be positive");
  Rng rng(o.seed);
  const std::vector<std::string> words = invent_words(rng, kPremiseWords + kForeignWords);
  const std::vector<std::string> premise_vocab(words.begin(), words.begin() + kPremiseWords);
  const std::vector<std::string> foreign_vocab(words.begin() + kPremiseWords, words.end());

  // Data: RTE's file format.
  const fs::path data_dir = out / "RTE";
  io::write_file_atomically(data_dir / "train.tsv", make_tsv(rng, o.train_examples, premise_vocab, foreign_vocab));
  io::write_file_atomically(data_dir / "dev.tsv", make_tsv(rng, o.dev_examples, premise_vocab, foreign_vocab));

  // Vocabulary: special tokens at BERT's usual low ids, punctuation, letters and "##" letters
  // (so that any lower-case word still tokenises), then the words.
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?", "'"};
  for (char c = 'a'; c <= 'z'; ++c) vocab.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) vocab.push_back("##" + std::string(1, c));
  vocab.insert(vocab.end(), words.begin(), words.end());
  if (o.vocab_size > 0 && o.vocab_size < static_cast<int64_t>(vocab.size())) {
    throw Error("--vocab_size " + std::to_string(o.vocab_size) + ": the fixture's vocabulary already has " +
                std::to_string(vocab.size()) + " entries; give 0 (its own size) or more");
  }
  for (int64_t k = 0; static_cast<int64_t>(vocab.size()) < o.vocab_size; ++k) {
    vocab.push_back("[unused" + std::to_string(k) + "]");
  }
  std::string vocab_text;
  for (const auto& t : vocab) vocab_text += t + "\n";
  const fs::path model_dir = out / "bert-tiny";
  io::write_file_atomically(model_dir / "vocab.txt", vocab_text);
  io::write_json_file(model_dir / "tokenizer_config.json",
                      {{"do_lower_case", true}, {"model_max_length", 512},
                       {"tokenizer_class", "BertTokenizer"}});

  // Model: random weights, drawn from LibTorch's generator seeded here.
  model::BertConfig config;
  config.vocab_size = static_cast<int64_t>(vocab.size());
  config.hidden_size = o.hidden_size;
  config.num_hidden_layers = o.num_hidden_layers;
  config.num_attention_heads = o.num_attention_heads;
  config.intermediate_size = 4 * o.hidden_size;
  torch::manual_seed(o.seed);
  model::BertForSequenceClassification model(config);
  io::TensorMap tensors;
  for (const auto& item : model->named_parameters()) {
    if (item.key().rfind("bert.", 0) == 0) tensors[item.key()] = item.value().detach().contiguous();
  }
  io::save_safetensors(model_dir / "model.safetensors", tensors, {{"format", "pt"}});
  nlohmann::json config_json = config.to_json();
  config_json["architectures"] = {"BertModel"};
  config_json.erase("id2label");
  config_json.erase("label2id");
  io::write_json_file(model_dir / "config.json", config_json);
}

}  // namespace dtlab::tooling
