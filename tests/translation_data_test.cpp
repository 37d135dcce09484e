// Translation data (data/translation.h): the JSON-lines reader and writer, the language-model
// examples with their loss weights, the invented fixture set (tooling/translation_fixtures.h)
// and the Ding dictionary set (tooling/ding.h, dtlab-translation-data).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/tooling/process.h"
#include "dtlab/data/translation.h"
#include "dtlab/io/file.h"
#include "dtlab/metrics/bleu.h"
#include "dtlab/tooling/ding.h"
#include "dtlab/tooling/translation_fixtures.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace translation_data_test {

namespace fs = std::filesystem;
using dtlab::data::LmExampleOptions;
using dtlab::data::LmExamples;
using dtlab::data::TranslationPair;
using dtlab::tooling::LexiconEntry;
using dtlab::tooling::WordClass;
using Ids = std::vector<int64_t>;
using Weights = std::vector<float>;

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) words.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

// ---------------------------------------------------------------------------------------------
// The files

class TranslationFiles : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = dtlab::test::fresh_temp_dir("translation-files"); }
  void write(const std::string& split, const std::string& text) {
    dtlab::io::write_file_atomically(dir_ / (split + ".jsonl"), text);
  }
  std::vector<TranslationPair> read(const std::string& split) {
    return dtlab::data::read_translation_split(dir_, split);
  }
  fs::path dir_;
};

TEST_F(TranslationFiles, ReadsPairsInOrderSkippingBlankLines) {
  write("train",
        "{\"de\": \"Guten Morgen.\", \"en\": \"Good morning.\"}\n"
        "\n"
        "{\"en\": \"It\\u2019s \\\"fine\\\".\", \"de\": \"Schön, dass Sie da sind – Straße.\", \"id\": 7}\r\n"
        "   \n"
        // Hugging Face's Dataset.to_json keeps the pair under "translation".
        "{\"translation\": {\"de\": \"Danke.\", \"en\": \"Thanks.\"}}");
  const std::vector<TranslationPair> pairs = read("train");
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0], (TranslationPair{"Guten Morgen.", "Good morning."}));
  EXPECT_EQ(pairs[1], (TranslationPair{"Schön, dass Sie da sind – Straße.", "It\u2019s \"fine\"."}));
  EXPECT_EQ(pairs[2], (TranslationPair{"Danke.", "Thanks."}));
}

TEST_F(TranslationFiles, WrittenSplitsReadBackUnchanged) {
  const std::vector<TranslationPair> pairs = {
      {"Er sagte: \"Nein\\Ja\".", "He said: \"No\\Yes\"."}, {"Zwei\nZeilen\tund Tab", "two\nlines"},
      {"日本語 und Ümlaute", "Japanese and umlauts"}, {"", ""}};
  dtlab::data::write_translation_split(dir_, "test", pairs);
  EXPECT_EQ(read("test"), pairs);
  // One object per line, whatever the text holds.
  const std::string text = dtlab::io::read_file(dir_ / "test.jsonl");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
}

TEST_F(TranslationFiles, MissingFileSaysWhatTheFolderMustHold) {
  EXPECT_THROW_WITH(read("validation"), dtlab::Error, "validation.jsonl");
  EXPECT_THROW_WITH(read("validation"), dtlab::Error,
                    "must hold train.jsonl, validation.jsonl and test.jsonl");
}

TEST_F(TranslationFiles, BadLinesNameTheFileAndLine) {
  const std::string good = "{\"de\": \"a\", \"en\": \"b\"}\n";
  write("train", good + "{\"de\": \"a\", \"en\": }\n");
  EXPECT_THROW_WITH(read("train"), dtlab::Error, "train.jsonl:2: not valid JSON");
  write("train", good + good + "{\"de\": \"a\"}\n");
  EXPECT_THROW_WITH(read("train"), dtlab::Error, "train.jsonl:3: no \"en\" key");
  write("train", "{\"de\": 5, \"en\": \"b\"}\n");
  EXPECT_THROW_WITH(read("train"), dtlab::Error, "train.jsonl:1: \"de\" is a number, expected a string");
  write("train", "[\"a\", \"b\"]\n");
  EXPECT_THROW_WITH(read("train"), dtlab::Error,
                    "train.jsonl:1: expected a JSON object {\"de\": ..., \"en\": ...}, found array");
  write("train", "");
  EXPECT_THROW_WITH(read("train"), dtlab::Error, "train.jsonl: no examples (the file is empty)");
}

