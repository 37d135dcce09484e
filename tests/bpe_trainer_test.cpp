// BpeTrainer: merges worked out by hand on tiny corpora, then the merges tokenizers' BpeTrainer
// learns on the golden corpus (tests/golden/make_gpt2_tokenizer_golden.py), the files the
// trainer writes, and the time it takes on ~100k words.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tokenizer/bpe_trainer.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace bpe_trainer_test {

namespace fs = std::filesystem;
using dtlab::tokenizer::BpeTrainer;
using dtlab::tokenizer::BpeTrainerOptions;
using dtlab::tokenizer::Gpt2Tokenizer;
using dtlab::tokenizer::TrainedBpe;
using Strings = std::vector<std::string>;
using Merges = std::vector<std::pair<std::string, std::string>>;

constexpr int64_t kByteSymbols = 256;

TrainedBpe train(const Strings& lines, int64_t vocab_size, int64_t min_frequency,
                 Strings special_tokens = {}) {
  BpeTrainerOptions options;
  options.vocab_size = vocab_size;
  options.min_frequency = min_frequency;
  options.special_tokens = std::move(special_tokens);
  BpeTrainer trainer(options);
  trainer.feed(lines);
  return trainer.train();
}

Strings learned_entries(const TrainedBpe& t, size_t first) {
  return Strings(t.vocab.begin() + static_cast<std::ptrdiff_t>(first), t.vocab.end());
}

// ---------------------------------------------------------------------------------------------
// Closed-form cases

// "ab ab ab cd cd" has the words "ab" once, "Ġab" twice and "Ġcd" twice:
//   a b: 3   Ġ a: 2   Ġ c: 2   c d: 2
// so "a b" first; then "Ġ ab", "Ġ c" and "c d" tie at 2 and the smallest pair of ids wins:
// c d = (66, 67) before Ġ ab = (220, 256), which beats Ġ cd = (220, 257).
TEST(BpeTrainer, MergesByCountThenSmallestPairOfIds) {
  const TrainedBpe t = train({"ab ab ab cd cd"}, 1000, 2);
  EXPECT_EQ(t.merges, (Merges{{"a", "b"}, {"c", "d"}, {"Ġ", "ab"}, {"Ġ", "cd"}}));
  EXPECT_EQ(t.vocab.size(), kByteSymbols + 4);
  EXPECT_EQ(learned_entries(t, kByteSymbols), (Strings{"ab", "cd", "Ġab", "Ġcd"}));
  // The byte symbols come first, in GPT-2's order.
  EXPECT_EQ(t.vocab[0], "!");
  EXPECT_EQ(t.vocab[220], "Ġ");
}

TEST(BpeTrainer, StopsAtVocabSize) {
  const TrainedBpe t = train({"ab ab ab cd cd"}, kByteSymbols + 2, 2);
  EXPECT_EQ(t.merges, (Merges{{"a", "b"}, {"c", "d"}}));
  // Below the byte symbols nothing is merged and nothing removed.
  EXPECT_EQ(train({"ab ab"}, 10, 0).vocab.size(), kByteSymbols);
}

TEST(BpeTrainer, StopsWhenNoPairIsFrequentEnough) {
  EXPECT_EQ(train({"ab ab ab cd cd"}, 1000, 3).merges, (Merges{{"a", "b"}}));
  // min_frequency 0 still needs one occurrence: "xy" once is merged, nothing after.
  EXPECT_EQ(train({"xy"}, 1000, 0).merges, (Merges{{"x", "y"}}));
}

