// BertTokenizer: hand-checked examples of each rule, then golden data from Hugging Face's slow
// BertTokenizer (tests/golden/make_tokenizer_golden.py) that must match token for token.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tokenizer/bert_tokenizer.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace tokenizer_test {

namespace fs = std::filesystem;
using dtlab::tokenizer::BertTokenizer;
using dtlab::tokenizer::BertTokenizerOptions;
using dtlab::tokenizer::Encoding;
using Tokens = std::vector<std::string>;

// Ids 0-4 are the special tokens, so the ids in the expectations below are easy to read.
constexpr int64_t kPad = 0, kUnk = 1, kCls = 2, kSep = 3, kMask = 4;

const Tokens kVocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",                         // 0-4
    "hello", "world", "the", "dog", "cafe", "café", "Café", "naive",     // 5-12
    "un", "##aff", "##able", "una", "##ffa", "##ble",                   // 13-18
    ",", "!", ".", "$", "'", "[", "]",                                   // 19-25
    "a", "b", "c", "d", "s", "u", "5", "##a", "##b", "##c", "##d",      // 26-36
    "中", "国", "istanbul", "mask", "Hello", "σ", "##σ", "ς", "##ς",    // 37-45
};

BertTokenizer make_tokenizer(bool lower_case, std::optional<bool> strip_accents = std::nullopt) {
  BertTokenizerOptions options;
  options.do_lower_case = lower_case;
  options.strip_accents = strip_accents;
  return BertTokenizer(kVocab, options);
}

const BertTokenizer& uncased() {
  static const BertTokenizer t = make_tokenizer(true);
  return t;
}

const BertTokenizer& cased() {
  static const BertTokenizer t = make_tokenizer(false);
  return t;
}

void write_vocab(const fs::path& dir, const Tokens& entries) {
  std::string text;
  for (const std::string& e : entries) text += e + "\n";
  dtlab::io::write_file_atomically(dir / "vocab.txt", text);
}

// ---------------------------------------------------------------------------------------------
// Basic tokenisation

TEST(BertTokenizer, SplitsPunctuationIntoSeparateTokens) {
  EXPECT_EQ(uncased().tokenize("Hello, world!!"), (Tokens{"hello", ",", "world", "!", "!"}));
  EXPECT_EQ(uncased().tokenize("U.S.A."), (Tokens{"u", ".", "s", ".", "a", "."}));
  // Every non-alphanumeric ASCII character counts, even symbols such as "$".
  EXPECT_EQ(uncased().tokenize("$5"), (Tokens{"$", "5"}));
}

TEST(BertTokenizer, StripsAccentsWhenLowerCasing) {
  EXPECT_EQ(uncased().tokenize("Café NAÏVE"), (Tokens{"cafe", "naive"}));
  // The same with the accent as a separate combining character.
  EXPECT_EQ(uncased().tokenize("Cafe\u0301"), (Tokens{"cafe"}));
}

TEST(BertTokenizer, KeepsAccentsWhenCased) {
  EXPECT_EQ(cased().tokenize("Café café"), (Tokens{"Café", "café"}));
  // NFC first: e + U+0301 is the vocabulary's precomposed "é".
  EXPECT_EQ(cased().tokenize("Cafe\u0301"), (Tokens{"Café"}));
}

TEST(BertTokenizer, StripAccentsOptionOverridesTheDefault) {
  EXPECT_EQ(make_tokenizer(true, false).tokenize("CAFÉ"), (Tokens{"café"}));
  EXPECT_EQ(make_tokenizer(false, true).tokenize("café"), (Tokens{"cafe"}));
}

TEST(BertTokenizer, SplitsCjkCharactersIntoSingleTokens) {
  EXPECT_EQ(uncased().tokenize("hello中国world"), (Tokens{"hello", "中", "国", "world"}));
}

TEST(BertTokenizer, CleansControlCharactersAndWhitespace) {
  // Tab, newline and no-break space separate words; BEL and zero-width space vanish.
  EXPECT_EQ(uncased().tokenize(" hello\tworld\nthe\u00a0dog "),
            (Tokens{"hello", "world", "the", "dog"}));
  EXPECT_EQ(uncased().tokenize("hel\alo wor\u200bld"), (Tokens{"hello", "world"}));
  EXPECT_EQ(uncased().tokenize(std::string("hel\0lo", 6)), (Tokens{"hello"}));
  EXPECT_EQ(uncased().tokenize(""), Tokens{});
  EXPECT_EQ(uncased().tokenize(" \t\r\n "), Tokens{});
}

TEST(BertTokenizer, InvalidUtf8BytesAreDropped) {
  // Read as U+FFFD, which cleaning removes, so the word is not split there.
  EXPECT_EQ(uncased().tokenize("hel\xfflo wor\xc3ld"), (Tokens{"hello", "world"}));
}