// ---------------------------------------------------------------------------------------------
// Language-model examples. The encoder gives one id per byte (its value), so "ab" is {97, 98};
// <eos_de> = 1, <eos_en> = 2, <pad> = 0.

constexpr int64_t kEosDe = 1, kEosEn = 2, kPad = 0;

Ids byte_ids(const std::string& s) { return Ids(s.begin(), s.end()); }

LmExamples build(const std::vector<TranslationPair>& pairs, int64_t max_length) {
  LmExampleOptions o;
  o.eos_src_id = kEosDe;
  o.eos_tgt_id = kEosEn;
  o.pad_id = kPad;
  o.max_length = max_length;
  return dtlab::data::make_lm_examples(pairs, byte_ids, o);
}

Ids row_ids(const torch::Tensor& t, int64_t row) {
  const torch::Tensor r = t[row].contiguous();
  return Ids(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
}

Weights row_weights(const torch::Tensor& t, int64_t row) {
  const torch::Tensor r = t[row].contiguous();
  return Weights(r.data_ptr<float>(), r.data_ptr<float>() + r.numel());
}

TEST(LmExamples, ShortPairIsPaddedAndOnlyEnglishLabelsCount) {
  // ids    = a  b  <eos_de> x  y  z  <eos_en> <pad>      (max_length 8)
  // target = 0  0  0        1  1  1  1        0
  // inputs = ids[:-1], labels = ids[1:], weights = target[1:]: the first counted label is "x",
  // predicted from <eos_de>; the last is <eos_en>.
  const LmExamples e = build({{"ab", "xyz"}}, 8);
  EXPECT_EQ(row_ids(e.input_ids, 0), (Ids{'a', 'b', kEosDe, 'x', 'y', 'z', kEosEn}));
  EXPECT_EQ(row_ids(e.labels, 0), (Ids{'b', kEosDe, 'x', 'y', 'z', kEosEn, kPad}));
  EXPECT_EQ(row_weights(e.label_token_weights, 0), (Weights{0, 0, 1, 1, 1, 1, 0}));
  EXPECT_EQ(e.real_tokens[0].item<int64_t>(), 7);  // all 7 input positions are real
  EXPECT_EQ(e.truncated, 0);
}

TEST(LmExamples, RowsHaveMaxLengthMinusOneColumnsOfTheDocumentedTypes) {
  const LmExamples e = build({{"ab", "xyz"}, {"", ""}, {"abcdef", "uvwxyz"}}, 8);
  EXPECT_EQ(e.size(), 3);
  for (const torch::Tensor& t : {e.input_ids, e.labels, e.label_token_weights}) {
    EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{3, 7}));
  }
  EXPECT_EQ(e.input_ids.scalar_type(), torch::kInt64);
  EXPECT_EQ(e.labels.scalar_type(), torch::kInt64);
  EXPECT_EQ(e.label_token_weights.scalar_type(), torch::kFloat32);
  EXPECT_EQ(e.real_tokens.sizes().vec(), (std::vector<int64_t>{3}));
}

TEST(LmExamples, EmptyPairStillLearnsToEndTheTranslation) {
  // ids = <eos_de> <eos_en> <pad> <pad>: the one counted label is <eos_en>.
  const LmExamples e = build({{"", ""}}, 4);
  EXPECT_EQ(row_ids(e.input_ids, 0), (Ids{kEosDe, kEosEn, kPad}));
  EXPECT_EQ(row_ids(e.labels, 0), (Ids{kEosEn, kPad, kPad}));
  EXPECT_EQ(row_weights(e.label_token_weights, 0), (Weights{1, 0, 0}));
  EXPECT_EQ(e.real_tokens[0].item<int64_t>(), 2);
}

TEST(LmExamples, LongPairIsCutAtMaxLength) {
  // a b <eos_de> x y | z <eos_en> cut off (max_length 5).
  const LmExamples e = build({{"ab", "xyz"}}, 5);
  EXPECT_EQ(row_ids(e.input_ids, 0), (Ids{'a', 'b', kEosDe, 'x'}));
  EXPECT_EQ(row_ids(e.labels, 0), (Ids{'b', kEosDe, 'x', 'y'}));
  EXPECT_EQ(row_weights(e.label_token_weights, 0), (Weights{0, 0, 1, 1}));
  EXPECT_EQ(e.real_tokens[0].item<int64_t>(), 4);
  EXPECT_EQ(e.truncated, 1);
}

