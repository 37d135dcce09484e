// The checks of context parallelism (cp): the student's block attention, its backward and the
// merge at odd shapes against an attention this file computes in double; the bytes the attention
// holds, linear in the block; the ring's outputs and gradients at 3 ranks against the same
// attention over the whole sequence, its overlap of transfer and compute, and the balance of its
// work (the kit's measurements, not the student's counts); step 1's gradients and 20 losses of
// GPT-2 at CP 2, CP 3 and CP 2 x DP 2 against the kit's single-process run; and the keys' and
// values' bytes every rank sent per step against Note [Bytes of a context-parallel step]
// (cp/cp_trainer.h). The runs read the data as tp's do (each replica a part of every global
// batch, its context ranks the same rows), so the single-process runs are tp's and pp's, made
// once per grading.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>
#include <torch/utils.h>

#include "checks.h"
#include "compare.h"
#include "dtlab/io/json_file.h"
#include "dtlab/io/safetensors.h"

namespace fs = std::filesystem;

namespace dtlab::grader {
namespace cp_check {

constexpr int kBatch = 16;  // tp's and pp's: one reference run serves all three
constexpr int kLossSteps = 20;
constexpr int kRingRanks = 3;
// Note [The attention's tolerance]: the reference's block attention agrees with this file's double
// attention within 9.2e-7 of the largest value of each tensor (fp32 rounding over blocks); the
// smallest mistake it must catch, the running sum not rescaled when a later block raises the max,
// is off by 1.8 (mutant sum_not_rescaled), and a diagonal left unmasked by 0.4 (mutant
// diagonal_unmasked): 1e-5 sits between, as in cp_attention_test.
constexpr double kAttentionTolerance = 1e-5;
// Note [The overlap's floor]: the share of a rank's CPU time in the ring's forward during which a
// receive it posted was in flight (Note [Overlap from the log], common/exercises/cp/probe.cpp),
// in CPU time, averaged over the ranks: the work of every step but the last, which has nothing to
// receive, for a ring that posts before it computes (the reference: 64-70% on each of the 3 ranks,
// 68% on average, in two runs); about 0 for one that waits first (mutant waits_before_computing:
// 0-1% on every rank, 1% on average). The floor sits between, far from both.
constexpr double kOverlapFloor = 0.25;
// Note [The balance's ceiling]: the work of each rank's ring attention, forward and backward, at
// 3 ranks, measured by the bytes its tensors allocated in all (the kit's counting allocator,
// report/tensor_bytes.h): every block of scores a rank computes allocates its tensors, so the
// volume grows with the blocks computed, and unlike CPU time it does not grow with what else runs
// on the machine. CPU time was the first measure: the reference read 1.05 and 1.10 on a quiet
// machine but 1.56 in CI's 2.15 step beside other tests (7-11 ms of CPU a rank), too close to the
// contiguous split's 3.04. Balanced, every rank computes 2N + 1 = 7 pieces; contiguous, the first
// rank 3 and the last 11: the reference allocates 69.5 MB on every rank (1.00, the same in every
// run), the contiguous split 33.8 to 105.2 MB (3.11, mutant contiguous_chunks). 1.5 sits between. (A
// submission that computed its blocks in buffers it allocated once would escape the measure; the
// CPU seconds printed beside it would still show the imbalance to a reader.)
constexpr double kBalanceCeiling = 1.5;
constexpr double kTrafficSlackBytes = 0.5;  // Note [Bytes of a context-parallel step]: exact

struct Grid {
  int cp, world;
  std::string label() const {
    return world == cp ? fmt::format("CP {}", cp) : fmt::format("CP {} x DP {} ({} ranks)", cp, world / cp, world);
  }
};
constexpr Grid kGrids[] = {{2, 2}, {3, 3}, {2, 4}};

// The tp checks' single-process flags (checks_tp.cpp): the same ids, the same runs.
std::vector<std::string> reference_flags(int steps) {
  std::vector<std::string> flags = lm_equivalence_flags(steps);
  flags.insert(flags.end(), {"--batch_size", std::to_string(kBatch)});
  return flags;
}

// One run per grid serves the gradients (its step 1 dump), the losses and the traffic.
RunRequest cp_request(const std::string& e, const Grid& g) {
  std::vector<std::string> flags = lm_equivalence_flags(kLossSteps);
  flags.insert(flags.end(), {"--global_batch_size", std::to_string(kBatch), "--cp", std::to_string(g.cp)});
  return {fmt::format("{}-cp{}-w{}", e, g.cp, g.world), e, "cp-losses", g.world, flags, true};
}

// ---- the attention in double --------------------------------------------------------------

struct Attention {
  torch::Tensor out, lse, dq, dk, dv;
};

// softmax(scale q kᵀ, masked) v over keys at k_start.. for queries at q_start.., in double, and
// its gradients for dout by autograd. A query that sees no key: output 0, lse -inf.
Attention attention_in_double(const torch::Tensor& q32, const torch::Tensor& k32, const torch::Tensor& v32,
                              const torch::Tensor& dout32, double scale, int64_t q_start, int64_t k_start,
                              bool causal) {
  const torch::Tensor q = q32.to(torch::kFloat64).detach().requires_grad_(true);
  const torch::Tensor k = k32.to(torch::kFloat64).detach().requires_grad_(true);
  const torch::Tensor v = v32.to(torch::kFloat64).detach().requires_grad_(true);
  const int64_t tq = q.size(2), tk = k.size(2);
  const torch::Tensor s = torch::matmul(q, k.transpose(-1, -2)) * scale;
  torch::Tensor visible = torch::ones({tq, tk}, torch::kBool);
  if (causal) {
    const torch::Tensor qi = torch::arange(q_start, q_start + tq, torch::kLong).unsqueeze(1);
    const torch::Tensor kj = torch::arange(k_start, k_start + tk, torch::kLong).unsqueeze(0);
    visible = kj <= qi;
  }
  const double inf = std::numeric_limits<double>::infinity();
  const torch::Tensor masked = torch::where(visible, s, torch::full({}, -inf, s.options()));
  const torch::Tensor top = std::get<0>(masked.max(-1, /*keepdim=*/true)).detach();
  const torch::Tensor shift = torch::where(torch::isfinite(top), top, torch::zeros_like(top));
  const torch::Tensor e = torch::exp(masked - shift);
  const torch::Tensor l = e.sum(-1, /*keepdim=*/true);
  const torch::Tensor seen = l > 0;
  const torch::Tensor out = torch::matmul(e, v) / torch::where(seen, l, torch::ones_like(l));
  const torch::Tensor lse = torch::where(seen, torch::log(torch::where(seen, l, torch::ones_like(l))) + shift,
                                         torch::full({}, -inf, l.options()))
                                .squeeze(-1);
  (out * dout32.to(torch::kFloat64)).sum().backward();
  return {out.detach(), lse.detach(), q.grad(), k.grad(), v.grad()};
}

// |got - want| over want's largest |value|, where want is finite; where want is -inf, got must be
// -inf too (else the result is infinite). nullopt: shapes differ.
std::optional<double> relative_difference(const torch::Tensor& got32, const torch::Tensor& want) {
  if (!got32.defined() || got32.sizes() != want.sizes()) return std::nullopt;
  const torch::Tensor got = got32.to(torch::kFloat64);
  const torch::Tensor finite = torch::isfinite(want);
  if (!torch::equal(torch::isfinite(got), finite)) return std::numeric_limits<double>::infinity();
  if (finite.sum().item<int64_t>() == 0) return 0.0;
  const double scale = std::max(1e-30, want.masked_select(finite).abs().max().item<double>());
  return (got.masked_select(finite) - want.masked_select(finite)).abs().max().item<double>() / scale;
}

std::string shape_of(const torch::Tensor& t) {
  return t.defined() ? fmt::format("[{}]", fmt::join(t.sizes(), ", ")) : "(none)";
}

const nlohmann::json* probe_result(const Run& run, const std::string& who, Verdict* failure) {
  if (run.results.is_object() && run.results.contains("result") && run.results["result"].is_object()) {
    return &run.results["result"];
  }
  *failure = {Status::kError, who + ": results.json holds no probe result (did the probe run?)"};
  return nullptr;
}

// The attention probe's tensors, or nullopt and the verdict.
std::optional<io::TensorMap> probe_tensors(const Run& run, const std::string& file, const std::string& who,
                                           Verdict* failure) {
  const fs::path path = run.dir / "output" / file;
  try {
    return io::load_safetensors(path);
  } catch (const std::exception& ex) {
    *failure = {Status::kError, fmt::format("{}: cannot read {}: {}", who, path.string(), ex.what())};
    return std::nullopt;
  }
}

const Run& attention_probe(Runner& runner, const std::string& e) {
  return runner.run({e + "-probe-attention", e, "cp-probe", 1, {"--probe", "attention"}, false});
}

// What `cp --probe attention` recorded: its result and its tensors, or nullopt and the verdict.
struct AttentionProbe {
  nlohmann::json result;
  io::TensorMap tensors;
};
std::optional<AttentionProbe> attention_outputs(Runner& runner, const std::string& e, const std::string& who,
                                                Verdict* failure) {
  const Run& run = attention_probe(runner, e);
  if (run.failure) {
    *failure = *run.failure;
    return std::nullopt;
  }
  const nlohmann::json* r = probe_result(run, who, failure);
  if (!r) return std::nullopt;
  std::optional<io::TensorMap> t = probe_tensors(run, "attention.safetensors", who, failure);
  if (!t) return std::nullopt;
  return AttentionProbe{*r, std::move(*t)};
}

// Note [A hint the evidence singles out] for the attention: the cases differ in their mask. When
// a causal case's forward is wrong and the unmasked one's (C) right, the online softmax is right
// and the mask is not; when C's is wrong too, the mask is not the cause: the rescaling is.
Verdict attention(Runner& runner, const std::string& e) {
  const std::string who = e + " --probe attention";
  Verdict failure;
  const std::optional<AttentionProbe> probe = attention_outputs(runner, e, who, &failure);
  if (!probe) return failure;
  const nlohmann::json* r = &probe->result;
  const io::TensorMap* t = &probe->tensors;
  struct Finding {
    std::string shape, key;
    double difference = 0;
    bool causal = false, none_seen = false;
  };
  std::optional<Finding> first;
  bool unmasked_forward_right = true;
  std::string summary;
  double worst = 0;
  for (const auto& c : r->at("cases")) {
    const std::string n = c.at("name");
    const auto at = [&](const std::string& key) {
      const auto found = t->find(n + "." + key);
      return found == t->end() ? torch::Tensor() : found->second;
    };
    const int64_t q_start = c.at("q_start"), k_start = c.at("k_start"), block = c.at("block");
    const bool causal = c.at("causal");
    const Attention want = attention_in_double(at("q"), at("k"), at("v"), at("dout"), c.at("scale"), q_start, k_start,
                                               causal);
    const std::string shape = fmt::format("case {}: {} queries at {} over {} keys at {}, blocks of {}, {}", n,
                                          at("q").size(2), q_start, at("k").size(2), k_start, block,
                                          causal ? "causal" : "no mask");
    for (const auto& [key, expected] : std::vector<std::pair<std::string, torch::Tensor>>{
             {"out", want.out}, {"lse", want.lse}, {"dq", want.dq}, {"dk", want.dk}, {"dv", want.dv}}) {
      const std::optional<double> d = relative_difference(at(key), expected);
      if (!d) {
        return {Status::kWrongNumber, fmt::format("{}: {}: {} is {}, expected {}", who, shape, key,
                                                  shape_of(at(key)), shape_of(expected))};
      }
      worst = std::max(worst, *d);
      if (*d <= kAttentionTolerance) continue;
      const bool forward = key == "out" || key == "lse";
      if (forward && !causal) unmasked_forward_right = false;
      if (!first) first = Finding{shape, key, *d, causal, causal && q_start < k_start};
    }
    summary += fmt::format("\n  {}", shape);
  }
  if (!first) {
    return {Status::kPassed, fmt::format("{}: outputs, lse and gradients equal attention computed in double within "
                                         "{:.2g} of each tensor's largest value (<= {:g}):{}",
                                         who, worst, kAttentionTolerance, summary)};
  }
  const Finding& f = *first;
  const bool forward = f.key == "out" || f.key == "lse";
  std::string hint;
  if (!forward) {
    hint = "The forward is right; the backward from the saved lse: per block p = exp(scale q kᵀ - lse) under the "
           "same mask, D = rowsum(dout * out), dv += pᵀ dout, ds = p (dout vᵀ - D), dq += scale ds k, dk += scale dsᵀ q.";
  } else if (f.causal && unmasked_forward_right) {
    hint = "The case without a mask is right, so the online softmax is: is key j masked exactly when k_start + j > "
           "q_start + i (the diagonal visible), with the absolute positions of the Span?";
    if (f.none_seen) hint += " Here the first queries see no key at all: their output is 0, their lse -inf.";
  } else {
    hint = "It is wrong without a mask too, so the mask is not the cause: when a block raises a query's running max, "
           "are its running sum and output rescaled by exp(old max - new max)?";
  }
  if (std::isinf(f.difference)) {
    return {Status::kWrongNumber, fmt::format("{}: {}: {} is -inf where it should be finite, or finite where it "
                                              "should be -inf (a query that sees no key). {}",
                                              who, f.shape, f.key, hint)};
  }
  return {Status::kWrongNumber, fmt::format("{}: {}: {} differs from attention computed in double by {:.3g} of its "
                                            "largest value (> {:g}). {}",
                                            who, f.shape, f.key, f.difference, kAttentionTolerance, hint)};
}

Verdict merge(Runner& runner, const std::string& e) {
  const std::string who = e + " --probe attention";
  Verdict failure;
  const std::optional<AttentionProbe> probe = attention_outputs(runner, e, who, &failure);
  if (!probe) return failure;
  const nlohmann::json* r = &probe->result;
  const io::TensorMap* t = &probe->tensors;
  const std::string n = r->at("merge").at("case");
  const int64_t cut = r->at("merge").at("cut");
  nlohmann::json c;
  for (const auto& each : r->at("cases")) {
    if (each.at("name") == n) c = each;
  }
  if (c.is_null() || !t->count("merge.out") || !t->count(n + ".q")) {
    return {Status::kError, who + ": the probe recorded no merge"};
  }
  const Attention want = attention_in_double(t->at(n + ".q"), t->at(n + ".k"), t->at(n + ".v"), t->at(n + ".dout"),
                                             c.at("scale"), c.at("q_start"), c.at("k_start"), c.at("causal"));
  double worst = 0;
  for (const auto& [key, expected] :
       std::vector<std::pair<std::string, torch::Tensor>>{{"out", want.out}, {"lse", want.lse}}) {
    const std::optional<double> d = relative_difference(t->at("merge." + key), expected);
    if (!d || *d > kAttentionTolerance) {
      return {Status::kWrongNumber,
              fmt::format("{}: merge_partials of case {}'s keys [0, {}) and [{}, {}): its {} differs from attention "
                          "over all of them by {} (> {:g}). Two partials merge by their log-sum-exps: lse = log(exp(a) "
                          "+ exp(b)), each output weighted by exp(its lse - lse); an average of the outputs weighs the "
                          "two pieces alike whatever their keys' scores.",
                          who, n, cut, cut, t->at(n + ".k").size(2), key,
                          d ? fmt::format("{:.3g} of its largest value", *d) : "its shape", kAttentionTolerance)};
    }
    worst = std::max(worst, *d);
  }
  return {Status::kPassed, fmt::format("{}: two partials of case {}'s keys merge into the attention over all of them "
                                       "(within {:.2g} <= {:g})", who, n, worst, kAttentionTolerance)};
}

// Note [The attention's bytes bound]: the inputs q, k, v and the output are four [B, H, T, D]
// tensors; a block attention holds a few more of them (the output's running sum, the
// gradients) and a few [B, H, T, block] blocks of scores at once (the scores, their exp, the
// probabilities). 8 inputs and 6 blocks bound the reference with room (cp_attention_test), and at
// T = 1024 with blocks of 32 and 64 the bound is 3.67 and 5.24 MB where the T x T scores alone are
// 8.39 MB: an attention that materialises them fails it (mutant whole_scores: 25.46 MB). The
// reference holds 1.61 and 2.14 MB in the forward, 2.11 and 3.42 MB in the backward.
Verdict memory(Runner& runner, const std::string& e) {
  const std::string who = e + " --probe attention";
  const Run& run = attention_probe(runner, e);
  if (run.failure) return *run.failure;
  Verdict failure;
  const nlohmann::json* r = probe_result(run, who, &failure);
  if (!r) return failure;
  std::string summary;
  for (const auto& m : r->at("memory")) {
    const int64_t t = m.at("length"), block = m.at("block"), b = m.at("batch"), h = m.at("heads");
    const int64_t inputs = m.at("input_bytes"), block_bytes = b * h * t * block * 4, scores = b * h * t * t * 4;
    const int64_t bound = 8 * inputs + 6 * block_bytes;
    for (const char* pass : {"forward", "backward"}) {
      const int64_t held = m.at(std::string(pass) + "_peak_bytes");
      if (held > bound) {
        return {Status::kWrongNumber,
                fmt::format("{}: at T = {} with blocks of {} keys, the {} held {:.2f} MB at its peak, more than 8 "
                            "inputs and 6 blocks of scores ({:.2f} MB); the whole T x T scores are {:.2f} MB. Hold one "
                            "[T, block] block of scores per batch and head at a time, and in the backward recompute "
                            "each block from q, k and the saved lse instead of keeping the forward's.",
                            who, t, block, pass, held / 1e6, bound / 1e6, scores / 1e6)};
      }
      summary += fmt::format("\n  T {}, blocks of {}: the {} held {:.2f} MB (bound {:.2f} MB; the T x T scores {:.2f} MB)",
                             t, block, pass, held / 1e6, bound / 1e6, scores / 1e6);
    }
  }
  return {Status::kPassed, fmt::format("{}: the attention's bytes stay within a bound linear in the block, below the "
                                       "T x T scores:{}", who, summary)};
}

// ---- the ring --------------------------------------------------------------------------------

struct RingProbe {
  const Run* run = nullptr;
  nlohmann::json shape;
  std::vector<nlohmann::json> ranks;
  std::vector<io::TensorMap> tensors;
};

std::optional<RingProbe> ring_probe(Runner& runner, const std::string& e, Verdict* failure) {
  const Run& run = runner.run({e + "-probe-ring", e, "cp-probe", kRingRanks, {"--probe", "ring"}, false});
  if (run.failure) {
    *failure = *run.failure;
    return std::nullopt;
  }
  const std::string who = fmt::format("{} --probe ring at {} ranks", e, kRingRanks);
  const nlohmann::json* r = probe_result(run, who, failure);
  if (!r) return std::nullopt;
  RingProbe p;
  p.run = &run;
  p.shape = *r;
  for (int rank = 0; rank < kRingRanks; ++rank) {
    try {
      p.ranks.push_back(io::read_json_file(run.dir / "output" / fmt::format("rank{}.json", rank)));
    } catch (const std::exception& ex) {
      *failure = {Status::kError, fmt::format("{}: rank {} wrote no record: {}", who, rank, ex.what())};
      return std::nullopt;
    }
    const std::optional<io::TensorMap> t = probe_tensors(run, fmt::format("rank{}.safetensors", rank), who, failure);
    if (!t) return std::nullopt;
    p.tensors.push_back(*t);
  }
  return p;
}

Verdict ring(Runner& runner, const std::string& e) {
  Verdict failure;
  const std::optional<RingProbe> p = ring_probe(runner, e, &failure);
  if (!p) return failure;
  const std::string who = fmt::format("{} --probe ring at {} ranks", e, kRingRanks);
  const int64_t length = p->shape.at("length"), b = p->shape.at("batch"), h = p->shape.at("heads"),
                d = p->shape.at("dim");
  // The whole sequence's inputs, drawn as the probe drew them.
  torch::manual_seed(p->shape.at("seed").get<uint64_t>());
  const torch::Tensor q = torch::randn({b, h, length, d}), k = torch::randn({b, h, length, d});
  const torch::Tensor v = torch::randn({b, h, length, d}), dout = torch::randn({b, h, length, d});
  const Attention want = attention_in_double(q, k, v, dout, 1.0 / std::sqrt(double(d)), 0, 0, true);
  std::vector<int> owner(static_cast<size_t>(length), -1);
  double worst = 0;
  for (int rank = 0; rank < kRingRanks; ++rank) {
    const io::TensorMap& t = p->tensors[static_cast<size_t>(rank)];
    if (!t.count("positions")) return {Status::kError, fmt::format("{}: rank {} recorded no positions", who, rank)};
    const torch::Tensor positions = t.at("positions").to(torch::kLong);
    for (int64_t i = 0; i < positions.numel(); ++i) {
      const int64_t at = positions[i].item<int64_t>();
      if (at < 0 || at >= length || owner[static_cast<size_t>(at)] >= 0) {
        return {Status::kWrongNumber,
                fmt::format("{}: chunks_of_rank gives rank {} chunks [{}], which {} : the 2N chunks must be split "
                            "among the ranks, two each", who, rank, fmt::join(p->ranks[static_cast<size_t>(rank)].at("chunks").get<std::vector<int64_t>>(), ", "),
                            at < 0 || at >= length ? "lie outside the sequence" : "another rank holds too")};
      }
      owner[static_cast<size_t>(at)] = rank;
    }
    for (const auto& [key, whole] : std::vector<std::pair<std::string, torch::Tensor>>{
             {"out", want.out}, {"dq", want.dq}, {"dk", want.dk}, {"dv", want.dv}}) {
      const torch::Tensor expected = whole.index_select(2, positions);
      const auto found = t.find(key);
      const std::optional<double> diff = relative_difference(found == t.end() ? torch::Tensor() : found->second, expected);
      if (diff && *diff <= kAttentionTolerance) {
        worst = std::max(worst, *diff);
        continue;
      }
      const std::string hint =
          key == "out" ? "Does each piece's Span carry the absolute positions of its chunks (chunk x c), so that the "
                         "causal mask compares where the queries and keys lie in the whole sequence?"
          : key == "dq" ? "dq is the sum of the pieces' dq over every key chunk this rank meets."
                        : "Do the keys' dk and dv travel on with them, each rank adding its pieces' share, and arrive "
                          "home after N steps, at the rank that owns those keys?";
      return {Status::kWrongNumber,
              fmt::format("{}: rank {}'s {} of its positions differs from attention over the whole sequence by {} "
                          "(> {:g}). {}",
                          who, rank, key, diff ? fmt::format("{:.3g} of its largest value", *diff) : "its shape",
                          kAttentionTolerance, hint)};
    }
  }
  if (std::count(owner.begin(), owner.end(), -1) > 0) {
    return {Status::kWrongNumber, fmt::format("{}: some positions belong to no rank: chunks_of_rank must give every "
                                              "chunk of the 2N to one rank", who)};
  }
  return {Status::kPassed, fmt::format("{}: every rank's outputs and q, k, v gradients equal attention over the whole "
                                       "{} tokens computed in double (within {:.2g} <= {:g})",
                                       who, length, worst, kAttentionTolerance)};
}

Verdict overlap(Runner& runner, const std::string& e) {
  Verdict failure;
  const std::optional<RingProbe> p = ring_probe(runner, e, &failure);
  if (!p) return failure;
  const std::string who = fmt::format("{} --probe ring at {} ranks", e, kRingRanks);
  std::string summary;
  double total = 0;
  for (int rank = 0; rank < kRingRanks; ++rank) {
    const nlohmann::json& r = p->ranks[static_cast<size_t>(rank)];
    const double share = r.value("overlap", 0.0);
    total += share;
    summary += fmt::format("\n  rank {}: {:.0f}% of its forward's {:.1f} ms of CPU", rank, 100 * share,
                           1e3 * r.value("forward_cpu_seconds", 0.0));
  }
  const double mean = total / kRingRanks;
  if (mean < kOverlapFloor) {
    return {Status::kWrongNumber,
            fmt::format("{}: the ranks had a receive in flight for {:.0f}% of their CPU time in the forward on "
                        "average (less than {:.0f}%): they compute while nothing travels. Post the next keys' and "
                        "values' exchange (dist::ring_step_async) before computing this step's pieces, and wait for "
                        "it after.{}",
                        who, 100 * mean, 100 * kOverlapFloor, summary)};
  }
  return {Status::kPassed, fmt::format("{}: the ranks computed with the next keys' receive in flight for {:.0f}% of "
                                       "their forward's CPU time on average (>= {:.0f}%):{}",
                                       who, 100 * mean, 100 * kOverlapFloor, summary)};
}

Verdict balance(Runner& runner, const std::string& e) {
  Verdict failure;
  const std::optional<RingProbe> p = ring_probe(runner, e, &failure);
  if (!p) return failure;
  const std::string who = fmt::format("{} --probe ring at {} ranks", e, kRingRanks);
  std::vector<double> work;
  std::string summary;
  for (int rank = 0; rank < kRingRanks; ++rank) {
    const nlohmann::json& r = p->ranks[static_cast<size_t>(rank)];
    work.push_back(r.value("allocated_bytes", 0.0));
    summary += fmt::format("\n  rank {} (chunks {}): {:.1f} MB of tensors, {:.1f} ms of CPU", rank,
                           fmt::join(r.at("chunks").get<std::vector<int64_t>>(), ", "), 1e-6 * work.back(),
                           1e3 * r.value("least_cpu_seconds", 0.0));
  }
  const double low = *std::min_element(work.begin(), work.end());
  const double high = *std::max_element(work.begin(), work.end());
  if (low <= 0) return {Status::kError, who + ": a rank recorded no work (the probe's counting allocator)"};
  if (high / low > kBalanceCeiling) {
    return {Status::kWrongNumber,
            fmt::format("{}: the busiest rank's ring attention allocated {:.2f} times the tensors of the idlest's "
                        "(more than {:g}): under the causal mask a late chunk's queries see many more keys than an "
                        "early one's. Balanced, rank r holds chunks r and 2N - 1 - r, one early and one late, and "
                        "every rank computes 2N + 1 pieces; skip each piece whose keys all come after its queries.{}",
                        who, high / low, kBalanceCeiling, summary)};
  }
  return {Status::kPassed, fmt::format("{}: the ranks' work is balanced (the busiest allocated {:.2f} times the tensors "
                                       "of the idlest, <= {:g}; the kit's counting allocator, with each rank's CPU "
                                       "time, its least of three rounds, beside it):{}",
                                       who, high / low, kBalanceCeiling, summary)};
}

// ---- GPT-2 --------------------------------------------------------------------------------

const nlohmann::json* section(const Run& run, const std::string& who, Verdict* failure) {
  if (run.results.is_object() && run.results.contains("context_parallel") &&
      run.results["context_parallel"].is_object()) {
    return &run.results["context_parallel"];
  }
  *failure = {Status::kError, who + ": results.json has no \"context_parallel\" section (the kit writes it at the "
                                    "end of the run: did the run end?)"};
  return nullptr;
}

Verdict gradients(Runner& runner, const std::string& e) {
  Verdict failure;
  const Run* ref = kit_run(runner, {"reference-gpt2-pp-step1", kReferenceGpt2, "pp-reference", 1, reference_flags(1),
                                    true}, &failure);
  if (!ref) return failure;
  const io::TensorMap full = load_dumps(ref->dump_dir, 1).at(0);
  std::string summary;
  for (const Grid& g : kGrids) {
    const Run& run = runner.run(cp_request(e, g));
    if (run.failure) return *run.failure;
    const std::string who = fmt::format("{} at {}", e, g.label());
    const std::vector<io::TensorMap> dumps = load_dumps(run.dump_dir, g.world);
    double worst = 0;
    for (int rank = 0; rank < g.world; ++rank) {
      const Difference d = compare_tensors(dumps.at(static_cast<size_t>(rank)), full, "grad.");
      if (!d.missing.empty()) {
        return {Status::kWrongNumber, fmt::format("{}: rank {} has no gradient of {} at step 1", who, rank, d.missing)};
      }
      if (d.relative() > kGradientTolerance) {
        const std::vector<double> mine = iteration_losses(run.results), theirs = iteration_losses(ref->results);
        const bool loss_differs = !mine.empty() && !theirs.empty() && std::abs(mine[0] - theirs[0]) > kLossTolerance;
        return {Status::kWrongNumber,
                fmt::format("{}: rank {}'s gradient at step 1 differs from one process's at {} by {:.3g} (relative "
                            "{:.2g} > {:g}). {}",
                            who, rank, d.worst, d.max_abs, d.relative(), kGradientTolerance,
                            loss_differs
                                ? fmt::format("Step 1's loss is already {:.6f} where one process's is {:.6f}: the "
                                              "attention's forward differs (the merge, the mask, the positions of "
                                              "each piece).", mine[0], theirs[0])
                                : "Step 1's loss is right, so the backward differs: do the keys' and values' "
                                  "gradients travel home to the rank that owns them, each rank adding its pieces' "
                                  "share?")};
      }
      worst = std::max(worst, d.relative());
    }
    summary += fmt::format("\n  {}: every rank within {:.2g}", g.label(), worst);
  }
  return {Status::kPassed, fmt::format("{}: step 1's gradient of every rank equals one process's (relative <= {:g}):{}",
                                       e, kGradientTolerance, summary)};
}

Verdict losses(Runner& runner, const std::string& e) {
  Verdict failure;
  const Run* ref = kit_run(runner, {"reference-gpt2-pipeline", kReferenceGpt2, "pipeline-reference", 1,
                                    reference_flags(kLossSteps), false}, &failure);
  if (!ref) return failure;
  std::string summary;
  for (const Grid& g : kGrids) {
    const Run& run = runner.run(cp_request(e, g));
    if (run.failure) return *run.failure;
    const Verdict v = losses_match(run, *ref, kLossSteps, fmt::format("{} at {}", e, g.label()),
                                   "Step 1 already differs, before any update: the attention's forward is not one "
                                   "process's (the merge of partials, the causal mask of each piece, its positions).",
                                   "Step 1 agrees, so the backward or an update differs: do the keys' and values' "
                                   "gradients return to the rank that owns them?");
    if (v.status != Status::kPassed) return v;
    summary += "\n  " + v.message;
  }
  return {Status::kPassed, fmt::format("{}: 20 losses equal single-process training at CP 2, CP 3 and CP 2 x DP 2:{}",
                                       e, summary)};
}

Verdict traffic(Runner& runner, const std::string& e) {
  std::string summary;
  for (const Grid& g : kGrids) {
    Verdict failure;
    const Run& run = runner.run(cp_request(e, g));
    if (run.failure) return *run.failure;
    const std::string who = fmt::format("{} at {}", e, g.label());
    const nlohmann::json* s = section(run, who, &failure);
    if (!s) return failure;
    // Note [Bytes of a context-parallel step]: recomputed here from the run's shape.
    const double padded = s->value("padded_positions_per_step", 0.0);
    const double layers = s->value("n_layer", 0.0), embd = s->value("n_embd", 0.0), n = g.cp;
    const double want = (3 * n - 2) * 8 * (padded / n) * embd * layers;  // padded: B x T' of a replica
    const auto& sent = s->at("ring_bytes_sent_per_step");
    for (size_t rank = 0; rank < sent.size(); ++rank) {
      const double got = sent[rank].get<double>();
      if (padded <= 0 || std::abs(got - want) > kTrafficSlackBytes) {
        return {Status::kWrongNumber,
                fmt::format("{}: rank {} sent {:.0f} bytes a step over its context group, not {:.0f} ({:+.0f}: {:+.2f} "
                            "times its two chunks' keys and values per layer): per layer the keys and values "
                            "travel N - 1 steps in the forward and N - 1 in the backward, and their gradients N "
                            "steps to come home, (3N - 2) x 2 x B x 2c x C floats. {}",
                            who, rank, got, want, got - want, (got - want) / (want / (3 * n - 2)),
                            got < want ? "Less: do the key and value gradients travel home?"
                                       : "More: is something sent twice, or sent at the last step, where it has "
                                         "already met every rank?")};
      }
    }
    summary += fmt::format("\n  {}: {:.3f} MB a step, every rank ({:.3f} predicted)", g.label(),
                           1e-6 * sent.at(0).get<double>(), 1e-6 * want);
  }
  return {Status::kPassed, fmt::format("{}: every rank sent exactly (3N - 2) x 8 x B x 2c x C bytes per layer and "
                                       "step:{}", e, summary)};
}

}  // namespace cp_check

std::vector<CheckSpec> cp_checks(const std::string& e) {
  namespace c = cp_check;
  return {
      {e, "attention", "block attention at odd lengths and blocks: outputs, log-sum-exps and gradients equal attention "
                       "in double within 1e-5", 3, [e](Runner& r) { return c::attention(r, e); }},
      {e, "merge", "two partials merged by their log-sum-exps equal attention over all their keys", 1,
       [e](Runner& r) { return c::merge(r, e); }},
      {e, "memory", "the attention's bytes at T = 1024 stay within 8 inputs and 6 blocks of scores, below T x T", 2,
       [e](Runner& r) { return c::memory(r, e); }},
      {e, "ring", "ring attention at 3 ranks: every rank's outputs and gradients equal attention over the whole "
                  "sequence (3 ranks)", 3, [e](Runner& r) { return c::ring(r, e); }},
      {e, "overlap", "each rank computes while the next keys' receive is in flight (the kit's log, 3 ranks)", 2,
       [e](Runner& r) { return c::overlap(r, e); }},
      {e, "balance", "the ranks' work is balanced under the causal mask (the bytes each rank's tensors allocate, 3 ranks)", 2,
       [e](Runner& r) { return c::balance(r, e); }},
      {e, "gradients", "GPT-2 at CP 2, CP 3 and CP 2 x DP 2: step 1's gradient of every rank equals one process's", 4,
       [e](Runner& r) { return c::gradients(r, e); }},
      {e, "losses", "GPT-2 at CP 2, CP 3 and CP 2 x DP 2: 20 losses equal single-process training within 1e-5", 4,
       [e](Runner& r) { return c::losses(r, e); }},
      {e, "traffic", "every rank sends exactly (3N - 2) x 8 x B x 2c x C bytes of keys, values and their gradients per "
                     "layer and step", 2, [e](Runner& r) { return c::traffic(r, e); }},
  };
}

}  // namespace dtlab::grader
