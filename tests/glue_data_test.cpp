// GLUE RTE data: reading train.tsv/dev.tsv as run_glue's RteProcessor does, turning examples
// into padded feature tensors, and selecting minibatch rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/data/glue.h"
#include "dtlab/io/file.h"
#include "dtlab/tokenizer/bert_tokenizer.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace glue_data_test {

namespace fs = std::filesystem;
using dtlab::data::Batch;
using dtlab::data::Features;
using dtlab::data::InputExample;
using dtlab::tokenizer::BertTokenizer;
using dtlab::tokenizer::BertTokenizerOptions;

constexpr const char* kHeader = "index\tsentence1\tsentence2\tlabel\n";

fs::path write_tsv(const std::string& dir_name, const std::string& file, const std::string& text) {
  const fs::path dir = dtlab::test::fresh_temp_dir(dir_name);
  dtlab::io::write_file_atomically(dir / file, text);
  return dir / file;
}

// Ids 0-4 are the special tokens; the words follow, so the expected ids below are easy to read.
constexpr int64_t kPad = 0, kCls = 2, kSep = 3;
constexpr int64_t kThe = 5, kCat = 6, kSat = 7, kA = 8, kDog = 9, kRan = 10, kDot = 11;

const BertTokenizer& tokenizer() {
  static const BertTokenizer t({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat",
                                "a", "dog", "ran", "."},
                               BertTokenizerOptions{});
  return t;
}

std::vector<int64_t> row(const torch::Tensor& t, int64_t i) {
  const torch::Tensor r = t[i].contiguous();
  return std::vector<int64_t>(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
}

// ---------------------------------------------------------------------------------------------
// read_rte_examples

TEST(ReadRteExamples, ReadsEveryLineWithGuidFromTheIndexColumnAndLabelIds) {
  const fs::path tsv = write_tsv("rte_ok", "train.tsv",
                                 std::string(kHeader) +
                                     "17\tThe cat sat.\tA cat sat.\tentailment\n"
                                     "3\tA dog ran.\tThe cat ran.\tnot_entailment\n");
  const std::vector<InputExample> ex = dtlab::data::read_rte_examples(tsv, "train");
  ASSERT_EQ(ex.size(), 2u);
  // run_glue's guid is "<set>-<line[0]>": the index column, not the line position.
  EXPECT_EQ(ex[0].guid, "train-17");
  EXPECT_EQ(ex[0].text_a, "The cat sat.");
  EXPECT_EQ(ex[0].text_b, "A cat sat.");
  EXPECT_EQ(ex[0].label, 0);  // "entailment" is label 0 of RTE's list
  EXPECT_EQ(ex[1].guid, "train-3");
  EXPECT_EQ(ex[1].text_a, "A dog ran.");
  EXPECT_EQ(ex[1].text_b, "The cat ran.");
  EXPECT_EQ(ex[1].label, 1);  // "not_entailment" is label 1
}

TEST(ReadRteExamples, SetTypeNamesTheGuid) {
  const fs::path tsv = write_tsv("rte_dev", "dev.tsv", std::string(kHeader) + "0\ta\tb\tentailment\n");
  EXPECT_EQ(dtlab::data::read_rte_examples(tsv, "dev").at(0).guid, "dev-0");
}

TEST(ReadRteExamples, AcceptsCrlfLineEndings) {
  const fs::path tsv = write_tsv("rte_crlf", "train.tsv",
                                 "index\tsentence1\tsentence2\tlabel\r\n"
                                 "0\tThe cat sat.\tA cat sat.\tnot_entailment\r\n"
                                 "1\tA dog ran.\tA dog.\tentailment\r\n");
  const std::vector<InputExample> ex = dtlab::data::read_rte_examples(tsv, "train");
  ASSERT_EQ(ex.size(), 2u);
  // Without stripping "\r" the label would be "not_entailment\r" and unknown.
  EXPECT_EQ(ex[0].label, 1);
  EXPECT_EQ(ex[1].label, 0);
  EXPECT_EQ(ex[1].text_b, "A dog.");
}

// Spreadsheet tools save UTF-8 with a byte-order mark (EF BB BF) before the header; run_glue
// reads with "utf-8-sig" and pandas skips it, so the header is still "index".
TEST(ReadRteExamples, SkipsAUtf8ByteOrderMarkBeforeTheHeader) {
  const fs::path tsv = write_tsv("rte_bom", "train.tsv",
                                 "\xEF\xBB\xBFindex\tsentence1\tsentence2\tlabel\r\n"
                                 "5\tThe cat sat.\tA cat sat.\tnot_entailment\r\n");
  const std::vector<InputExample> ex = dtlab::data::read_rte_examples(tsv, "train");
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].guid, "train-5");
  EXPECT_EQ(ex[0].text_a, "The cat sat.");
  EXPECT_EQ(ex[0].label, 1);
}

TEST(ReadRteExamples, ByteOrderMarkOnlyFileIsEmpty) {
  const fs::path tsv = write_tsv("rte_bom_only", "dev.tsv", "\xEF\xBB\xBF");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "dev"), dtlab::Error, "empty");
}