TEST(LmExamples, SourceFillingTheWholeRowLeavesNothingToLearn) {
  // As in the original: a source of max_length tokens or more cuts off all of the target.
  const LmExamples e = build({{"abcdef", "x"}}, 4);
  EXPECT_EQ(row_ids(e.input_ids, 0), (Ids{'a', 'b', 'c'}));
  EXPECT_EQ(e.label_token_weights.sum().item<float>(), 0.0f);
}

TEST(LmExamples, WeightsCountEachTargetTokenAndItsEnd) {
  // Uncut rows: the weights of a row sum to len(en) + 1 (the English bytes and <eos_en>), and the
  // real tokens to len(de) + 1 + len(en) + 1.
  const std::vector<TranslationPair> pairs = {{"Hallo", "Hello"}, {"Ja", "Yes"}, {"Straße", "street"}};
  const LmExamples e = build(pairs, 32);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(e.label_token_weights[i].sum().item<float>(), pairs[i].en.size() + 1.0f);
    EXPECT_EQ(e.real_tokens[i].item<int64_t>(),
              static_cast<int64_t>(pairs[i].de.size() + pairs[i].en.size() + 2));
  }
}

TEST(LmExamples, RejectsUnusableOptions) {
  EXPECT_THROW_WITH(build({{"a", "b"}}, 1), dtlab::Error, "max_length is 1");
  LmExampleOptions unset;
  EXPECT_THROW_WITH(dtlab::data::make_lm_examples({{"a", "b"}}, byte_ids, unset), dtlab::Error,
                    "must all be set");
}

// ---------------------------------------------------------------------------------------------
// The invented fixture set

dtlab::tooling::TranslationFixtureOptions small_fixture(uint64_t seed) {
  dtlab::tooling::TranslationFixtureOptions o;
  o.seed = seed;
  o.train = 400;
  o.validation = 100;
  o.test = 50;
  return o;
}

std::vector<TranslationPair> all_pairs(const dtlab::tooling::TranslationFixture& f) {
  std::vector<TranslationPair> all = f.train;
  all.insert(all.end(), f.validation.begin(), f.validation.end());
  all.insert(all.end(), f.test.begin(), f.test.end());
  return all;
}

struct Word {
  std::string en;
  bool is_noun = false;
  bool is_verb = false;
  bool opens_clause = false;  // dass, weil
};

// Every German word form the fixture can write, with its English word, from the lexicon and the
// rule stated in translation_fixtures.h (not from the generator's code).
std::map<std::string, Word> german_forms(const std::vector<LexiconEntry>& lexicon) {
  std::map<std::string, Word> forms = {{"der", {"the"}}, {"den", {"the"}}, {"ein", {"a"}},
                                       {"einen", {"a"}}, {"dass", {"that", false, false, true}},
                                       {"weil", {"because", false, false, true}}};
  for (const LexiconEntry& e : lexicon) {
    if (e.word_class == WordClass::kAdjective) {
      for (const char* ending : {"e", "er", "en"}) forms[e.de + ending] = {e.en};
    } else {
      forms[e.de] = {e.en, e.word_class == WordClass::kNoun,
                     e.word_class == WordClass::kVerb || e.word_class == WordClass::kSayVerb};
    }
  }
  return forms;
}

