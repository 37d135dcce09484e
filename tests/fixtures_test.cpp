// The offline fixtures (data/fixtures.h): deterministic from the seed, readable by the same code
// a real run uses, and carrying the rule a tiny BERT can learn.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/tooling/fixtures.h"
#include "dtlab/data/glue.h"
#include "dtlab/io/file.h"
#include "dtlab/model/bert.h"
#include "dtlab/tokenizer/bert_tokenizer.h"
#include "test_util.h"

namespace fs = std::filesystem;
using dtlab::tooling::FixtureOptions;
using dtlab::data::InputExample;

namespace {

constexpr int64_t kTrain = 40, kDev = 10;

FixtureOptions small(uint64_t seed) {
  FixtureOptions o;
  o.seed = seed;
  o.train_examples = kTrain;
  o.dev_examples = kDev;
  return o;
}

// One fixture folder per seed, written once for the whole suite.
const fs::path& fixtures(uint64_t seed, const std::string& copy = "") {
  static std::map<std::string, fs::path> written;
  const std::string key = std::to_string(seed) + "/" + copy;
  auto it = written.find(key);
  if (it == written.end()) {
    const fs::path dir = dtlab::test::fresh_temp_dir("fixtures-" + std::to_string(seed) + copy);
    dtlab::tooling::write_fixtures(dir, small(seed));
    it = written.emplace(key, dir).first;
  }
  return it->second;
}

// Every regular file under dir, by relative path, with its bytes.
std::map<std::string, std::string> files_under(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = dtlab::io::read_file(e.path());
  }
  return files;
}

// "Bako tulime." -> {"bako", "tulime"}: the fixture sentences are lower-case words separated by
// single spaces, the first capitalised, ending in a full stop.
std::vector<std::string> words_of(const std::string& sentence) {
  EXPECT_FALSE(sentence.empty());
  EXPECT_EQ(sentence.back(), '.') << sentence;
  std::string s = sentence.substr(0, sentence.size() - 1);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  std::vector<std::string> words;
  std::istringstream in(s);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::vector<InputExample> examples(uint64_t seed, const std::string& set) {
  return dtlab::data::read_rte_examples(fixtures(seed) / "RTE" / (set + ".tsv"), set);
}

}  // namespace

TEST(Fixtures, WritesTheModelAndDataFiles) {
  const auto files = files_under(fixtures(0));
  std::set<std::string> names;
  for (const auto& [name, bytes] : files) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"RTE/dev.tsv", "RTE/train.tsv", "bert-tiny/config.json",
                                          "bert-tiny/model.safetensors", "bert-tiny/tokenizer_config.json",
                                          "bert-tiny/vocab.txt"}));
}

TEST(Fixtures, SameSeedGivesByteIdenticalFiles) {
  const auto first = files_under(fixtures(0));
  const auto second = files_under(fixtures(0, "again"));
  ASSERT_EQ(first.size(), second.size());
  for (const auto& [name, bytes] : first) {
    ASSERT_TRUE(second.count(name)) << name;
    EXPECT_TRUE(second.at(name) == bytes) << name << " differs between two runs with seed 0";
  }
}

TEST(Fixtures, DifferentSeedGivesDifferentData) {
  const fs::path train = fs::path("RTE") / "train.tsv";
  EXPECT_NE(dtlab::io::read_file(fixtures(0) / train), dtlab::io::read_file(fixtures(1) / train));
}

TEST(Fixtures, DataParsesAsRteWithBalancedLabels) {
  for (const auto& [set, n] : std::vector<std::pair<std::string, int64_t>>{{"train", kTrain}, {"dev", kDev}}) {
    const std::vector<InputExample> ex = examples(0, set);
    ASSERT_EQ(static_cast<int64_t>(ex.size()), n) << set;
    int64_t not_entailed = 0;
    for (const InputExample& e : ex) not_entailed += e.label;
    // An even count splits exactly in half.
    EXPECT_EQ(not_entailed, n / 2) << set;
    EXPECT_EQ(ex.front().guid, set + "-0");
  }
}