TEST(BpeTrainer, SpecialTokensComeFirstAndAreOrdinaryTextWhenTraining) {
  const TrainedBpe t = train({"ab ab ab cd cd <pad>"}, 1000, 2, {"<pad>", "<eos_de>", "<pad>"});
  EXPECT_EQ(t.vocab[0], "<pad>");
  EXPECT_EQ(t.vocab[1], "<eos_de>");
  EXPECT_EQ(t.vocab[2], "!");  // a repeated special token takes one id
  // "<pad>" in the text is counted as "Ġ<", "pad", ">": nothing there occurs twice.
  EXPECT_EQ(t.merges, (Merges{{"a", "b"}, {"c", "d"}, {"Ġ", "ab"}, {"Ġ", "cd"}}));
  EXPECT_EQ(t.vocab.size(), 2 + kByteSymbols + 4);
}

TEST(BpeTrainer, MergesWithoutOverlapFromTheLeft) {
  // "aaa": a a counts 2; merged left first it is "aa a", which leaves one "aa a" pair.
  const TrainedBpe t = train({"aaa"}, 1000, 1);
  EXPECT_EQ(t.merges, (Merges{{"a", "a"}, {"aa", "a"}}));
  // "aaaa" becomes "aa aa", never "a aa a".
  EXPECT_EQ(train({"aaaa"}, 1000, 1).merges, (Merges{{"a", "a"}, {"aa", "aa"}}));
}

TEST(BpeTrainer, MergeThatRemakesAnEntryReusesItsId) {
  // The special token "ab" is also what merging "a" and "b" makes: the id stays 0 and the
  // vocabulary does not grow, but the merge is recorded.
  const TrainedBpe t = train({"ab ab ab"}, 1000, 2, {"ab"});
  EXPECT_EQ(t.merges, (Merges{{"a", "b"}, {"Ġ", "ab"}}));
  EXPECT_EQ(t.vocab.size(), 1 + kByteSymbols + 1);
  EXPECT_EQ(t.vocab.back(), "Ġab");
}

TEST(BpeTrainer, TrainedTokenizerEncodesWithTheMerges) {
  const TrainedBpe t = train({"ab ab ab cd cd"}, 1000, 2, {"<eos_en>"});
  const Gpt2Tokenizer tok = t.tokenizer();
  EXPECT_EQ(tok.tokenize("cd ab<eos_en>"), (Strings{"cd", "Ġab", "<eos_en>"}));
  EXPECT_EQ(tok.decode(tok.encode("ab , cd")), "ab , cd");  // no clean-up
}

TEST(BpeTrainer, BadOptionsAreErrors) {
  EXPECT_THROW_WITH(train({"ab"}, 0, 2), dtlab::Error, "vocab_size must be at least 1");
  EXPECT_THROW_WITH(train({"ab"}, 300, -1), dtlab::Error, "min_frequency");
  EXPECT_THROW_WITH(train({"ab"}, 300, 2, {""}), dtlab::Error, "special token is empty");
}

TEST(BpeTrainer, SavedFilesLoadBack) {
  const TrainedBpe t = train({"ab ab ab cd cd", "Größe über"}, 1000, 1, {"<eos_de>", "<pad>"});
  const fs::path dir = dtlab::test::fresh_temp_dir("bpe_save");
  t.save(dir);
  const std::string merges = dtlab::io::read_file(dir / "merges.txt");
  EXPECT_EQ(merges.substr(0, 24), "#version: 0.2\na b\nc d\nĠ");
  const Gpt2Tokenizer loaded = Gpt2Tokenizer::from_pretrained(dir);
  EXPECT_EQ(loaded.vocab_size(), static_cast<int64_t>(t.vocab.size()));
  EXPECT_EQ(loaded.added_tokens(), t.tokenizer().added_tokens());
  EXPECT_FALSE(loaded.options().clean_up_tokenization_spaces);
  for (const std::string text : {"ab cd<pad>", "Größe<eos_de> über ab", "x  y\n"})
    EXPECT_EQ(loaded.encode(text), t.tokenizer().encode(text)) << text;
}

// ---------------------------------------------------------------------------------------------
// Golden data: tokenizers' BpeTrainer on the same corpus