std::string capitalised(std::string s) {
  s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

// The English the rule gives for a German fixture sentence: word for word, and in a dass/weil
// clause the final verb moved to just after the clause's subject (which ends at its noun).
// Without `reorder`, word for word only.
std::string rule_translation(const std::string& german, const std::map<std::string, Word>& forms,
                             bool reorder = true) {
  std::vector<std::string> de = words_of(german);
  de.back().pop_back();                                           // the final "."
  de.front()[0] = static_cast<char>(std::tolower(de.front()[0]));  // "Der" -> "der"
  std::vector<Word> en;
  for (std::string w : de) {
    if (w.back() == ',') w.pop_back();
    const auto it = forms.find(w);
    if (it == forms.end()) {
      ADD_FAILURE() << "\"" << w << "\" of \"" << german << "\" is no lexicon form";
      return {};
    }
    en.push_back(it->second);
  }
  for (size_t k = 0; reorder && k < en.size(); ++k) {
    if (!en[k].opens_clause) continue;
    EXPECT_TRUE(en.back().is_verb) << "a dass/weil clause must end with its verb: " << german;
    size_t noun = k + 1;
    while (noun < en.size() && !en[noun].is_noun) ++noun;
    const Word verb = en.back();
    en.pop_back();
    en.insert(en.begin() + static_cast<std::ptrdiff_t>(noun) + 1, verb);
    break;
  }
  std::string text;
  for (const Word& w : en) text += (text.empty() ? "" : " ") + w.en;
  return capitalised(text) + ".";
}

TEST(TranslationFixture, LexiconHas200PairsAndTheLanguagesShareNoWord) {
  const std::vector<LexiconEntry> lexicon = dtlab::tooling::translation_fixture_lexicon(0);
  EXPECT_EQ(lexicon.size(), 200u);
  std::set<std::string> de, en;
  for (const LexiconEntry& e : lexicon) {
    EXPECT_TRUE(de.insert(e.de).second) << e.de;
    EXPECT_TRUE(en.insert(e.en).second) << e.en;
  }
  for (const std::string& w : en) EXPECT_EQ(de.count(w) + de.count(capitalised(w)), 0u) << w;
}

TEST(TranslationFixture, IsDeterministicFromTheSeed) {
  const auto a = all_pairs(dtlab::tooling::make_translation_fixture(small_fixture(3)));
  const auto b = all_pairs(dtlab::tooling::make_translation_fixture(small_fixture(3)));
  const auto c = all_pairs(dtlab::tooling::make_translation_fixture(small_fixture(4)));
  EXPECT_EQ(a, b);
  EXPECT_NE(a.front().de, c.front().de);
}

TEST(TranslationFixture, SplitsHaveTheirSizesAndShareNoSentence) {
  const auto f = dtlab::tooling::make_translation_fixture(small_fixture(0));
  EXPECT_EQ(f.train.size(), 400u);
  EXPECT_EQ(f.validation.size(), 100u);
  EXPECT_EQ(f.test.size(), 50u);
  std::set<std::string> german;
  for (const TranslationPair& p : all_pairs(f)) EXPECT_TRUE(german.insert(p.de).second) << p.de;
}

TEST(TranslationFixture, EveryEnglishSentenceIsTheRuleAppliedToItsGerman) {
  const std::map<std::string, Word> forms = german_forms(dtlab::tooling::translation_fixture_lexicon(0));
  int reordered = 0;
  for (const TranslationPair& p : all_pairs(dtlab::tooling::make_translation_fixture(small_fixture(0)))) {
    const size_t de_words = words_of(p.de).size(), en_words = words_of(p.en).size();
    EXPECT_TRUE(de_words >= 4 && de_words <= 10) << p.de;
    EXPECT_EQ(en_words, de_words) << p.de << " -> " << p.en;
    ASSERT_EQ(p.en, rule_translation(p.de, forms)) << "German: " << p.de;
    reordered += rule_translation(p.de, forms, /*reorder=*/false) != p.en;
  }
  // About 35% of the sentences hold a dass/weil clause (see the header); 550 sentences here.
  EXPECT_GT(reordered, 120);
  EXPECT_LT(reordered, 260);
}

TEST(TranslationFixture, CopyingScoresNearZeroAndWordForWordFallsShortOfTheRule) {
  // What a model can get without learning: copying the German shares only the periods with the
  // English; translating word for word but not moving the verb loses the clauses' 3- and 4-grams.
  const auto f = dtlab::tooling::make_translation_fixture(small_fixture(0));
  const std::map<std::string, Word> forms = german_forms(dtlab::tooling::translation_fixture_lexicon(0));
  std::vector<std::string> copy, word_for_word, rule, refs;
  for (const TranslationPair& p : f.test) {
    copy.push_back(p.de);
    word_for_word.push_back(rule_translation(p.de, forms, /*reorder=*/false));
    rule.push_back(rule_translation(p.de, forms));
    refs.push_back(p.en);
  }
  using dtlab::metrics::corpus_bleu;
  const double copied = corpus_bleu(copy, refs).score;
  const double literal = corpus_bleu(word_for_word, refs).score;
  std::printf("BLEU on the fixture's test split: copy %.2f, word for word %.2f\n", copied, literal);
  EXPECT_LT(copied, 5.0);
  EXPECT_LT(literal, 90.0);
  EXPECT_GT(literal, copied);
  EXPECT_NEAR(corpus_bleu(rule, refs).score, 100.0, 1e-9);
}

TEST(TranslationFixture, DtlabFixturesWritesItWithTheRequestedSizes) {
  const fs::path out = dtlab::test::fresh_temp_dir("translation-fixtures-bin");
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("dtlab-fixtures"), "--out", out.string(), "--train_examples", "8", "--dev_examples", "4",
       "--translation_sizes", "30", "20", "10"},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(dtlab::data::read_translation_split(out / "translation", "train").size(), 30u);
  EXPECT_EQ(dtlab::data::read_translation_split(out / "translation", "validation").size(), 20u);
  EXPECT_EQ(dtlab::data::read_translation_split(out / "translation", "test").size(), 10u);
  // The same sentences as the library writes for the same seed and sizes.
  dtlab::tooling::TranslationFixtureOptions o;
  o.train = 30;
  o.validation = 20;
  o.test = 10;
  EXPECT_EQ(dtlab::data::read_translation_split(out / "translation", "test"),
            dtlab::tooling::make_translation_fixture(o).test);
}

