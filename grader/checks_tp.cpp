// The checks of tensor parallelism (tp): step 1's gradient of every rank's slices against the
// same slices of one process's gradient, at TP 2 and at TP 4 (where the fixture's vocabulary of
// 1482 does not divide and is padded to 1484); 20 losses of TP 2 and of TP 2 x DP 2 against the
// kit's single-process run; replicas that agree (the replicated parameters across each tensor
// group, everything across each data group); each rank's parameter bytes; the bytes each tensor
// group all-reduces per step.
//
// Note [Answers found, not written]: the grader ships with the student release, so it must not
// hold the answer to the exercise, and where a rank's columns and rows lie is part of that answer
// (shard_gpt2_attention_columns, vocab_shard). The checks find them instead: at step 1 each slice
// of a rank's parameter is bit for bit one of one process's (grader/placement.h). They then
// require what tensor parallelism needs of any layout: the ranks of a tensor group hold every
// slice once, each rank's c_attn columns are the same whole heads of q, k and v, each c_proj's
// rows follow its input's columns, wte's padding is zeros; and they compare the gradients at the
// places found (the padding's against 0). The bytes are Note [Bytes of a tensor-parallel step] in
// tp/tp_trainer.h, recomputed here from GPT-2's shape. The runs read the data as pp's do (each
// replica a part of every global batch, its TP ranks the same rows), so they compare with the
// same single-process runs as pp's checks, and one grading runs those once.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "checks.h"
#include "compare.h"
#include "dtlab/model/checkpoint.h"
#include "placement.h"