const fs::path kGoldenDir = fs::path(DTLAB_SOURCE_DIR) / "tests" / "golden" / "gpt2_tokenizer";

Strings golden_corpus() {
  const std::string text = dtlab::io::read_file(kGoldenDir / "corpus.txt");
  Strings lines;
  size_t start = 0;
  for (size_t end = text.find('\n'); end != std::string::npos; end = text.find('\n', start)) {
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string merge_line(const std::pair<std::string, std::string>& m) {
  return m.first + " " + m.second;
}

// Every case of trainer.json, merge for merge and id for id. No difference is allowed: the
// golden cases hold no merge that re-makes a merged token (the one re-made entry, a special
// token, cannot be queued twice), so the tie-break of Note [BPE training order] decides alone.
TEST(BpeTrainerGolden, LearnsTheMergesOfTokenizersBpeTrainer) {
  const Strings corpus = golden_corpus();
  ASSERT_EQ(corpus.size(), 1400u);
  const nlohmann::json golden = dtlab::io::read_json_file(kGoldenDir / "trainer.json");
  int cases = 0;
  for (const nlohmann::json& c : golden.at("cases")) {
    SCOPED_TRACE("trainer case " + c.at("name").get<std::string>());
    const TrainedBpe t = train(corpus, c.at("vocab_size").get<int64_t>(),
                               c.at("min_frequency").get<int64_t>(),
                               c.at("special_tokens").get<Strings>());
    const Strings expected_merges = c.at("merges").get<Strings>();
    Strings merges;
    for (const auto& m : t.merges) merges.push_back(merge_line(m));
    ASSERT_EQ(merges.size(), expected_merges.size());
    for (size_t i = 0; i < merges.size(); ++i)
      ASSERT_EQ(merges[i], expected_merges[i]) << "first difference at merge " << i;
    EXPECT_EQ(t.vocab, c.at("vocab").get<Strings>());
    EXPECT_EQ(static_cast<int64_t>(t.vocab.size()), c.at("learned_vocab_size").get<int64_t>());
    ++cases;
  }
  EXPECT_EQ(cases, 6);
}

// The trainer's four files are the ones the golden script committed for the same training:
// tokenizers' vocab.json and merges.txt, and the configs GPT2TokenizerFast was checked on.
TEST(BpeTrainerGolden, WritesTheFilesHuggingFaceWrites) {
  const TrainedBpe t = train(golden_corpus(), 1000, 2, {"<eos_de>", "<eos_en>", "<pad>"});
  const fs::path dir = dtlab::test::fresh_temp_dir("bpe_golden_files");
  t.save(dir);
  for (const char* file : {"vocab.json", "merges.txt", "tokenizer_config.json",
                           "special_tokens_map.json"}) {
    EXPECT_EQ(dtlab::io::read_file(dir / file), dtlab::io::read_file(kGoldenDir / "small" / file))
        << file;
  }
}

// With DTLAB_KIT_TOKENIZER_DIR=DIR this leaves the trained folder and DIR/kit_encodings.json
// for `make_gpt2_tokenizer_golden.py --check-kit-tokenizer DIR`; without, a temporary folder.
// Either way it checks that the saved folder loads back and encodes as the trained tokenizer.
TEST(BpeTrainerKitFiles, WritesAFolderWithItsEncodingsForTheHuggingFaceCheck) {
  const char* env = std::getenv("DTLAB_KIT_TOKENIZER_DIR");
  const fs::path dir = env ? fs::path(env) : dtlab::test::fresh_temp_dir("bpe_kit_files");
  const Strings specials = {"<eos_de>", "<eos_en>", "<pad>"};
  const TrainedBpe t = train(golden_corpus(), 1100, 1, specials);
  t.save(dir);
  const Gpt2Tokenizer loaded = Gpt2Tokenizer::from_pretrained(dir);
  const Gpt2Tokenizer trained = t.tokenizer();
  ASSERT_EQ(loaded.vocab_size(), 1100);

  const nlohmann::json golden = dtlab::io::read_json_file(kGoldenDir / "cases.json");
  nlohmann::json out = {{"vocab_size", loaded.vocab_size()}, {"special_tokens", specials},
                        {"cases", nlohmann::json::array()}};
  for (const nlohmann::json& entry : golden.at("texts")) {
    std::string text;
    if (entry.contains("text")) {
      text = entry.at("text").get<std::string>();
    } else {
      const std::string hex = entry.at("text_hex").get<std::string>();
      for (size_t i = 0; i + 1 < hex.size(); i += 2)
        text.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    const std::vector<int64_t> ids = loaded.encode(text);
    EXPECT_EQ(ids, trained.encode(text)) << entry.dump();
    nlohmann::json record = entry;
    record["ids"] = ids;
    record["decoded"] = loaded.decode(ids);
    out["cases"].push_back(record);
  }
  dtlab::io::write_json_file(dir / "kit_encodings.json", out);
  EXPECT_GE(out["cases"].size(), 300u);
}

// ---------------------------------------------------------------------------------------------
// Speed

// ~100k words as 10,000 lines of 10 (5,000 sentence pairs), drawn from 20,000 made-up words
// with a Zipf-like law (the n-th most common about 1/n as often), from a fixed seed.
Strings hundred_thousand_words() {
  const Strings syllables = {"ber", "ge", "schaft", "lich", "ung", "keit", "en",  "er",
                             "the", "ing", "tion", "ver", "an",  "un",   "zu",  "st",
                             "ö",   "ä",   "ü",   "ß",   "é",   "ion",  "al",  "re",
                             "ment", "ch", "sch", "pf",  "qu",  "ly",   "ous", "heit"};
  std::mt19937 rng(868);  // mt19937's sequence is the same everywhere; no distributions used
  Strings words;
  for (int i = 0; i < 20000; ++i) {
    std::string w;
    for (uint32_t k = 0, n = 1 + rng() % 4; k < n; ++k) w += syllables[rng() % syllables.size()];
    if (rng() % 5 == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
    words.push_back(w);
  }
  Strings lines;
  for (int line = 0; line < 10000; ++line) {
    std::string text;
    for (int k = 0; k < 10; ++k) {
      const double u = static_cast<double>(rng()) / 4294967296.0;
      const size_t index = static_cast<size_t>(std::pow(words.size(), u)) - 1;
      text += (k ? " " : "") + words[std::min(index, words.size() - 1)];
    }
    lines.push_back(text + (rng() % 3 ? "." : ", 42!"));
  }
  return lines;
}

TEST(BpeTrainerSpeed, TrainsOnAHundredThousandWords) {
  const Strings lines = hundred_thousand_words();
  BpeTrainerOptions options;
  options.vocab_size = 50257;  // GPT-2's; the exercise's setting
  options.special_tokens = {"<eos_de>", "<eos_en>", "<pad>"};
  const auto start = std::chrono::steady_clock::now();
  BpeTrainer trainer(options);
  trainer.feed(lines);
  const TrainedBpe t = trainer.train();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("BPE training on %zu lines (~100k words, %lld distinct): %zu merges in %.2f s\n",
              lines.size(), static_cast<long long>(trainer.distinct_words()), t.merges.size(),
              seconds);
  // Training stopped on min_frequency 2 before the vocabulary filled up, and every merge made
  // a new entry.
  EXPECT_LT(static_cast<int64_t>(t.vocab.size()), options.vocab_size);
  EXPECT_EQ(t.vocab.size(), 3 + kByteSymbols + t.merges.size());
  const Gpt2Tokenizer tok = t.tokenizer();
  for (size_t i = 0; i < lines.size(); i += 997)
    EXPECT_EQ(tok.decode(tok.encode(lines[i])), lines[i]);
}

}  // namespace bpe_trainer_test