// ---------------------------------------------------------------------------------------------
// The Ding dictionary set

TEST(Ding, CleaningKeepsTheFirstSynonymWithoutAnnotations) {
  using dtlab::tooling::clean_ding_text;
  EXPECT_EQ(clean_ding_text("Er ist nur ein Kind.; Er ist (doch) noch ein Kind."), "Er ist nur ein Kind.");
  EXPECT_EQ(clean_ding_text("Aal {m} (auf der Speisekarte) [cook.]"), "Aal");
  EXPECT_EQ(clean_ding_text("Das ist mir egal (wurst) [ugs.] ."), "Das ist mir egal.");
  EXPECT_EQ(clean_ding_text("eel smokery <eelsmoking business> ,  now"), "eel smokery, now");
  EXPECT_EQ(clean_ding_text("Sie sagte: „Nein!“"), "Sie sagte: „Nein!“");
}

TEST(Ding, CleaningDropsAlternativesTemplatesAndBrokenBrackets) {
  using dtlab::tooling::clean_ding_text;
  EXPECT_EQ(clean_ding_text("Ich bin/war kurz weggetreten."), "");
  EXPECT_EQ(clean_ding_text("jdm. etw. geben"), "");
  EXPECT_EQ(clean_ding_text("to give sb. sth."), "");
  EXPECT_EQ(clean_ding_text("Es ist … wie immer."), "");
  EXPECT_EQ(clean_ding_text("Er (sagt nichts."), "");
  EXPECT_EQ(clean_ding_text("Er sagt] nichts."), "");
}

// A Ding-format file with one kept pair per comment marked "kept", in file order.
const char* const kSmallDing =
    "# Version :: test\n"
    "# a comment line :: with a separator\n"
    "Hund {m} | Hunde {pl} | Der Hund bellt laut. :: dog | dogs | The dog barks loudly.\n"  // kept
    "Katze {f} | Die Katze schläft (gern) am Ofen. :: cat | The cat sleeps by the stove.\n"  // kept
    "Haus {n} | Das Haus ist alt. | Das Haus ist sehr alt. :: house | The house is old.\n"  // counts differ
    "wieder | Er kommt immer wieder zurück.; Er kehrt zurück. :: again | He keeps coming back.\n"  // kept
    "alt | Das ist aber alt. :: old | that is really old.\n"  // English starts lower-case
    "zu kurz | Ja. :: too short | Yes.\n"  // too few words
    "Hund {m} | Der Hund bellt laut. :: hound | The hound bays loudly.\n"  // German seen before
    "geben | Ich gebe/gab es ihm. :: to give | I give/gave it to him.\n"  // alternatives
    "Frage {f} | Wie spät ist es jetzt? :: question | What time is it now?\n"  // kept
    "Tür {f} | Mach bitte die Tür zu! [ugs.] :: door | Please close the door! [coll.]\n"  // kept
    "kein Separator hier\n"
    "Baum {m} | Der Baum trägt Früchte. :: tree | The tree bears fruit.\n";  // kept