namespace dtlab::grader {
namespace tp_check {

constexpr int kBatch = 16;  // pp's: one reference run serves both
constexpr int kLossSteps = 20;
// Note [The tensor group's tolerance]: the traffic check counts the tensor group's operations and
// weighs their bytes from the kit's log of every payload, and the prediction (Note [Bytes of a
// tensor-parallel step]) is exact: (4L + 2) x B x T x H floats, the loss's 3 x B x T and the
// norm's 8 bytes, averaged over the steps (so half a byte, not 0). The smallest mistake it must
// catch with the count right is one of the loss's three [B x T] vectors all-reduced in float64,
// right in every number: B x T x 4 bytes more a step, 0.08% of the fixture's 2 MB (mutant
// sum_of_exps_in_double), which the 1% this check allowed until then let through.
constexpr double kTrafficSlackBytes = 0.5;
// Note [The replicas' tolerance]: a right submission's replicas are equal bit for bit (an
// all-reduce hands every rank the same bits, and each replica then does the same operations on
// them): the checks' runs show a largest difference of 0, which the check prints. Nor can the
// order of a sum make them part at TP 2, since a sum of two is the same either way round. The
// smallest mistake it must catch, right in every loss, is a replicated parameter that one rank
// never uses: the row-parallel bias added by tensor rank 0 only, before g (mutant
// bias_on_rank_zero), whose copies on the other ranks get no gradient and never move: after 20
// steps the replicated parameters' sums of |weights| differ by 1.3e-3 relative (1165.97 against
// 1167.47 at TP 2), 1,300 times this tolerance, which leaves room only for checksums printed and
// read back and for ranks whose matrix products round differently (a cluster of unlike CPUs).
constexpr double kReplicaTolerance = 1e-6;  // relative, of checksums that must agree

// pp's single-process flags (checks_pp.cpp): the same ids, the same runs.
std::vector<std::string> reference_flags(int steps) {
  std::vector<std::string> flags = lm_equivalence_flags(steps);
  flags.insert(flags.end(), {"--batch_size", std::to_string(kBatch)});
  return flags;
}

struct Grid {
  int tp, world;
  std::string label() const {
    return world == tp ? fmt::format("TP {}", tp) : fmt::format("TP {} x DP {} ({} ranks)", tp, world / tp, world);
  }
};

RunRequest tp_request(const std::string& e, const Grid& g, int steps) {
  std::vector<std::string> flags = lm_equivalence_flags(steps);
  flags.insert(flags.end(), {"--global_batch_size", std::to_string(kBatch), "--tp", std::to_string(g.tp)});
  const std::string purpose = steps == 1 ? "gradients" : "losses";
  return {fmt::format("{}-{}-tp{}-w{}", e, purpose, g.tp, g.world), e, "tp-" + purpose, g.world, flags, steps == 1};
}

// The run's results.json "tensor_parallel" section, or nullptr and the verdict.
const nlohmann::json* section(const Run& run, const std::string& who, Verdict* failure) {
  if (run.results.is_object() && run.results.contains("tensor_parallel") &&
      run.results["tensor_parallel"].is_object()) {
    return &run.results["tensor_parallel"];
  }
  *failure = {Status::kError, who + ": results.json has no \"tensor_parallel\" section (the kit writes it at the "
                                    "end of the run: did the run end?)"};
  return nullptr;
}

// GPT-2's shape, from the reference's whole gradient: n_embd and the vocabulary from wte, the
// MLP width from c_fc, the layers from the blocks present; the heads are the config's.
struct Shape {
  int64_t vocab = 0, embd = 0, inner = 0, heads = 0, layers = 0;
};

const std::string kWte = "transformer.wte.weight";

Shape shape_of(const io::TensorMap& full, int64_t heads) {
  Shape s;
  s.heads = heads;
  const torch::Tensor& wte = full.at("grad.transformer.wte.weight");
  s.vocab = wte.size(0);
  s.embd = wte.size(1);
  s.inner = full.at("grad.transformer.h.0.mlp.c_fc.weight").size(1);
  while (full.count(fmt::format("grad.transformer.h.{}.ln_1.weight", s.layers))) ++s.layers;
  return s;
}

// The hint for a rank whose slice of `name` differs: what holds that tensor and what goes wrong there.
std::string slice_hint(const std::string& name, int tp, const Shape& s) {
  if (name == kWte) {
    return fmt::format("wte is the embedding AND the tied head: its gradient is the vocabulary-parallel embedding's "
                       "backward plus the head's, through vocab_parallel_cross_entropy's backward (softmax - one-hot "
                       "on this rank's columns; 0 on ignored rows{}).",
                       s.vocab % tp ? fmt::format(" and on the padding columns: at TP {} the vocabulary of {} is "
                                                  "padded to {}, and a padding column must count as -inf in the loss",
                                                  tp, s.vocab, (s.vocab + tp - 1) / tp * tp)
                                    : std::string());
  }
  if (model::key_ends_with(name, "c_attn.weight") || model::key_ends_with(name, "c_attn.bias")) {
    return "c_attn holds [q | k | v]: does shard_gpt2_attention_columns give each rank its heads' columns of EACH "
           "third (q's, then k's, then v's), not one contiguous slice of the 3 x n_embd columns?";
  }
  return "Are f (identity forward, all-reduce backward) and g (all-reduce forward, identity backward) where they "
         "belong: f before each column-parallel layer, g after each row-parallel one, the bias added once after g?";
}

// Note [A hint the evidence singles out] (grader/checks.cpp), for tp's gradients: the parameter
// whose gradient differs most is where a mistake shows, not always where it is. Two findings
// single a cause out before any parameter's own hint: step 1's loss already differs (the forward
// is wrong before any gradient: a row-parallel output not all-reduced, or the loss's maximum or
// sum over the vocabulary not all-reduced, changes the loss itself), or every gradient is one
// factor times one process's, alike in every parameter (a backward that scales everything it
// passes on: the loss's backward not multiplying by the incoming gradient, the mean's 1/tokens).
// Otherwise the parameter's own hint (slice_hint).
std::string gradient_hint(const Run& run, const Run& ref, const std::vector<std::pair<torch::Tensor, torch::Tensor>>& pairs,
                          const std::string& worst_name, int tp, const Shape& s) {
  const std::vector<double> mine = iteration_losses(run.results), theirs = iteration_losses(ref.results);
  if (!mine.empty() && !theirs.empty() && std::abs(mine[0] - theirs[0]) > kLossTolerance) {
    return fmt::format("Step 1's loss is already {:.7f} where one process's is {:.7f}: the forward differs before any "
                       "gradient is taken. Is every row-parallel layer's output all-reduced (g), and are the loss's "
                       "maximum and sum of exps over the vocabulary all-reduced over the tensor group?",
                       mine[0], theirs[0]);
  }
  // The slices as one map each, for compare.h's measure of a uniform multiple.
  io::TensorMap got, want;
  for (size_t i = 0; i < pairs.size(); ++i) {
    got["grad." + std::to_string(i)] = pairs[i].first;
    want["grad." + std::to_string(i)] = pairs[i].second;
  }
  const double factor = projection_factor(got, want, "grad.");
  constexpr double kUniform = 0.01;  // as scale_hint's: a mistake that is not a scale is far off it
  if (factor != 0 && std::abs(factor - 1) > 0.01 && scaled_residual(got, want, "grad.", factor) < kUniform) {
    return fmt::format("Every gradient is {:.4g} times one process's, alike in every parameter, and step 1's loss is "
                       "right: something in the backward scales all it passes on. Does "
                       "vocab_parallel_cross_entropy's backward multiply by the incoming gradient (the mean's "
                       "1/tokens)?", factor);
  }
  return slice_hint(worst_name, tp, s);
}

// What each rank of a tensor group holds, found in one process's parameters by value (Note
// [Answers found, not written] above): a placement per parameter name.
using Placements = std::map<std::string, Placement>;

// The placement of rank `rank`'s parameter `name`, or the verdict saying why it is none. A
// split bias (zeros at step 1, so found by no value) lies where its weight's columns do.
std::optional<Verdict> place(const io::TensorMap& mine, const io::TensorMap& full, const std::string& name,
                             const std::string& who, int rank, int tp, const Shape& s, Placements* placed) {
  const torch::Tensor& whole = full.at("param." + name);
  const auto found = mine.find("param." + name);
  const auto grad = mine.find("grad." + name);
  if (found == mine.end() || grad == mine.end() || grad->second.sizes() != found->second.sizes()) {
    return Verdict{Status::kWrongNumber,
                   fmt::format("{}: rank {} holds no {} of {} (one process's is [{}]){}", who, rank,
                               found == mine.end() ? "parameter" : "gradient of the shape of its parameter", name,
                               fmt::join(whole.sizes(), ", "),
                               found == mine.end() ? "" : fmt::format("; its parameter is [{}]",
                                                                      fmt::join(found->second.sizes(), ", ")))};
  }
  const torch::Tensor& held = found->second;
  std::string why;
  const std::optional<Placement> p = place_parameter(name, held, whole, *placed, &why);
  const auto other_values = [&](const std::string& what) {
    return Verdict{Status::kWrongNumber,
                   fmt::format("{}: rank {}'s {} [{}] is no slice of one process's [{}] at step 1 ({}): it holds the "
                               "wrong values. {}",
                               who, rank, name, fmt::join(held.sizes(), ", "), fmt::join(whole.sizes(), ", "), what,
                               slice_hint(name, tp, s))};
  };
  if (!p) return other_values(why);
  const torch::Tensor want = paired_part_of_whole(whole, *p);
  if (!torch::equal(real_part_of_mine(held, *p), want)) return other_values("its values differ from the whole's there");
  (*placed)[name] = *p;
  return std::nullopt;
}

// Where rank `rank`'s c_attn columns break what attention needs, or "": each third of them q's, k's
// and v's columns of the same heads in the same order (the kit reads them as [q | k | v]), each
// head whole.
std::string attention_columns_gap(const Placement& p, const Shape& s) {
  const auto n = static_cast<int64_t>(p.index.size()), w = n / 3, head = s.embd / s.heads;
  if (p.dim != 1 || n % 3 || w % head) return fmt::format("it holds {} columns, not three runs of whole heads", n);
  for (int64_t c = 0; c < w; ++c) {
    const int64_t q = p.index[static_cast<size_t>(c)];
    if (q < 0 || q >= s.embd) return fmt::format("its column {} is one process's column {}, not one of q's", c, q);
    for (int64_t third = 1; third < 3; ++third) {
      const int64_t got = p.index[static_cast<size_t>(c + third * w)];
      if (got != q + third * s.embd) {
        return fmt::format("its column {} is q's column {}, but its column {} is one process's column {}, not {}'s "
                           "column {}", c, q, c + third * w, got, third == 1 ? "k" : "v", q);
      }
    }
    if (q / head != p.index[static_cast<size_t>(c / head * head)] / head) {
      return fmt::format("its columns {} to {} mix the heads of q (head {} and head {})", c / head * head,
                         c / head * head + head - 1, p.index[static_cast<size_t>(c / head * head)] / head, q / head);
    }
  }
  return "";
}

// Where a row-parallel layer's rows break what its input needs, or "": the rows of a c_proj are
// those of the outputs this rank computes, in its order (attention: its q columns; the MLP: its
// c_fc columns).
std::string rows_follow_gap(const Placement& rows, const Placement& columns, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (i >= static_cast<int64_t>(rows.index.size()) || rows.index[static_cast<size_t>(i)] != columns.index[static_cast<size_t>(i)]) {
      return fmt::format("its row {} is one process's row {}, but the input there is the output of column {}", i,
                         i < static_cast<int64_t>(rows.index.size()) ? rows.index[static_cast<size_t>(i)] : -1,
                         columns.index[static_cast<size_t>(i)]);
    }
  }
  return "";
}

// What a tensor group holds, as properties: every split tensor's slices partition the whole, the
// attention's columns are whole heads of q, k and v, each c_proj's rows follow its input.
std::optional<Verdict> check_layout(const std::vector<Placements>& placed, int first, const Grid& g,
                                    const io::TensorMap& full, const Shape& s, const std::string& who) {
  for (const auto& [name, p0] : placed.at(static_cast<size_t>(first))) {
    std::vector<const Placement*> group;
    for (int r = first; r < first + g.tp; ++r) group.push_back(&placed.at(static_cast<size_t>(r)).at(name));
    bool split = false, whole = false;
    for (const Placement* p : group) (p->whole() ? whole : split) = true;
    if (!split) continue;
    const torch::Tensor& all = full.at("param." + name);
    std::string gap = whole ? "some ranks hold it whole, others a slice"
                            : partition_gap(group, all.size(group.front()->dim));
    if (gap.empty() && model::key_ends_with(name, ".attn.c_attn.weight")) {
      for (int r = 0; r < g.tp && gap.empty(); ++r) {
        if (std::string why = attention_columns_gap(*group[static_cast<size_t>(r)], s); !why.empty()) {
          gap = fmt::format("rank {}'s: {}", first + r, why);
        }
      }
    }
    const bool attn = model::key_ends_with(name, ".attn.c_proj.weight"), mlp = model::key_ends_with(name, ".mlp.c_proj.weight");
    if (gap.empty() && (attn || mlp)) {
      const std::string input = name.substr(0, name.size() - std::string(".c_proj.weight").size()) +
                                (attn ? ".c_attn.weight" : ".c_fc.weight");
      for (int r = 0; r < g.tp && gap.empty(); ++r) {
        const Placements& mine = placed.at(static_cast<size_t>(first + r));
        const Placement& rows = mine.at(name);
        const auto count = static_cast<int64_t>(attn ? mine.at(input).index.size() / 3 : mine.at(input).index.size());
        if (std::string why = rows_follow_gap(rows, mine.at(input), count); !why.empty()) {
          gap = fmt::format("rank {}'s: {}", first + r, why);
        }
      }
    }
    if (!gap.empty()) {
      return Verdict{Status::kWrongNumber,
                     fmt::format("{}: the ranks {} to {} do not split {} [{}] as tensor parallelism needs: {}. {}", who,
                                 first, first + g.tp - 1, name, fmt::join(all.sizes(), ", "), gap,
                                 slice_hint(name, g.tp, s))};
    }
  }
  return std::nullopt;
}

Verdict gradients(Runner& runner, const std::string& e, const Grid& g) {
  Verdict failure;
  const Run* ref = kit_run(runner, {"reference-gpt2-pp-step1", kReferenceGpt2, "pp-reference", 1, reference_flags(1),
                                    true}, &failure);
  if (!ref) return failure;
  const io::TensorMap full = load_dumps(ref->dump_dir, 1).at(0);
  const Run& run = runner.run(tp_request(e, g, 1));
  if (run.failure) return *run.failure;
  const std::string who = fmt::format("{} at {}", e, g.label());
  const nlohmann::json* t = section(run, who, &failure);
  if (!t) return failure;
  const Shape s = shape_of(full, t->value("n_head", int64_t{0}));
  if (s.heads <= 0 || s.heads % g.tp) {
    return {Status::kError, fmt::format("{}: results.json gives {} heads, which TP {} does not divide", who, s.heads,
                                        g.tp)};
  }
  const std::vector<io::TensorMap> dumps = load_dumps(run.dump_dir, g.world);
  // Where each rank's parameters lie in one process's, then whether that is a tensor-parallel
  // split at all, then the gradients there.
  std::vector<Placements> placed(static_cast<size_t>(g.world));
  for (int rank = 0; rank < g.world; ++rank) {
    for (const bool biases : {false, true}) {  // a split bias lies where its weight's columns do
      for (const auto& [key, whole] : full) {
        if (key.rfind("param.", 0) != 0 || model::key_ends_with(key, ".bias") != biases) continue;
        const std::optional<Verdict> wrong = place(dumps.at(static_cast<size_t>(rank)), full, key.substr(6), who,
                                                   rank, g.tp, s, &placed[static_cast<size_t>(rank)]);
        if (wrong) return *wrong;
      }
    }
  }
  for (int first = 0; first < g.world; first += g.tp) {
    if (std::optional<Verdict> wrong = check_layout(placed, first, g, full, s, who)) return *wrong;
  }
  double worst = 0, scale = 0;
  std::string worst_name;
  int worst_rank = 0;
  bool worst_is_padding = false;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs;  // (mine, the whole's) at every real place
  for (int rank = 0; rank < g.world; ++rank) {
    for (const auto& [name, p] : placed[static_cast<size_t>(rank)]) {
      const torch::Tensor whole = full.at("grad." + name).to(torch::kFloat64);
      const torch::Tensor mine = dumps.at(static_cast<size_t>(rank)).at("grad." + name).to(torch::kFloat64);
      scale = std::max(scale, whole.abs().max().item<double>());
      // The real slices against the whole's there; the padding's gradient against 0.
      pairs.emplace_back(real_part_of_mine(mine, p), paired_part_of_whole(whole, p));
      const double diff = (pairs.back().first - pairs.back().second).abs().max().item<double>();
      const torch::Tensor padding = padding_part_of_mine(mine, p);
      const double off = padding.numel() > 0 ? padding.abs().max().item<double>() : 0.0;
      if (std::max(diff, off) > worst) {
        worst = std::max(diff, off), worst_name = name, worst_rank = rank, worst_is_padding = off > diff;
      }
    }
  }
  const double relative = scale > 0 ? worst / scale : worst;
  if (relative > kGradientTolerance) {
    return {Status::kWrongNumber,
            fmt::format("{}: step 1's gradient of rank {}'s slice of {} {} by {:.3g} (relative {:.2g} > {:g}). {}",
                        who, worst_rank, worst_name,
                        worst_is_padding ? "is not 0 on its padding rows, which no token reaches,"
                                         : "differs from one process's gradient at the same places",
                        worst, relative, kGradientTolerance,
                        worst_is_padding ? slice_hint(worst_name, g.tp, s)
                                         : gradient_hint(run, *ref, pairs, worst_name, g.tp, s))};
  }
  const int64_t padded = [&] {
    int64_t rows = 0;
    for (int r = 0; r < g.tp; ++r) rows += static_cast<int64_t>(placed[static_cast<size_t>(r)].at(kWte).index.size());
    return rows;
  }();
  return {Status::kPassed,
          fmt::format("{}: every rank's parameters are slices of one process's that split it as tensor parallelism "
                      "needs, and step 1's gradient of each slice equals the same slice of one process's gradient "
                      "(largest difference {:.2g}, relative {:.2g}){}",
                      who, worst, relative,
                      padded != s.vocab ? fmt::format("; the vocabulary of {} padded to {}", s.vocab, padded)
                                        : std::string())};
}

// The steps of the losses run at `g`: 20 where this grading compares its losses or the replicas
// (whose drift grows with the steps: Note [The replicas' tolerance]), else the few the memory and
// traffic checks need (Note [A run as long as its checks], shared_run_steps).
int losses_run_steps(const Runner& runner, const Grid& g) {
  return shared_run_steps(runner, {g.world == g.tp ? "losses-2" : "losses-tp-dp", "replicas"}, kLossSteps);
}

const Run* reference_losses(Runner& runner, Verdict* failure) {
  return kit_run(runner, {"reference-gpt2-pipeline", kReferenceGpt2, "pipeline-reference", 1,
                          reference_flags(kLossSteps), false}, failure);
}

Verdict losses(Runner& runner, const std::string& e, const Grid& g) {
  Verdict failure;
  const Run* ref = reference_losses(runner, &failure);
  if (!ref) return failure;
  const Run& run = runner.run(tp_request(e, g, losses_run_steps(runner, g)));
  if (run.failure) return *run.failure;
  const std::string who = fmt::format("{} at {}", e, g.label());
  // The classic mistake named: logits gathered whole before the vocabulary-parallel recipe count
  // every exp TP times, a loss exactly log TP too high.
  const std::vector<double> mine = iteration_losses(run.results), theirs = iteration_losses(ref->results);
  if (!mine.empty() && !theirs.empty() && std::abs(mine[0] - theirs[0] - std::log(double(g.tp))) < 1e-3) {
    return {Status::kWrongNumber,
            fmt::format("{}: step 1's loss is {:.6f}, one process's {:.6f}: log {} = {:.6f} too high. The sum of exps "
                        "counted every exp {} times: were the logits gathered whole (or the sum of exps all-reduced "
                        "over logits every rank holds) before vocab_parallel_cross_entropy? Each rank must sum the "
                        "exps of its own columns only",
                        who, mine[0], theirs[0], g.tp, std::log(double(g.tp)), g.tp)};
  }
  return losses_match(run, *ref, kLossSteps, who,
                      "Step 1 already differs, before any update: the forward is not one process's. Is the "
                      "row-parallel output all-reduced (g) before the bias and the residual, the embedding's lookups "
                      "summed over the ranks, and the loss over the real vocabulary only (padding columns -inf)?",
                      "Step 1 agrees, so an update or a later forward differs: does f's backward all-reduce the "
                      "gradient of its input and g's pass it through unchanged? Is each row-parallel bias added once, "
                      "after g? (GPT-2's biases start at zero, so a bias added on every rank shows from step 2 on.)");
}

constexpr Grid kLossGrids[] = {{2, 2}, {2, 4}};  // TP 2; TP 2 x DP 2

// Runs `check` on the "tensor_parallel" section of each losses run (TP 2, TP 2 x DP 2) and who it
// is; the first verdict it gives, or a run's failure, ends the loop. nullopt: every run passed.
using SectionCheck = std::function<std::optional<Verdict>(const Grid&, const nlohmann::json&, const std::string&)>;
std::optional<Verdict> each_losses_run(Runner& runner, const std::string& e, const SectionCheck& check) {
  for (const Grid& g : kLossGrids) {
    Verdict failure;
    const Run& run = runner.run(tp_request(e, g, losses_run_steps(runner, g)));
    if (run.failure) return *run.failure;
    const std::string who = fmt::format("{} at {}", e, g.label());
    const nlohmann::json* t = section(run, who, &failure);
    if (!t) return failure;
    if (std::optional<Verdict> verdict = check(g, *t, who)) return verdict;
  }
  return std::nullopt;
}

// The checksums in `sums` of the ranks `ranks` agree (relative kReplicaTolerance); the first
// rank that does not, else -1. `largest` grows to the largest relative difference seen.
int first_disagreeing(const nlohmann::json& sums, const std::vector<int>& ranks, double& largest) {
  const double a = sums.at(static_cast<size_t>(ranks.front())).get<double>();
  for (int r : ranks) {
    const double b = sums.at(static_cast<size_t>(r)).get<double>();
    const double relative = std::abs(a - b) / std::max(std::abs(a), 1.0);
    largest = std::max(largest, relative);
    if (relative > kReplicaTolerance) return r;
  }
  return -1;
}

Verdict replicas(Runner& runner, const std::string& e) {
  std::string summary;
  const std::optional<Verdict> verdict = each_losses_run(runner, e, [&](const Grid& g, const nlohmann::json& t,
                                                                          const std::string& who) -> std::optional<Verdict> {
    double largest = 0;
    const nlohmann::json& replicated = t.at("replicated_checksums");
    const nlohmann::json& all = t.at("checksums");
    if (static_cast<int>(replicated.size()) != g.world || static_cast<int>(all.size()) != g.world) {
      return Verdict{Status::kError, fmt::format("{}: results.json's checksums are not one per rank", who)};
    }
    for (int first = 0; first < g.world; first += g.tp) {  // each tensor group: the replicated parameters
      std::vector<int> group;
      for (int r = first; r < first + g.tp; ++r) group.push_back(r);
      if (const int r = first_disagreeing(replicated, group, largest); r >= 0) {
        return Verdict{Status::kWrongNumber,
                fmt::format("{}: after {} steps rank {}'s replicated parameters (wpe, the layer norms, the "
                            "row-parallel biases) differ from rank {}'s in its tensor group (sum of |weights| {:.9g} "
                            "against {:.9g}). Their gradients are equal on every TP rank only when every rank uses "
                            "them alike on whole, equal inputs: is g's output the SUM of the ranks' parts on every "
                            "rank, f's backward the sum of their gradients, and each row-parallel bias added by "
                            "every rank after g (not by one rank before it)?",
                            who, kLossSteps, r, first, replicated.at(static_cast<size_t>(r)).get<double>(),
                            replicated.at(static_cast<size_t>(first)).get<double>())};
      }
    }
    for (int tp_rank = 0; tp_rank < g.tp; ++tp_rank) {  // each data group: everything
      std::vector<int> group;
      for (int r = tp_rank; r < g.world; r += g.tp) group.push_back(r);
      if (const int r = first_disagreeing(all, group, largest); r >= 0) {
        return Verdict{Status::kWrongNumber,
                fmt::format("{}: after {} steps rank {}'s parameters differ from rank {}'s, which holds the same slices "
                            "in another data-parallel replica", who, kLossSteps, r, tp_rank)};
      }
    }
    summary += fmt::format("\n  {}: replicated parameters equal across every tensor group{} (largest relative "
                           "difference {:.3g})", g.label(),
                           g.world > g.tp ? ", every slice equal across its data group" : "", largest);
    return std::nullopt;
  });
  if (verdict) return *verdict;
  return {Status::kPassed, fmt::format("{}: after {} steps{}", e, kLossSteps, summary)};
}

// What a rank of TP holds, in bytes of float32: the whole model's replicated parameters, 1/TP of
// every split matrix and bias, and wte's rows of the padded vocabulary.
int64_t predicted_parameter_bytes(const nlohmann::json& t, int tp) {
  const int64_t L = t.value("n_layer", int64_t{0}), H = t.value("n_embd", int64_t{0}),
                I = t.value("inner", int64_t{0}), V = t.value("vocab_size", int64_t{0});
  const int64_t split_per_block = H * 3 * H + 3 * H + H * H + H * I + I + I * H;  // c_attn, c_proj, c_fc, c_proj
  const int64_t whole = t.value("whole_bytes", int64_t{0}) / 4;
  const int64_t replicated = whole - V * H - L * split_per_block;
  return 4 * (replicated + (V + tp - 1) / tp * H + L * split_per_block / tp);
}

Verdict memory(Runner& runner, const std::string& e) {
  std::string summary;
  const std::optional<Verdict> verdict = each_losses_run(runner, e, [&](const Grid& g, const nlohmann::json& t,
                                                                          const std::string& who) -> std::optional<Verdict> {
    const int64_t want = predicted_parameter_bytes(t, g.tp), whole = t.value("whole_bytes", int64_t{0});
    const nlohmann::json& held = t.at("parameter_bytes");
    for (int r = 0; r < g.world && r < static_cast<int>(held.size()); ++r) {
      const auto have = held.at(static_cast<size_t>(r)).get<int64_t>();
      if (have != want) {
        return Verdict{Status::kWrongNumber,
                fmt::format("{}: rank {} holds {} bytes of parameters, not {}: the replicated ones whole, 1/{} of every "
                            "split weight and wte's rows of the padded vocabulary (the whole model is {}). Does "
                            "vocab_shard give each rank padded / TP rows, and shard_gpt2_attention_columns 3 x n_embd "
                            "/ TP columns?", who, r, have, want, g.tp, whole)};
      }
    }
    // The largest tensor of a step (the counting allocator, rank 0, steps 2 on) against the logits
    // rank 0 computes, B x T x V/TP floats: the vocabulary-parallel loss holds nothing larger, and
    // logits gathered whole are TP times that. Where DP > 1 the kit's flat buffer of the slices'
    // gradients (its data-parallel average) is larger, so only a tensor group alone is held to it.
    const int64_t largest = t.value("largest_tensor_bytes", int64_t{0}), slice = t.value("logits_slice_bytes", int64_t{0});
    if (g.world == g.tp && slice > 0 && largest > slice) {
      return Verdict{Status::kWrongNumber,
                     fmt::format("{}: rank 0's largest tensor in a step took {} bytes, {:.2f} times its logits' {} "
                                 "(B x T x V/TP floats): the vocabulary-parallel embedding and loss never hold more "
                                 "than this rank's columns; logits gathered whole are TP times them.",
                                 who, largest, double(largest) / double(slice), slice)};
    }
    summary += fmt::format("\n  {}: every rank {:.3f} MB of the model's {:.3f} MB{}", g.label(), 1e-6 * double(want),
                           1e-6 * double(whole),
                           g.world == g.tp && slice > 0 ? fmt::format("; its largest tensor {:.3f} MB, its logits' {:.3f} MB",
                                                               1e-6 * double(largest), 1e-6 * double(slice))
                                                  : std::string());
    return std::nullopt;
  });
  if (verdict) return *verdict;
  return {Status::kPassed, fmt::format("{}: each rank holds 1/TP of every split weight, the rest whole, and no tensor "
                                       "larger than its B x T x V/TP logits:{}", e, summary)};
}

Verdict traffic(Runner& runner, const std::string& e) {
  std::string summary;
  const std::optional<Verdict> verdict = each_losses_run(runner, e, [&](const Grid& g, const nlohmann::json& t,
                                                                          const std::string& who) -> std::optional<Verdict> {
    const double positions = t.value("positions_per_step", 0.0), measured = t.value("tp_bytes_per_step", 0.0);
    const auto L = t.value("n_layer", int64_t{0}), H = t.value("n_embd", int64_t{0});
    // Note [Bytes of a tensor-parallel step]: counted, not only weighed. Any other kind of
    // operation on the tensor group (an all_gather of the logits, a broadcast, a send) is one the
    // lesson never needs, however few bytes it moves; the all-reduces are exactly (4L + 2) of the
    // activations, the loss's three (max, sum of exps, target logit) and the clip's norm.
    if (!t.contains("tp_operations_per_step")) {
      return Verdict{Status::kError, fmt::format("{}: results.json's tensor_parallel has no tp_operations_per_step", who)};
    }
    for (const auto& [op, tally] : t.at("tp_operations_per_step").items()) {
      if (op == "all_reduce") continue;
      return Verdict{Status::kWrongNumber,
                     fmt::format("{}: the tensor group ran {:g} {} a step ({:.3f} MB). Tensor parallelism needs only "
                                 "all-reduces: the vocabulary-parallel loss keeps each rank's B x T x V/TP logits and "
                                 "all-reduces three [B x T] vectors (the max, the sum of exps, the target's logit); "
                                 "gathering the logits holds B x T x V on every rank, what the split is for.",
                                 who, tally.value("count", 0.0), op, 1e-6 * tally.value("bytes", 0.0))};
    }
    const double all_reduces = t.at("tp_operations_per_step").contains("all_reduce")
                                   ? t.at("tp_operations_per_step").at("all_reduce").value("count", 0.0)
                                   : 0.0;
    const double want_count = 4.0 * double(L) + 2 + 3 + 1;
    if (all_reduces != want_count) {
      return Verdict{Status::kWrongNumber,
                     fmt::format("{}: the tensor group ran {:g} all-reduces a step, not {:g}: 4L + 2 = {:g} of the "
                                 "activations, the loss's 3 (the max, the sum of exps, the target's logit) and the "
                                 "gradient norm's 1. {}",
                                 who, all_reduces, want_count, 4.0 * double(L) + 2,
                                 all_reduces < want_count ? "An all-reduce is missing: is every row-parallel output summed, "
                                                            "and does the loss all-reduce its max, its sum and its target "
                                                            "logit?"
                                                          : "An all-reduce too many: does a layer all-reduce what is "
                                                            "already whole?")};
    }
    // Note [Bytes of a tensor-parallel step]: (4L + 2) activations of B x T x H, the loss's 3 x B x T, the norm.
    const double want = (4.0 * double(L) + 2) * positions * double(H) * 4 + 3 * positions * 4 + 8;
    if (positions <= 0 || std::abs(measured - want) > kTrafficSlackBytes) {
      return Verdict{Status::kWrongNumber,
              fmt::format("{}: rank 0's tensor group all-reduced {:.0f} bytes a step, not {:.0f} ({:+.0f}): "
                          "(4L + 2) all-reduces of the activations ([B, T, H] floats: per block two in the forward, "
                          "g after each row-parallel layer, and two in the backward, f before each column-parallel "
                          "one; the embedding's g and the head's f) and the loss's three of [B x T] floats. Their "
                          "number is right ({:g}), so one of them carried a tensor of another shape or type: "
                          "{:.2f} B x T floats {} a step.",
                          who, measured, want, measured - want, all_reduces, std::abs(measured - want) / (4 * positions),
                          measured > want ? "more" : "less")};
    }
    summary += fmt::format("\n  {}: {:.2f} MB a step ({:.2f} predicted)", g.label(), 1e-6 * measured, 1e-6 * want);
    return std::nullopt;
  });
  if (verdict) return *verdict;
  return {Status::kPassed, fmt::format("{}: each tensor group all-reduces (4L + 2) activations and the loss's three "
                                       "vectors per step:{}", e, summary)};
}

}  // namespace tp_check

