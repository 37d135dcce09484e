// sacrebleu's default corpus BLEU and the 13a tokenizer, see metrics/bleu.h. Each step follows
// sacrebleu 2.6.0's Python (tokenizer_13a.py, tokenizer_re.py, metrics/bleu.py) in order, on
// code points as Python strings are, so that scores agree to the last bit.
#include "dtlab/metrics/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "dtlab/core/error.h"
#include "dtlab/tokenizer/unicode.h"

namespace dtlab::metrics {
namespace {

namespace unicode = tokenizer::unicode;

// sacrebleu's my_log: the log of a zero precision is this floor, not -inf.
constexpr double kLogOfZero = -9999999999.0;

// Python's str.replace: left to right, replaced text is not searched again.
void replace_all(std::u32string& s, std::u32string_view from, std::u32string_view to) {
  for (size_t pos = s.find(from); pos != std::u32string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool is_period_or_comma(char32_t c) { return c == U'.' || c == U','; }

// The class [\{-\~\[-\` -\&\(-\+\:-\@\/] of mteval's first substitution: ASCII symbols and the
// space, without ' , - . and digits.
bool is_13a_symbol(char32_t c) {
  return (c >= U'{' && c <= U'~') || (c >= U'[' && c <= U'`') || (c >= U' ' && c <= U'&') ||
         (c >= U'(' && c <= U'+') || (c >= U':' && c <= U'@') || c == U'/';
}

// re.sub of a two-character pattern: the first character satisfies `first`, the second
// `second`. Matches are taken left to right and never overlap, so the second character of one
// match cannot start the next ("a..." gives "a . . . ", not a match at every period).
template <class First, class Second, class Emit>
std::u32string substitute_pairs(const std::u32string& s, First first, Second second, Emit emit) {
  std::u32string out;
  out.reserve(s.size() * 2);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

std::vector<std::string> split_python_space(const std::u32string& s) {
  std::vector<std::string> tokens;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && unicode::is_python_space(s[i])) ++i;
    const size_t start = i;
    while (i < s.size() && !unicode::is_python_space(s[i])) ++i;
    if (i > start) tokens.push_back(unicode::encode_utf8(std::u32string_view(s).substr(start, i - start)));
  }
  return tokens;
}

// sacrebleu's BLEU._preprocess_segment: rstrip, then Tokenizer13a; the tokens, not yet joined.
std::vector<std::string> tokens_13a(std::string_view text) {
  std::u32string line = unicode::decode_utf8(text);
  while (!line.empty() && unicode::is_python_space(line.back())) line.pop_back();

  replace_all(line, U"<skipped>", U"");
  replace_all(line, U"-\n", U"");
  replace_all(line, U"\n", U" ");
  if (line.find(U'&') != std::u32string::npos) {
    replace_all(line, U"&quot;", U"\"");
    replace_all(line, U"&amp;", U"&");
    replace_all(line, U"&lt;", U"<");
    replace_all(line, U"&gt;", U">");
  }

  // Tokenizer13a pads the line with a space on each side before the substitutions, so a "."
  // or "," at either end has a non-digit neighbour.
  line = U" " + line + U" ";
  std::u32string spaced;
  for (char32_t c : line) {
    if (is_13a_symbol(c)) {
      spaced += U' ';
      spaced += c;
      spaced += U' ';
    } else {
      spaced += c;
    }
  }
  auto not_digit = [](char32_t c) { return !is_digit(c); };
  // r'([^0-9])([\.,])' -> r'\1 \2 '
  spaced = substitute_pairs(spaced, not_digit, is_period_or_comma,
                            [](std::u32string& o, char32_t a, char32_t b) { o += {a, U' ', b, U' '}; });
  // r'([\.,])([^0-9])' -> r' \1 \2'
  spaced = substitute_pairs(spaced, is_period_or_comma, not_digit,
                            [](std::u32string& o, char32_t a, char32_t b) { o += {U' ', a, U' ', b}; });
  // r'([0-9])(-)' -> r'\1 \2 '
  spaced = substitute_pairs(spaced, is_digit, [](char32_t c) { return c == U'-'; },
                            [](std::u32string& o, char32_t a, char32_t b) { o += {a, U' ', b, U' '}; });
  return split_python_space(spaced);
}

// Counts of every n-gram, n = 1..4, one map per order; an n-gram is its tokens joined by
// spaces (tokens never hold one).
using NgramCounts = std::array<std::unordered_map<std::string, int64_t>, kBleuMaxOrder>;

NgramCounts count_ngrams(const std::vector<std::string>& tokens) {
  NgramCounts counts;
  for (size_t n = 1; n <= static_cast<size_t>(kBleuMaxOrder); ++n) {
    for (size_t i = 0; i + n <= tokens.size(); ++i) {
      std::string gram = tokens[i];
      for (size_t k = 1; k < n; ++k) gram += ' ' + tokens[i + k];
      ++counts[n - 1][gram];
    }
  }
  return counts;
}

// sacrebleu's _get_closest_ref_len: the first closest, or the shorter of two equally close.
int64_t closest_reference_length(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
  int64_t best_diff = -1, best_len = -1;
  for (int64_t len : ref_lens) {
    const int64_t diff = std::llabs(hyp_len - len);
    if (best_diff == -1 || diff < best_diff || (diff == best_diff && len < best_len)) {
      best_diff = diff;
      best_len = len;
    }
  }
  return best_len;
}

}  // namespace

std::string tokenize_13a(std::string_view text) {
  std::string joined;
  for (const std::string& token : tokens_13a(text)) {
    if (!joined.empty()) joined += ' ';
    joined += token;
  }
  return joined;
}

BleuStats& BleuStats::operator+=(const BleuStats& other) {
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    matches[n] += other.matches[n];
    totals[n] += other.totals[n];
  }
  sys_len += other.sys_len;
  ref_len += other.ref_len;
  return *this;
}

BleuStats segment_bleu_stats(std::string_view hypothesis,
                             const std::vector<std::string>& references) {
  if (references.empty()) throw Error("BLEU: a hypothesis has no reference");
  NgramCounts clip;  // per n-gram, its largest count in any one reference
  std::vector<int64_t> ref_lens;
  for (const std::string& reference : references) {
    const std::vector<std::string> tokens = tokens_13a(reference);
    ref_lens.push_back(static_cast<int64_t>(tokens.size()));
    const NgramCounts counts = count_ngrams(tokens);
    for (int n = 0; n < kBleuMaxOrder; ++n) {
      for (const auto& [gram, count] : counts[n]) clip[n][gram] = std::max(clip[n][gram], count);
    }
  }
  const std::vector<std::string> hyp_tokens = tokens_13a(hypothesis);
  BleuStats s;
  s.sys_len = static_cast<int64_t>(hyp_tokens.size());
  s.ref_len = closest_reference_length(s.sys_len, ref_lens);
  const NgramCounts hyp = count_ngrams(hyp_tokens);
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    for (const auto& [gram, count] : hyp[n]) {
      s.totals[n] += count;
      const auto ref = clip[n].find(gram);
      if (ref != clip[n].end()) s.matches[n] += std::min(count, ref->second);
    }
  }
  return s;
}

