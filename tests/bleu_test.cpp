// BLEU (metrics/bleu.h): small cases worked out by hand, then golden data from sacrebleu 2.6.0
// (tests/golden/make_bleu_golden.py) that must match in every statistic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/io/json_file.h"
#include "dtlab/metrics/bleu.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace bleu_test {

namespace fs = std::filesystem;
using dtlab::metrics::BleuScore;
using dtlab::metrics::BleuStats;
using dtlab::metrics::corpus_bleu;
using dtlab::metrics::corpus_bleu_multi;
using dtlab::metrics::tokenize_13a;
using Counts = std::array<int64_t, dtlab::metrics::kBleuMaxOrder>;

BleuScore one(const std::string& hypothesis, const std::string& reference) {
  return corpus_bleu({hypothesis}, {reference});
}

// ---------------------------------------------------------------------------------------------
// Hand-computed cases

TEST(Bleu, PerfectMatchIsOneHundred) {
  const BleuScore s = one("a b c d", "a b c d");
  // 4 unigrams, 3 bigrams, 2 trigrams, 1 four-gram, all matched.
  EXPECT_EQ(s.stats.matches, (Counts{4, 3, 2, 1}));
  EXPECT_EQ(s.stats.totals, (Counts{4, 3, 2, 1}));
  EXPECT_DOUBLE_EQ(s.bp, 1.0);
  EXPECT_NEAR(s.score, 100.0, 1e-9);
}

TEST(Bleu, MissingFourGramsAreSmoothedByHalving) {
  // hyp: the cat sat on a mat      ref: the cat sat in the mat
  // 1-grams: the, cat, sat, mat match: 4/6.  2-grams: "the cat", "cat sat": 2/5.
  // 3-grams: "the cat sat": 1/4.  4-grams: none of 3, so "exp" smoothing gives 1/(2*3).
  // BLEU = 100 * (4/6 * 2/5 * 1/4 * 1/6)^(1/4) = 100 * (1/90)^(1/4) = 32.4668...
  const BleuScore s = one("the cat sat on a mat", "the cat sat in the mat");
  EXPECT_EQ(s.stats.matches, (Counts{4, 2, 1, 0}));
  EXPECT_EQ(s.stats.totals, (Counts{6, 5, 4, 3}));
  EXPECT_NEAR(s.precisions[3], 100.0 / 6, 1e-12);
  EXPECT_NEAR(s.score, 100.0 * std::pow(1.0 / 90, 0.25), 1e-9);
}

TEST(Bleu, EachFurtherZeroOrderHalvesAgain) {
  // hyp: the x7, ref: the cat is on the mat (6 tokens, "the" twice).
  // 1-grams: "the" clipped to 2 of 7. No bigram "the the" in the ref: 0/6, 0/5, 0/4, smoothed
  // to 1/(2*6), 1/(4*5), 1/(8*4). sys_len 7 >= ref_len 6, so bp = 1.
  // BLEU = 100 * (2/7 * 1/12 * 1/20 * 1/32)^(1/4) = 7.8098...
  const BleuScore s = one("the the the the the the the", "the cat is on the mat");
  EXPECT_EQ(s.stats.matches, (Counts{2, 0, 0, 0}));
  EXPECT_EQ(s.stats.totals, (Counts{7, 6, 5, 4}));
  EXPECT_NEAR(s.precisions[1], 100.0 / 12, 1e-12);
  EXPECT_NEAR(s.precisions[2], 100.0 / 20, 1e-12);
  EXPECT_NEAR(s.precisions[3], 100.0 / 32, 1e-12);
  EXPECT_NEAR(s.score, 100.0 * std::pow(2.0 / 7 / 12 / 20 / 32, 0.25), 1e-9);
}

TEST(Bleu, ShortHypothesisPaysTheBrevityPenalty) {
  // Every n-gram of the 5-token hypothesis is in the 7-token reference: precisions 100,
  // bp = exp(1 - 7/5) = exp(-0.4), BLEU = 100 * exp(-0.4) = 67.032...
  const BleuScore s = one("the cat sat on the", "the cat sat on the mat today");
  EXPECT_EQ(s.stats.sys_len, 5);
  EXPECT_EQ(s.stats.ref_len, 7);
  EXPECT_NEAR(s.bp, std::exp(-0.4), 1e-15);
  EXPECT_NEAR(s.score, 100.0 * std::exp(-0.4), 1e-9);
}