TEST(Fixtures, NotEntailedHypothesesHaveExactlyOneWordNoPremiseUses) {
  // Premise words of both files: foreign words never occur in any premise.
  const std::vector<InputExample> train = examples(0, "train"), dev = examples(0, "dev");
  std::set<std::string> premise_words;
  for (const auto* set : {&train, &dev}) {
    for (const InputExample& e : *set) {
      for (const std::string& w : words_of(e.text_a)) premise_words.insert(w);
    }
  }
  for (const auto* set : {&train, &dev}) {
    for (const InputExample& e : *set) {
      const std::vector<std::string> premise = words_of(e.text_a), hypothesis = words_of(e.text_b);
      const std::set<std::string> own(premise.begin(), premise.end());
      EXPECT_GE(premise.size(), 8u) << e.guid;
      EXPECT_LE(premise.size(), 14u) << e.guid;
      int foreign = 0, from_own_premise = 0;
      for (const std::string& w : hypothesis) {
        foreign += premise_words.count(w) == 0;
        from_own_premise += own.count(w) == 1;
      }
      // The learnable rule: entailment iff no hypothesis word is foreign to all premises; the
      // rest of the hypothesis (3 to 6 words) comes from its own premise.
      EXPECT_EQ(foreign, e.label == 1 ? 1 : 0) << e.guid << ": " << e.text_a << " / " << e.text_b;
      EXPECT_EQ(from_own_premise, static_cast<int>(hypothesis.size()) - foreign) << e.guid;
      EXPECT_GE(from_own_premise, 3) << e.guid;
      EXPECT_LE(from_own_premise, 6) << e.guid;
    }
  }
}

TEST(Fixtures, ModelLoadsWithOnlyTheClassifierMissing) {
  dtlab::model::LoadReport report;
  auto model = dtlab::model::from_pretrained(fixtures(0) / "bert-tiny", {}, &report);
  EXPECT_EQ(std::set<std::string>(report.missing_keys.begin(), report.missing_keys.end()),
            (std::set<std::string>{"classifier.weight", "classifier.bias"}));
  EXPECT_TRUE(report.unexpected_keys.empty());
  // The documented tiny BERT: L2/H128/A2, intermediate 4H.
  const FixtureOptions defaults;
  EXPECT_EQ(model->config().hidden_size, defaults.hidden_size);
  EXPECT_EQ(model->config().num_hidden_layers, defaults.num_hidden_layers);
  EXPECT_EQ(model->config().num_attention_heads, defaults.num_attention_heads);
  EXPECT_EQ(model->config().intermediate_size, 4 * defaults.hidden_size);
  const auto tokenizer = dtlab::tokenizer::BertTokenizer::from_pretrained(fixtures(0) / "bert-tiny");
  EXPECT_EQ(model->config().vocab_size, tokenizer.vocab_size());
}

TEST(Fixtures, TokenizerLowerCasesAndKnowsEveryFixtureWord) {
  const auto tokenizer = dtlab::tokenizer::BertTokenizer::from_pretrained(fixtures(0) / "bert-tiny");
  EXPECT_TRUE(tokenizer.options().do_lower_case);
  for (const InputExample& e : examples(0, "train")) {
    for (const std::string* text : {&e.text_a, &e.text_b}) {
      // Every invented word is a vocabulary entry, so it stays one piece; then the full stop.
      std::vector<std::string> expected = words_of(*text);
      expected.push_back(".");
      const std::vector<std::string> tokens = tokenizer.tokenize(*text);
      EXPECT_EQ(tokens, expected) << *text;
      EXPECT_EQ(std::count(tokens.begin(), tokens.end(), "[UNK]"), 0) << *text;
    }
  }
}

// --vocab_size pads vocab.txt as BERT-base's [unusedK] entries do: the embeddings grow to a real
// model's size (what a data-parallel step sends), the tokenizer and the data stay the same.
TEST(Fixtures, VocabSizePadsWithUnusedEntriesAndKeepsTheTokenizer) {
  FixtureOptions o = small(0);
  o.vocab_size = 1000;
  const fs::path dir = dtlab::test::fresh_temp_dir("fixtures-vocab");
  dtlab::tooling::write_fixtures(dir, o);
  auto model = dtlab::model::from_pretrained(dir / "bert-tiny");
  EXPECT_EQ(model->config().vocab_size, 1000);
  const auto padded = dtlab::tokenizer::BertTokenizer::from_pretrained(dir / "bert-tiny");
  const auto plain = dtlab::tokenizer::BertTokenizer::from_pretrained(fixtures(0) / "bert-tiny");
  EXPECT_EQ(padded.vocab_size(), 1000);
  const std::string vocab = dtlab::io::read_file(dir / "bert-tiny" / "vocab.txt");
  EXPECT_NE(vocab.find("\n[unused0]\n"), std::string::npos);
  EXPECT_NE(vocab.find("\n[unused" + std::to_string(1000 - plain.vocab_size() - 1) + "]\n"), std::string::npos);
  for (const InputExample& e : examples(0, "train")) {
    EXPECT_EQ(padded.tokenize(e.text_a), plain.tokenize(e.text_a)) << e.text_a;
  }
  o.vocab_size = 10;  // smaller than the words alone
  EXPECT_THROW_WITH(dtlab::tooling::write_fixtures(dtlab::test::fresh_temp_dir("fixtures-vocab-small"), o),
                    dtlab::Error, "--vocab_size 10");
}