BleuScore bleu_from_stats(const BleuStats& stats) {
  BleuScore r;
  r.stats = stats;
  r.bp = 1.0;
  if (stats.sys_len < stats.ref_len) {
    r.bp = stats.sys_len > 0 ? std::exp(1.0 - static_cast<double>(stats.ref_len) /
                                                  static_cast<double>(stats.sys_len))
                             : 0.0;
  }
  bool any_match = false;
  for (int64_t m : stats.matches) any_match = any_match || m != 0;
  if (!any_match) return r;  // sacrebleu's early stop: score 0, precisions 0

  double smooth = 1.0;  // "exp" smoothing (mteval's NIST method): halves at each zero order
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    const double total = static_cast<double>(stats.totals[n]);
    if (stats.totals[n] == 0) break;
    if (stats.matches[n] == 0) {
      smooth *= 2;
      r.precisions[n] = 100.0 / (smooth * total);
    } else {
      r.precisions[n] = 100.0 * static_cast<double>(stats.matches[n]) / total;
    }
  }
  double log_sum = 0.0;
  for (double p : r.precisions) log_sum += p == 0.0 ? kLogOfZero : std::log(p);
  r.score = r.bp * std::exp(log_sum / kBleuMaxOrder);
  return r;
}

BleuScore corpus_bleu_multi(const std::vector<std::string>& hypotheses,
                            const std::vector<std::vector<std::string>>& reference_sets) {
  if (hypotheses.size() != reference_sets.size()) {
    throw Error("BLEU: " + std::to_string(hypotheses.size()) + " hypotheses but " +
                std::to_string(reference_sets.size()) + " reference sets; they must pair up");
  }
  if (hypotheses.empty()) throw Error("BLEU: no hypotheses to score");
  BleuStats total;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    if (reference_sets[i].empty()) {
      throw Error("BLEU: hypothesis " + std::to_string(i) + " has no reference");
    }
    total += segment_bleu_stats(hypotheses[i], reference_sets[i]);
  }
  return bleu_from_stats(total);
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references) {
  if (hypotheses.size() != references.size()) {
    throw Error("BLEU: " + std::to_string(hypotheses.size()) + " hypotheses but " +
                std::to_string(references.size()) + " references; they must pair up");
  }
  std::vector<std::vector<std::string>> sets;
  sets.reserve(references.size());
  for (const std::string& r : references) sets.push_back({r});
  return corpus_bleu_multi(hypotheses, sets);
}

double perplexity(double mean_loss) { return std::exp(mean_loss); }

}  // namespace dtlab::metrics