TEST(Bleu, LongHypothesisHasNoBrevityPenalty) {
  // 9 tokens against 6: bp = 1; the 6 reference unigrams all match, 5/8 bigrams, 4/7, 3/6.
  const BleuScore s = one("the cat sat on the mat today and yesterday", "the cat sat on the mat");
  EXPECT_DOUBLE_EQ(s.bp, 1.0);
  EXPECT_EQ(s.stats.matches, (Counts{6, 5, 4, 3}));
  EXPECT_EQ(s.stats.totals, (Counts{9, 8, 7, 6}));
  EXPECT_NEAR(s.score, 100.0 * std::pow(6.0 / 9 * 5 / 8 * 4 / 7 * 3 / 6, 0.25), 1e-9);
}

TEST(Bleu, FewerThanFourTokensScoresZeroEvenWhenAllMatch) {
  // No 4-gram exists: sacrebleu stops at the empty order and its log-of-zero floor makes the
  // score 0, although the three orders it saw are perfect.
  const BleuScore s = one("the cat sat", "the cat sat");
  EXPECT_EQ(s.stats.totals, (Counts{3, 2, 1, 0}));
  EXPECT_EQ(s.precisions[0], 100.0);
  EXPECT_EQ(s.precisions[3], 0.0);
  EXPECT_EQ(s.score, 0.0);
}

TEST(Bleu, EmptyHypothesisScoresZeroWithZeroBrevityPenalty) {
  const BleuScore s = one("", "the cat sat on the mat");
  EXPECT_EQ(s.stats.sys_len, 0);
  EXPECT_EQ(s.stats.ref_len, 6);
  EXPECT_EQ(s.bp, 0.0);
  EXPECT_EQ(s.score, 0.0);
}

TEST(Bleu, NoMatchAtAllLeavesEveryPrecisionZero) {
  const BleuScore s = one("completely different words here", "the cat sat on the mat");
  EXPECT_EQ(s.stats.matches, (Counts{0, 0, 0, 0}));
  EXPECT_EQ(s.precisions, (std::array<double, 4>{0, 0, 0, 0}));
  EXPECT_EQ(s.score, 0.0);
}

TEST(Bleu, CaseMatters) {
  EXPECT_EQ(one("The Cat Sat On", "the cat sat on").stats.matches, (Counts{0, 0, 0, 0}));
}

TEST(Bleu, CorpusStatisticsAreSumsOfSegmentStatistics) {
  // Corpus BLEU pools the counts; it is not the mean of the segments' scores.
  const std::vector<std::string> hyps = {"the cat sat on a mat", "a b c d"};
  const std::vector<std::string> refs = {"the cat sat in the mat", "a b c d"};
  const BleuScore s = corpus_bleu(hyps, refs);
  EXPECT_EQ(s.stats.matches, (Counts{4 + 4, 2 + 3, 1 + 2, 0 + 1}));
  EXPECT_EQ(s.stats.totals, (Counts{6 + 4, 5 + 3, 4 + 2, 3 + 1}));
  EXPECT_EQ(s.stats.sys_len, 10);
  EXPECT_EQ(s.stats.ref_len, 10);
  EXPECT_NEAR(s.score, 100.0 * std::pow(8.0 / 10 * 5 / 8 * 3 / 6 * 1 / 4, 0.25), 1e-9);
}

TEST(Bleu, SeveralReferencesClipAtTheLargestCountInAnyOne) {
  // "the" appears once in ref 1 and twice in ref 2: two of the three are credited, not three.
  const BleuScore s = corpus_bleu_multi({"the the the"}, {{"the cat", "the the cat"}});
  EXPECT_EQ(s.stats.matches[0], 2);
  EXPECT_EQ(s.stats.matches[1], 1);  // "the the" once, in ref 2
}

TEST(Bleu, ClosestReferenceLengthPrefersTheShorterOnATie) {
  // 6 tokens; references of 8 and 4 are both 2 away: ref_len is 4, so no brevity penalty.
  const BleuScore tie = corpus_bleu_multi({"a b c d e f"}, {{"a b c d e f g h", "a b c d"}});
  EXPECT_EQ(tie.stats.ref_len, 4);
  // 7 tokens; 8 is closer than 4.
  const BleuScore longer = corpus_bleu_multi({"a b c d e f g"}, {{"a b c d", "a b c d e f g h"}});
  EXPECT_EQ(longer.stats.ref_len, 8);
}

TEST(Bleu, RejectsUnpairedInput) {
  EXPECT_THROW_WITH(corpus_bleu({"a", "b"}, {"a"}), dtlab::Error, "2 hypotheses but 1 references");
  EXPECT_THROW_WITH(corpus_bleu({}, {}), dtlab::Error, "no hypotheses");
  EXPECT_THROW_WITH(corpus_bleu_multi({"a"}, {{}}), dtlab::Error, "hypothesis 0 has no reference");
}

TEST(Bleu, PerplexityIsExpOfTheMeanLoss) {
  EXPECT_DOUBLE_EQ(dtlab::metrics::perplexity(0.0), 1.0);
  EXPECT_NEAR(dtlab::metrics::perplexity(std::log(20.0)), 20.0, 1e-12);
}