// Only a mark that opens the file is skipped: one later is text, as Python keeps it, so a
// guid keeps it too.
TEST(ReadRteExamples, ByteOrderMarkAfterTheStartStaysText) {
  const fs::path tsv = write_tsv("rte_bom_late", "dev.tsv",
                                 std::string(kHeader) + "\xEF\xBB\xBF" "7\ta\tb\tentailment\n");
  EXPECT_EQ(dtlab::data::read_rte_examples(tsv, "dev").at(0).guid, "dev-\xEF\xBB\xBF" "7");
}

TEST(ReadRteExamples, HeaderOnlyFileHasNoExamples) {
  const fs::path tsv = write_tsv("rte_header_only", "dev.tsv", kHeader);
  EXPECT_TRUE(dtlab::data::read_rte_examples(tsv, "dev").empty());
}

TEST(ReadRteExamples, MissingHeaderIsAnErrorAtLineOne) {
  const fs::path tsv = write_tsv("rte_no_header", "train.tsv", "0\ta\tb\tentailment\n");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error, "train.tsv:1:");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error, "header line");
}

TEST(ReadRteExamples, LineWithThreeFieldsIsAnErrorNamingFileLineAndCount) {
  const fs::path tsv = write_tsv("rte_three", "train.tsv",
                                 std::string(kHeader) + "0\ta\tb\tentailment\n1\ta\tentailment\n");
  // Line 1 is the header, line 2 is fine, line 3 has one tab too few.
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error, "train.tsv:3:");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error,
                    "expected 4 tab-separated fields");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error, "found 3");
}

TEST(ReadRteExamples, LineWithFiveFieldsIsAnErrorNamingFileLineAndCount) {
  // A tab inside a sentence (RTE has no quoting) makes a fifth field.
  const fs::path tsv =
      write_tsv("rte_five", "dev.tsv", std::string(kHeader) + "0\ta\tx\ty\tentailment\n");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "dev"), dtlab::Error, "dev.tsv:2:");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "dev"), dtlab::Error, "found 5");
}

TEST(ReadRteExamples, UnknownLabelIsAnErrorNamingTheLabelAndTheValidOnes) {
  const fs::path tsv = write_tsv("rte_label", "train.tsv",
                                 std::string(kHeader) + "0\ta\tb\tentailment\n1\ta\tb\tneutral\n");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error, "train.tsv:3:");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error, "\"neutral\"");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error,
                    "entailment or not_entailment");
}

TEST(ReadRteExamples, EmptyFileIsAnErrorAskingForTheHeader) {
  const fs::path tsv = write_tsv("rte_empty", "train.tsv", "");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error, tsv.string());
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error, "empty");
}

TEST(ReadRteExamples, MissingFileIsAnErrorSayingWhatTheDataDirMustHold) {
  const fs::path tsv = dtlab::test::fresh_temp_dir("rte_missing") / "train.tsv";
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error, tsv.string());
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error,
                    "train.tsv and dev.tsv");
  EXPECT_THROW_WITH(dtlab::data::read_rte_examples(tsv, "train"), dtlab::Error, "dtlab-fixtures");
}

// ---------------------------------------------------------------------------------------------
// convert_examples_to_features, make_batch

TEST(ConvertExamplesToFeatures, LaysOutClsASepBSepThenPadding) {
  const std::vector<InputExample> ex = {{"train-0", "The cat sat.", "A dog ran.", 1}};
  const Features f = dtlab::data::convert_examples_to_features(ex, tokenizer(), 13);
  ASSERT_EQ(f.size(), 1);
  EXPECT_EQ(f.input_ids.sizes().vec(), (std::vector<int64_t>{1, 13}));
  // [CLS] the cat sat . [SEP] a dog ran . [SEP]: 4 + 4 word pieces and 3 special tokens = 11,
  // then 2 [PAD] to reach 13.
  EXPECT_EQ(row(f.input_ids, 0), (std::vector<int64_t>{kCls, kThe, kCat, kSat, kDot, kSep, kA, kDog,
                                                       kRan, kDot, kSep, kPad, kPad}));
  EXPECT_EQ(row(f.attention_mask, 0), (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}));
  // Segment A with [CLS] and its [SEP] is type 0, segment B with its [SEP] type 1, padding 0.
  EXPECT_EQ(row(f.token_type_ids, 0), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(f.labels[0].item<int64_t>(), 1);
}