TEST(BertTokenizer, DottedCapitalIBecomesPlainIWhenUncased) {
  // Python lower-cases "İ" to "i" + U+0307 (combining dot above); stripping accents drops the dot.
  EXPECT_EQ(uncased().tokenize("İSTANBUL İstanbul"), (Tokens{"istanbul", "istanbul"}));
  EXPECT_EQ(make_tokenizer(true, false).tokenize("İstanbul"), (Tokens{"[UNK]"}));
}

TEST(BertTokenizer, CapitalSigmaNeverLowersToFinalSigma) {
  // Hugging Face lower-cases one character at a time, so Python's word-final "ς" never appears.
  EXPECT_EQ(uncased().tokenize("ΣΣ"), (Tokens{"σ", "##σ"}));
}

// ---------------------------------------------------------------------------------------------
// Special tokens

TEST(BertTokenizer, KeepsSpecialTokensWhole) {
  EXPECT_EQ(uncased().tokenize("hello [MASK] world"), (Tokens{"hello", "[MASK]", "world"}));
  // They are cut out before anything else, even without spaces around them.
  EXPECT_EQ(uncased().tokenize("a[SEP]b[MASK][MASK]"),
            (Tokens{"a", "[SEP]", "b", "[MASK]", "[MASK]"}));
}

TEST(BertTokenizer, LowerCaseSpecialTokenIsOrdinaryText) {
  EXPECT_EQ(uncased().tokenize("[mask]"), (Tokens{"[", "mask", "]"}));
  EXPECT_EQ(uncased().tokenize("[Mask]"), (Tokens{"[", "mask", "]"}));
}

// ---------------------------------------------------------------------------------------------
// WordPiece

TEST(BertTokenizer, GreedyLongestMatchFirstWordPieces) {
  // "una" is longer than "un", so "unaffable" is "una ##ffa ##ble", not "un ##aff ##able".
  EXPECT_EQ(uncased().tokenize("unaffable"), (Tokens{"una", "##ffa", "##ble"}));
  EXPECT_EQ(uncased().tokenize("abcd"), (Tokens{"a", "##b", "##c", "##d"}));
}

TEST(BertTokenizer, UnknownWordBecomesUnk) {
  // "##x" is missing: the whole word is unknown, not only its last letter.
  EXPECT_EQ(uncased().tokenize("unaffablex hello"), (Tokens{"[UNK]", "hello"}));
}

TEST(BertTokenizer, OverlongWordBecomesUnk) {
  const int limit = BertTokenizerOptions{}.max_input_chars_per_word;
  EXPECT_EQ(uncased().tokenize("a" + std::string(limit - 1, 'b')).size(), size_t(limit));
  EXPECT_EQ(uncased().tokenize("a" + std::string(limit, 'b')), (Tokens{"[UNK]"}));
}

TEST(BertTokenizer, TokensAndIdsMapBothWays) {
  EXPECT_EQ(uncased().convert_tokens_to_ids({"hello", "world", "nonexistent"}),
            (std::vector<int64_t>{5, 6, kUnk}));
  EXPECT_EQ(uncased().id_to_token(5), "hello");
  EXPECT_EQ(uncased().id_to_token(-1), "[UNK]");
  EXPECT_EQ(uncased().id_to_token(uncased().vocab_size()), "[UNK]");
  EXPECT_EQ(uncased().pad_id(), kPad);
  EXPECT_EQ(uncased().cls_id(), kCls);
  EXPECT_EQ(uncased().sep_id(), kSep);
  EXPECT_EQ(uncased().unk_id(), kUnk);
}

// ---------------------------------------------------------------------------------------------
// encode: layout, truncation, padding

TEST(BertTokenizer, EncodesPairWithTokenTypeIds) {
  const Encoding e = uncased().encode("hello world", "the dog", 7);
  EXPECT_EQ(e.input_ids, (std::vector<int64_t>{kCls, 5, 6, kSep, 7, 8, kSep}));
  EXPECT_EQ(e.token_type_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(e.attention_mask, (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1}));
}