// ---------------------------------------------------------------------------------------------
// The 13a tokenizer, by hand

TEST(Tokenize13a, SplitsSymbolsButNotApostrophesOrInnerDashes) {
  EXPECT_EQ(tokenize_13a("Hello, world! (It's well-known.)"),
            "Hello , world ! ( It's well-known . )");
  EXPECT_EQ(tokenize_13a("a/b x@y 100% $5"), "a / b x @ y 100 % $ 5");
}

TEST(Tokenize13a, KeepsPeriodsAndCommasBetweenDigits) {
  EXPECT_EQ(tokenize_13a("1,000.50 costs 3.5."), "1,000.50 costs 3.5 .");
  EXPECT_EQ(tokenize_13a("a.b 5. .5"), "a . b 5 . . 5");
}

TEST(Tokenize13a, SplitsADashOnlyAfterADigit) {
  EXPECT_EQ(tokenize_13a("5-3 a-3 3-a x--y"), "5 - 3 a-3 3 - a x--y");
}

TEST(Tokenize13a, DecodesFourEntitiesOnce) {
  EXPECT_EQ(tokenize_13a("&quot;Hi&quot; &lt;b&gt; a&amp;b"), "\" Hi \" < b > a & b");
  // &quot; is decoded before &amp;, so "&amp;quot;" becomes the text "&quot;", then "& quot ;".
  EXPECT_EQ(tokenize_13a("&amp;quot;"), "& quot ;");
}

TEST(Tokenize13a, JoinsHyphenatedLineBreaksAndDropsSkipped) {
  EXPECT_EQ(tokenize_13a("hyph-\nenated line\nbreak <skipped>"), "hyphenated line break");
  // rstrip comes first, so a final "-\n" keeps its dash.
  EXPECT_EQ(tokenize_13a("end-\n"), "end-");
}

TEST(Tokenize13a, SplitsOnPythonWhitespaceOnly) {
  // U+00A0 and U+3000 are whitespace to Python; U+200B (zero-width space) is not.
  EXPECT_EQ(tokenize_13a("  a\u00a0b\u3000c\td\u200be  "), "a b c d\u200be");
  EXPECT_EQ(tokenize_13a("Straße é."), "Straße é .");
}

// ---------------------------------------------------------------------------------------------
// Golden data from sacrebleu

const fs::path kGolden = fs::path(DTLAB_SOURCE_DIR) / "tests" / "golden" / "bleu" / "cases.json";

TEST(BleuGolden, EveryCorpusMatchesSacrebleu) {
  const nlohmann::json golden = dtlab::io::read_json_file(kGolden);
  ASSERT_EQ(golden.at("sacrebleu"), "2.6.0");
  const nlohmann::json& cases = golden.at("corpora");
  ASSERT_GE(cases.size(), 30u);
  double worst = 0;
  for (const nlohmann::json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const BleuScore s = corpus_bleu_multi(c.at("hypotheses").get<std::vector<std::string>>(),
                                          c.at("references").get<std::vector<std::vector<std::string>>>());
    EXPECT_NEAR(s.score, c.at("score").get<double>(), 1e-6);
    worst = std::max(worst, std::abs(s.score - c.at("score").get<double>()));
    EXPECT_EQ(s.stats.matches, c.at("counts").get<Counts>());
    EXPECT_EQ(s.stats.totals, c.at("totals").get<Counts>());
    EXPECT_EQ(s.stats.sys_len, c.at("sys_len").get<int64_t>());
    EXPECT_EQ(s.stats.ref_len, c.at("ref_len").get<int64_t>());
    EXPECT_NEAR(s.bp, c.at("bp").get<double>(), 1e-12);
    const auto precisions = c.at("precisions").get<std::vector<double>>();
    for (int n = 0; n < dtlab::metrics::kBleuMaxOrder; ++n) {
      EXPECT_NEAR(s.precisions[n], precisions.at(n), 1e-9) << "order " << n + 1;
    }
  }
  std::printf("%zu corpora; largest |score - sacrebleu| = %.3g\n", cases.size(), worst);
}

TEST(BleuGolden, TokenizerMatchesSacrebleuOnEveryText) {
  const nlohmann::json golden = dtlab::io::read_json_file(kGolden);
  const nlohmann::json& texts = golden.at("tokenize");
  ASSERT_GE(texts.size(), 150u);
  for (const nlohmann::json& t : texts) {
    const std::string text = t.at("text");
    EXPECT_EQ(tokenize_13a(text), t.at("tokens").get<std::string>()) << "text: " << nlohmann::json(text).dump();
  }
}

}  // namespace bleu_test
