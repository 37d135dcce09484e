// Corpus BLEU exactly as sacrebleu 2.6.0 computes its default (BLEU().corpus_score): 13a
// tokenisation, n-grams up to 4, smooth_method="exp", effective order off, case kept. Also
// perplexity. Golden data: tests/golden/make_bleu_golden.py.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtlab::metrics {

constexpr int kBleuMaxOrder = 4;

// sacrebleu's preprocessing of one segment: str.rstrip(), then the 13a tokenizer (mteval-v13a):
//   1. "<skipped>" and "-\n" are removed, "\n" becomes a space; if the text holds "&", the
//      entities &quot; &amp; &lt; &gt; become " & < > (one pass each, in that order, so
//      "&amp;quot;" ends as "&quot;").
//   2. Every ASCII symbol except ' , - . becomes a token of its own: space ! " # $ % & ( ) * +
//      / : ; < = > ? @ [ \ ] ^ _ ` { | } ~.
//   3. mteval's three substitutions, each one pass left to right without overlapping matches:
//      a non-digit then "." or "," -> the mark spaced off; "." or "," then a non-digit -> the
//      same; a digit then "-" -> the dash spaced off. So "1,000.5" stays one token, "a.b",
//      "5." and ".5" split, and "5-3" becomes "5 - 3" while "well-known" stays whole.
//   4. Runs of Python whitespace (str.isspace: also U+00A0, U+3000, U+2028, ...) become one
//      space; leading and trailing ones go.
// Non-ASCII characters are kept as they are (no lower-casing, no normalisation). Text that is
// not valid UTF-8 is read with each bad byte as U+FFFD, as Python's errors="replace" would.
// Returns the tokens joined by single spaces, as sacrebleu's tokenizer does.
std::string tokenize_13a(std::string_view text);

// The sufficient statistics of BLEU, summed over segments (sacrebleu's BLEUScore fields).
struct BleuStats {
  std::array<int64_t, kBleuMaxOrder> matches{};  // sacrebleu's "counts": clipped n-gram matches
  std::array<int64_t, kBleuMaxOrder> totals{};   // hypothesis n-grams of each order
  int64_t sys_len = 0;  // hypothesis tokens
  int64_t ref_len = 0;  // per segment, the reference length closest to the hypothesis length

  BleuStats& operator+=(const BleuStats& other);
};

struct BleuScore {
  double score = 0;  // 0 to 100
  double bp = 0;     // brevity penalty
  std::array<double, kBleuMaxOrder> precisions{};  // in percent, smoothed as below
  BleuStats stats;
};

// Statistics of one segment. Each reference's n-gram counts clip the hypothesis's; with several
// references the clip is the largest count in any of them, and ref_len is the reference length
// closest to the hypothesis length (the shorter one on a tie). Throws dtlab::Error when
// `references` is empty.
BleuStats segment_bleu_stats(std::string_view hypothesis,
                             const std::vector<std::string>& references);

// sacrebleu's compute_bleu with smooth_method="exp":
//   bp = 1 if sys_len >= ref_len, exp(1 - ref_len/sys_len) if 0 < sys_len < ref_len, else 0;
//   no match of any order -> score 0 and every precision 0;
//   else for n = 1..4, stopping at the first order with totals[n] == 0 (whose precision and
//   all later ones stay 0, which makes the score 0): precision = 100 * matches / totals, or, when
//   matches == 0, 100 / (2^k * totals) for the k-th such order;
//   score = bp * exp(mean of log precisions), with log 0 taken as -9999999999.
BleuScore bleu_from_stats(const BleuStats& stats);

// Corpus BLEU of hypotheses[i] against references[i] (one reference each). Throws
// dtlab::Error when the counts differ or there are no hypotheses (sacrebleu would silently
// truncate to the shorter list, or fail on an empty one).
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references);

// The same with any number (at least one) of references per hypothesis: reference_sets[i] holds
// hypothesis i's references. sacrebleu takes the transpose (one list per reference "stream",
// None where a segment has fewer); the result is the same.
BleuScore corpus_bleu_multi(const std::vector<std::string>& hypotheses,
                            const std::vector<std::vector<std::string>>& reference_sets);

// exp(mean_loss): the perplexity of a model whose mean token cross-entropy (natural log) is
// mean_loss.
double perplexity(double mean_loss);

}  // namespace dtlab::metrics