TEST(ConvertExamplesToFeatures, StacksExamplesAsInt64RowsOfMaxLength) {
  const std::vector<InputExample> ex = {{"train-0", "The cat.", "A dog.", 0},
                                        {"train-1", "Dog.", "Cat sat.", 1},
                                        {"train-2", "A.", "The.", 1}};
  const int max_len = 10;
  const Features f = dtlab::data::convert_examples_to_features(ex, tokenizer(), max_len);
  EXPECT_EQ(f.size(), 3);
  for (const torch::Tensor* t : {&f.input_ids, &f.attention_mask, &f.token_type_ids}) {
    EXPECT_EQ(t->sizes().vec(), (std::vector<int64_t>{3, max_len}));
    EXPECT_EQ(t->scalar_type(), torch::kInt64);
  }
  EXPECT_EQ(f.labels.sizes().vec(), (std::vector<int64_t>{3}));
  EXPECT_EQ(f.labels.scalar_type(), torch::kInt64);
  EXPECT_EQ(row(f.labels.unsqueeze(0), 0), (std::vector<int64_t>{0, 1, 1}));
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(f.input_ids[i][0].item<int64_t>(), kCls) << "row " << i;
    // Padding is id 0 exactly where the mask is 0, and the mask is ones then zeros.
    const std::vector<int64_t> ids = row(f.input_ids, i), mask = row(f.attention_mask, i);
    bool seen_zero = false;
    for (int j = 0; j < max_len; ++j) {
      if (mask[j] == 0) {
        seen_zero = true;
        EXPECT_EQ(ids[j], kPad) << "row " << i << " column " << j;
      } else {
        EXPECT_FALSE(seen_zero) << "a real token after padding in row " << i;
        EXPECT_NE(ids[j], kPad);
      }
    }
  }
  // Row 1: [CLS] dog . [SEP] cat sat . [SEP] = 8 real tokens, then 2 padding.
  EXPECT_EQ(row(f.attention_mask, 1), (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(row(f.token_type_ids, 1), (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1, 0, 0}));
}

TEST(ConvertExamplesToFeatures, TruncatesLongPairsToMaxLengthWithoutPadding) {
  const std::vector<InputExample> ex = {{"train-0", "The cat sat.", "A dog ran.", 0}};
  // 11 tokens do not fit in 7: 4 come off, 2 from each segment (equal lengths share evenly).
  const Features f = dtlab::data::convert_examples_to_features(ex, tokenizer(), 7);
  EXPECT_EQ(row(f.input_ids, 0), (std::vector<int64_t>{kCls, kThe, kCat, kSep, kA, kDog, kSep}));
  EXPECT_EQ(row(f.attention_mask, 0), (std::vector<int64_t>(7, 1)));
}

TEST(MakeBatch, SelectsRowsInTheGivenOrder) {
  const std::vector<InputExample> ex = {{"train-0", "The.", "Cat.", 0},
                                        {"train-1", "A dog ran.", "Sat.", 1},
                                        {"train-2", "Dog.", "The cat sat.", 1}};
  const Features f = dtlab::data::convert_examples_to_features(ex, tokenizer(), 12);
  const Batch b = dtlab::data::make_batch(f, {2, 0, 2});
  ASSERT_EQ(b.size(), 3);
  EXPECT_EQ(b.input_ids.sizes().vec(), (std::vector<int64_t>{3, 12}));
  const int64_t source[] = {2, 0, 2};
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(row(b.input_ids, i), row(f.input_ids, source[i])) << "batch row " << i;
    EXPECT_EQ(row(b.attention_mask, i), row(f.attention_mask, source[i])) << "batch row " << i;
    EXPECT_EQ(row(b.token_type_ids, i), row(f.token_type_ids, source[i])) << "batch row " << i;
    EXPECT_EQ(b.labels[i].item<int64_t>(), f.labels[source[i]].item<int64_t>()) << "batch row " << i;
  }
  EXPECT_EQ(b.labels[1].item<int64_t>(), 0);
}

TEST(Batch, RealTokensCountsAttentionMaskOnes) {
  const std::vector<InputExample> ex = {{"train-0", "The.", "Cat.", 0},
                                        {"train-1", "A dog ran.", "Sat.", 1}};
  const Features f = dtlab::data::convert_examples_to_features(ex, tokenizer(), 12);
  // Row 0: [CLS] the . [SEP] cat . [SEP] = 7; row 1: [CLS] a dog ran . [SEP] sat . [SEP] = 9.
  EXPECT_EQ(dtlab::data::make_batch(f, {0}).real_tokens(), 7);
  EXPECT_EQ(dtlab::data::make_batch(f, {1}).real_tokens(), 9);
  EXPECT_EQ(dtlab::data::make_batch(f, {0, 1}).real_tokens(), 16);
  EXPECT_EQ(dtlab::data::make_batch(f, {1, 1}).real_tokens(), 18);
}

// ---------------------------------------------------------------------------------------------
// glue_task

TEST(GlueTask, RteIsKnownCaseInsensitivelyWithItsLabelsInIdOrder) {
  for (const char* name : {"rte", "RTE", "Rte"}) {
    const dtlab::data::GlueTask task = dtlab::data::glue_task(name);
    EXPECT_EQ(task.name, "rte") << name;
    EXPECT_EQ(task.labels, (std::vector<std::string>{"entailment", "not_entailment"})) << name;
  }
}

TEST(GlueTask, UnsupportedTaskIsAnErrorNamingItAndListingRte) {
  EXPECT_THROW_WITH(dtlab::data::glue_task("mnli"), dtlab::Error, "mnli");
  EXPECT_THROW_WITH(dtlab::data::glue_task("mnli"), dtlab::Error, "RTE");
  EXPECT_THROW_WITH(dtlab::data::glue_task(""), dtlab::Error, "RTE");
}

}  // namespace glue_data_test