const std::vector<TranslationPair> kSmallDingKept = {
    {"Der Hund bellt laut.", "The dog barks loudly."},
    {"Die Katze schläft am Ofen.", "The cat sleeps by the stove."},
    {"Er kommt immer wieder zurück.", "He keeps coming back."},
    {"Wie spät ist es jetzt?", "What time is it now?"},
    {"Mach bitte die Tür zu!", "Please close the door!"},
    {"Der Baum trägt Früchte.", "The tree bears fruit."},
};

class DingFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = dtlab::test::fresh_temp_dir("ding");
    dtlab::io::write_file_atomically(dir_ / "de-en", kSmallDing);
    options_.ding = dir_ / "de-en";
    options_.train = 3;
    options_.validation = 2;
    options_.test = 1;
  }
  fs::path dir_;
  dtlab::tooling::DingOptions options_;
};

TEST_F(DingFile, KeepsSentencePairsInFileOrder) {
  EXPECT_EQ(dtlab::tooling::read_ding_sentences(options_), kSmallDingKept);
}

TEST_F(DingFile, MinWordsSelectsLongerSentences) {
  // Both sides need 5 words: "Der Hund bellt laut." has 4, "He keeps coming back." has 4.
  options_.min_words = 5;
  const auto kept = dtlab::tooling::read_ding_sentences(options_);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].de, "Die Katze schläft am Ofen.");
  EXPECT_EQ(kept[1].de, "Wie spät ist es jetzt?");
}

TEST_F(DingFile, SplitsAreAShuffleOfTheKeptPairsFixedByTheSeed) {
  const auto s = dtlab::tooling::make_ding_splits(options_);
  EXPECT_EQ(s.candidates, 6);
  ASSERT_EQ(s.train.size(), 3u);
  ASSERT_EQ(s.validation.size(), 2u);
  ASSERT_EQ(s.test.size(), 1u);
  std::vector<TranslationPair> all = s.train;
  all.insert(all.end(), s.validation.begin(), s.validation.end());
  all.insert(all.end(), s.test.begin(), s.test.end());
  std::set<std::string> german;
  for (const TranslationPair& p : all) {
    EXPECT_TRUE(german.insert(p.de).second);
    EXPECT_NE(std::find(kSmallDingKept.begin(), kSmallDingKept.end(), p), kSmallDingKept.end());
  }
  EXPECT_EQ(dtlab::tooling::make_ding_splits(options_).train, s.train);
  bool some_seed_differs = false;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    options_.seed = seed;
    some_seed_differs = some_seed_differs || dtlab::tooling::make_ding_splits(options_).train != s.train;
  }
  EXPECT_TRUE(some_seed_differs);
}

TEST_F(DingFile, TooFewPairsSaysWhatToChange) {
  options_.train = 6;
  EXPECT_THROW_WITH(dtlab::tooling::make_ding_splits(options_), dtlab::Error,
                    "has 6 sentence pairs of 4 to 30 words, but the splits need 9: lower --min_words");
}

TEST_F(DingFile, ToolWritesTheThreeSplits) {
  const fs::path out = dir_ / "out";
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("dtlab-translation-data"), "--ding", (dir_ / "de-en").string(), "--out", out.string(),
       "--train", "3", "--validation", "2", "--test", "1"},
      60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("6 sentence pairs"), std::string::npos) << r.output;
  const auto train = dtlab::data::read_translation_split(out, "train");
  EXPECT_EQ(train, dtlab::tooling::make_ding_splits(options_).train);
  EXPECT_EQ(dtlab::data::read_translation_split(out, "validation").size(), 2u);
  EXPECT_EQ(dtlab::data::read_translation_split(out, "test").size(), 1u);
}

TEST_F(DingFile, ToolWithoutTheDictionarySaysHowToInstallIt) {
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("dtlab-translation-data"), "--ding", (dir_ / "absent").string(), "--out", (dir_ / "o").string()},
      60);
  EXPECT_EQ(r.exit_code, dtlab::kExitUsage) << r.output;
  EXPECT_NE(r.output.find("sudo ./scripts/setup.sh --with-real-text"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "o"));
}

}  // namespace translation_data_test