TEST(BertTokenizer, PadsToMaxLengthWithZeroMask) {
  const Encoding e = uncased().encode("hello", std::nullopt, 6);
  EXPECT_EQ(e.input_ids, (std::vector<int64_t>{kCls, 5, kSep, kPad, kPad, kPad}));
  EXPECT_EQ(e.token_type_ids, (std::vector<int64_t>{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(e.attention_mask, (std::vector<int64_t>{1, 1, 1, 0, 0, 0}));
}

TEST(BertTokenizer, PairTruncationRemovesFromTheLongerSegmentFirst) {
  // a has 6 tokens, b 2; 11 tokens in all, 3 too many: all three come off a.
  const Encoding e = uncased().encode("a b c d a b", "hello world", 8);
  EXPECT_EQ(e.input_ids, (std::vector<int64_t>{kCls, 26, 27, 28, kSep, 5, 6, kSep}));
  EXPECT_EQ(e.token_type_ids, (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1, 1}));
}

TEST(BertTokenizer, PairTruncationTakesTheOddTokenFromTheSecondSegment) {
  // 4 and 4 tokens, 3 too many: one from a, two from b.
  const Encoding e = uncased().encode("a b c d", "d c b a", 8);
  EXPECT_EQ(e.input_ids, (std::vector<int64_t>{kCls, 26, 27, 28, kSep, 29, 28, kSep}));
}

TEST(BertTokenizer, SingleSentenceTruncationKeepsTheStart) {
  const Encoding e = uncased().encode("hello world the dog", std::nullopt, 4);
  EXPECT_EQ(e.input_ids, (std::vector<int64_t>{kCls, 5, 6, kSep}));
  // Hugging Face returns the sentence untruncated at max_length 2; we keep the length promise.
  EXPECT_EQ(uncased().encode("hello", std::nullopt, 2).input_ids,
            (std::vector<int64_t>{kCls, kSep}));
}

TEST(BertTokenizer, MaxLengthTooSmallIsAnError) {
  EXPECT_THROW_WITH(uncased().encode("a", "b", 2), dtlab::Error, "max_length 2");
  EXPECT_THROW_WITH(uncased().encode("a", std::nullopt, 1), dtlab::Error, "special tokens");
  EXPECT_EQ(uncased().encode("a", "b", 3).input_ids, (std::vector<int64_t>{kCls, kSep, kSep}));
}

// ---------------------------------------------------------------------------------------------
// Loading

TEST(BertTokenizer, MissingSpecialTokenIsAnError) {
  BertTokenizerOptions options;
  options.mask_token = "<mask>";
  EXPECT_THROW_WITH(BertTokenizer(kVocab, options), dtlab::Error, "<mask>");
}

TEST(BertTokenizer, MissingVocabIsAClearError) {
  const fs::path dir = dtlab::test::fresh_temp_dir("tokenizer_missing");
  try {
    BertTokenizer::from_pretrained(dir);
    ADD_FAILURE() << "expected dtlab::Error";
  } catch (const dtlab::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find((dir / "vocab.txt").string()), std::string::npos) << message;
    EXPECT_NE(message.find("Hugging Face BERT folder"), std::string::npos) << message;
    EXPECT_NE(message.find("dtlab-fixtures"), std::string::npos) << message;
  }
}

TEST(BertTokenizer, InfersLowerCaseFromVocabulary) {
  const fs::path dir = dtlab::test::fresh_temp_dir("tokenizer_infer");
  // Bracketed markers and the "##" prefix do not count as upper-case text.
  write_vocab(dir, {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "hello", "##s"});
  EXPECT_TRUE(BertTokenizer::from_pretrained(dir).options().do_lower_case);
  write_vocab(dir, {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##S"});
  EXPECT_FALSE(BertTokenizer::from_pretrained(dir).options().do_lower_case);
  write_vocab(dir, {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "Émile"});
  EXPECT_FALSE(BertTokenizer::from_pretrained(dir).options().do_lower_case);
}

TEST(BertTokenizer, ReadsTokenizerConfig) {
  const fs::path dir = dtlab::test::fresh_temp_dir("tokenizer_config");
  write_vocab(dir, {"<pad>", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"});
  // The config wins over inference; special tokens may be AddedToken objects.
  dtlab::io::write_file_atomically(dir / "tokenizer_config.json", R"({
    "do_lower_case": false, "strip_accents": true, "tokenize_chinese_chars": false,
    "pad_token": {"content": "<pad>", "lstrip": false}, "model_max_length": 512})");
  const BertTokenizer t = BertTokenizer::from_pretrained(dir);
  EXPECT_FALSE(t.options().do_lower_case);
  EXPECT_EQ(t.options().strip_accents, std::optional<bool>(true));
  EXPECT_FALSE(t.options().tokenize_chinese_chars);
  EXPECT_EQ(t.options().pad_token, "<pad>");
  EXPECT_EQ(t.pad_id(), 0);

  dtlab::io::write_file_atomically(dir / "tokenizer_config.json", R"({"do_lower_case": "yes"})");
  EXPECT_THROW_WITH(BertTokenizer::from_pretrained(dir), dtlab::Error, "do_lower_case");
}

TEST(BertTokenizer, VocabLinesFollowPythonReadlines) {
  const fs::path dir = dtlab::test::fresh_temp_dir("tokenizer_lines");
  // An empty line is a token; "\r\n" and a lone "\r" end lines like "\n"; no final newline.
  dtlab::io::write_file_atomically(dir / "vocab.txt",
                                   "[PAD]\n[UNK]\r\n[CLS]\r[SEP]\n\n[MASK]\nhello");
  const BertTokenizer t = BertTokenizer::from_pretrained(dir);
  EXPECT_EQ(t.vocab_size(), 7);
  EXPECT_EQ(t.token_to_id("[CLS]"), 2);
  EXPECT_EQ(t.id_to_token(4), "");
  EXPECT_EQ(t.token_to_id("hello"), 6);

  dtlab::io::write_file_atomically(dir / "vocab.txt", "[PAD]\n[UNK]\nbad\xff\n");
  EXPECT_THROW_WITH(BertTokenizer::from_pretrained(dir), dtlab::Error, "vocab.txt:3");
}

// ---------------------------------------------------------------------------------------------
// Golden data from Hugging Face

const fs::path kGoldenDir = fs::path(DTLAB_SOURCE_DIR) / "tests" / "golden" / "tokenizer";

// The tokenizer a config of cases.json describes, loaded as the generator loaded it.
BertTokenizer golden_tokenizer(const nlohmann::json& config) {
  const fs::path folder = kGoldenDir / config.at("folder").get<std::string>();
  BertTokenizer loaded = BertTokenizer::from_pretrained(folder);
  BertTokenizerOptions options = loaded.options();
  options.do_lower_case = config.at("do_lower_case").get<bool>();
  options.strip_accents = config.at("strip_accents").is_null()
                              ? std::nullopt
                              : std::optional<bool>(config.at("strip_accents").get<bool>());
  options.tokenize_chinese_chars = config.at("tokenize_chinese_chars").get<bool>();
  if (config.at("from_pretrained").get<bool>()) {
    // from_pretrained alone must arrive at Hugging Face's settings.
    EXPECT_EQ(loaded.options().do_lower_case, options.do_lower_case) << folder;
    EXPECT_EQ(loaded.options().strip_accents, options.strip_accents) << folder;
    EXPECT_EQ(loaded.options().tokenize_chinese_chars, options.tokenize_chinese_chars) << folder;
    return loaded;
  }
  Tokens vocab;
  for (int64_t id = 0; id < loaded.vocab_size(); ++id) vocab.push_back(loaded.id_to_token(id));
  return BertTokenizer(vocab, options);
}

struct Golden {
  nlohmann::json cases = dtlab::io::read_json_file(kGoldenDir / "cases.json");
  std::map<std::string, BertTokenizer> tokenizers;
  Golden() {
    for (const auto& [name, config] : cases.at("configs").items())
      tokenizers.emplace(name, golden_tokenizer(config));
  }
};

const Golden& golden() {
  static const Golden g;
  return g;
}

TEST(BertTokenizerGolden, TokenizeMatchesHuggingFace) {
  int checked = 0;
  for (const nlohmann::json& c : golden().cases.at("tokenize")) {
    const std::string text = c.contains("text") ? c.at("text").get<std::string>()
                                                : dtlab::test::from_hex(c.at("text_hex").get<std::string>());
    for (const auto& [name, expected] : c.at("results").items()) {
      SCOPED_TRACE("config " + name + ", text \"" + text + "\"");
      const BertTokenizer& t = golden().tokenizers.at(name);
      const Tokens tokens = t.tokenize(text);
      EXPECT_EQ(tokens, expected.at("tokens").get<Tokens>());
      EXPECT_EQ(t.convert_tokens_to_ids(tokens), expected.at("ids").get<std::vector<int64_t>>());
      ++checked;
    }
  }
  EXPECT_GE(checked, 200) << "cases.json looks truncated";
}

TEST(BertTokenizerGolden, EncodeMatchesHuggingFace) {
  int checked = 0;
  for (const nlohmann::json& c : golden().cases.at("encode")) {
    const std::string a = c.at("a").get<std::string>();
    std::optional<std::string> b;
    if (!c.at("b").is_null()) b = c.at("b").get<std::string>();
    const int max_length = c.at("max_length").get<int>();
    SCOPED_TRACE("config " + c.at("config").get<std::string>() + ", a \"" + a + "\", b " +
                 (b ? "\"" + *b + "\"" : "none") + ", max_length " + std::to_string(max_length));
    const BertTokenizer& t = golden().tokenizers.at(c.at("config").get<std::string>());
    const Encoding e = b ? t.encode(a, std::string_view(*b), max_length)
                         : t.encode(a, std::nullopt, max_length);
    EXPECT_EQ(e.input_ids, c.at("input_ids").get<std::vector<int64_t>>());
    EXPECT_EQ(e.token_type_ids, c.at("token_type_ids").get<std::vector<int64_t>>());
    EXPECT_EQ(e.attention_mask, c.at("attention_mask").get<std::vector<int64_t>>());
    ++checked;
  }
  EXPECT_GE(checked, 40) << "cases.json looks truncated";
}

}  // namespace tokenizer_test