std::vector<CheckSpec> tp_checks(const std::string& e) {
  namespace c = tp_check;
  return {
      {e, "gradients-2", "TP 2: every rank's slices, and step 1's gradient of each, equal one process's (2 ranks)", 5,
       [e](Runner& r) { return c::gradients(r, e, {2, 2}); }},
      {e, "gradients-4", "TP 4, the vocabulary padded: every rank's slices and step 1's gradients equal one process's "
                         "(4 ranks)", 4, [e](Runner& r) { return c::gradients(r, e, {4, 4}); }},
      {e, "losses-2", "TP 2: 20 per-iteration losses equal single-process training within 1e-5 (2 ranks)", 4,
       [e](Runner& r) { return c::losses(r, e, {2, 2}); }},
      {e, "losses-tp-dp", "TP 2 x DP 2: 20 per-iteration losses equal single-process training within 1e-5 (4 ranks)",
       4, [e](Runner& r) { return c::losses(r, e, {2, 4}); }},
      {e, "replicas", "the replicated parameters agree across each tensor group, every slice across its data group, "
                      "after 20 steps", 3, [e](Runner& r) { return c::replicas(r, e); }},
      {e, "memory", "each rank holds 1/TP of every split weight (wte's rows of the padded vocabulary), the rest whole, and no "
                    "tensor larger than its B x T x V/TP logits",
       2, [e](Runner& r) { return c::memory(r, e); }},
      {e, "traffic", "each tensor group runs exactly (4L + 2) all-reduces of activations, the loss's three and the "
                     "norm's per step, no other operation, their bytes exactly", 3, [e](Runner& r) { return c::traffic(r, e); }},
  };
}

}  // namespace dtlab::grader
