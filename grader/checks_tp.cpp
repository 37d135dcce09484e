// The checks of tensor parallelism (tp): step 1's gradient of every rank's slices against the
// same slices of one process's gradient, at TP 2 and at TP 4 (where the fixture's vocabulary of
// 1482 does not divide and is padded to 1484); 20 losses of TP 2 and of TP 2 x DP 2 against the
// kit's single-process run; replicas that agree (the replicated parameters across each tensor
// group, everything across each data group); each rank's parameter bytes; the bytes each tensor
// group all-reduces per step.
//
// The grader holds its own answer for what a rank holds (expected_slice below, written from
// Megatron-LM's layout, not from the kit's shard_of, whose column choice is the student's
// shard_gpt2_attention_columns) and for the bytes (Note [Bytes of a tensor-parallel step] in
// tp/tp_trainer.h, recomputed here from GPT-2's shape). The runs read the data as pp's do (each
// replica a part of every global batch, its TP ranks the same rows), so they compare with the
// same single-process runs as pp's checks, and one grading runs those once.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "checks.h"
#include "compare.h"
#include "dtlab/model/checkpoint.h"

namespace dtlab::grader {
namespace tp_check {

constexpr int kBatch = 16;  // pp's: one reference run serves both
constexpr int kLossSteps = 20;
constexpr double kTrafficSlack = 0.01;
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


// What TP rank `rank` of `tp` holds of the whole tensor `name` (Megatron's layout for GPT-2, see
// tp/gpt2_tp.h): wte's rows of the vocabulary padded to a multiple of TP (zero past it); c_attn's
// q, k and v columns of the rank's heads, in that order; c_fc's columns; both c_proj's rows;
// the rest whole.
torch::Tensor expected_slice(const std::string& name, const torch::Tensor& whole, const Shape& s, int rank, int tp) {
  if (name == "transformer.wte.weight") {
    const int64_t rows = (s.vocab + tp - 1) / tp, start = rank * rows;
    torch::Tensor out = torch::zeros({rows, whole.size(1)}, whole.options());
    const int64_t real = std::max<int64_t>(0, std::min(start + rows, s.vocab) - start);
    if (real > 0) out.narrow(0, 0, real).copy_(whole.narrow(0, start, real));
    return out;
  }
  if (model::key_ends_with(name, ".attn.c_attn.weight") || model::key_ends_with(name, ".attn.c_attn.bias")) {
    const int64_t width = s.embd / tp, dim = whole.dim() - 1;  // a rank's heads are `width` columns of each third
    std::vector<torch::Tensor> parts;
    for (int64_t third = 0; third < 3; ++third) parts.push_back(whole.narrow(dim, third * s.embd + rank * width, width));
    return torch::cat(parts, dim);
  }
  if (model::key_ends_with(name, ".attn.c_proj.weight")) return whole.narrow(0, rank * (s.embd / tp), s.embd / tp);
  if (model::key_ends_with(name, ".mlp.c_proj.weight")) return whole.narrow(0, rank * (s.inner / tp), s.inner / tp);
  if (model::key_ends_with(name, ".mlp.c_fc.weight") || model::key_ends_with(name, ".mlp.c_fc.bias")) {
    return whole.narrow(whole.dim() - 1, rank * (s.inner / tp), s.inner / tp);
  }
  return whole;
}

bool is_split(const std::string& name) {
  return name == "transformer.wte.weight" || model::key_ends_with(name, ".attn.c_attn.weight") ||
         model::key_ends_with(name, ".attn.c_attn.bias") || model::key_ends_with(name, ".attn.c_proj.weight") ||
         model::key_ends_with(name, ".mlp.c_fc.weight") || model::key_ends_with(name, ".mlp.c_fc.bias") || model::key_ends_with(name, ".mlp.c_proj.weight");
}

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
  if (name == "transformer.wte.weight") {
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
  double worst = 0, scale = 0;
  std::string worst_name, worst_key;
  int worst_rank = 0;
  for (int rank = 0; rank < g.world; ++rank) {
    const int tp_rank = rank % g.tp;
    const io::TensorMap& mine = dumps.at(static_cast<size_t>(rank));
    for (const auto& [key, whole] : full) {
      if (key.rfind("grad.", 0) != 0 && key.rfind("param.", 0) != 0) continue;
      const std::string name = key.substr(key.find('.') + 1);
      const torch::Tensor want = expected_slice(name, whole, s, tp_rank, g.tp);
      const auto found = mine.find(key);
      if (found == mine.end() || found->second.sizes() != want.sizes()) {
        return {Status::kWrongNumber,
                fmt::format("{}: rank {} (TP rank {}) holds {} {}, not [{}] (1/{} of {}'s [{}]{})", who, rank, tp_rank,
                            key.substr(0, key.find('.')) == "grad" ? "no gradient of" : "no parameter", name,
                            fmt::join(want.sizes(), ", "), is_split(name) ? g.tp : 1, name,
                            fmt::join(whole.sizes(), ", "),
                            found == mine.end() ? "" : fmt::format("; it has [{}]", fmt::join(found->second.sizes(), ", ")))};
      }
      const double diff = (found->second.to(torch::kFloat64) - want.to(torch::kFloat64)).abs().max().item<double>();
      if (key.rfind("grad.", 0) == 0) scale = std::max(scale, whole.abs().max().item<double>());
      // Parameters are copies: they must be the same numbers, or the slice is another one.
      if (key.rfind("param.", 0) == 0 && diff > 0) {
        return {Status::kWrongNumber,
                fmt::format("{}: rank {} (TP rank {}) starts from other values of {} than its slice of one process's "
                            "(largest difference {:.3g}): it holds the wrong slice. {}",
                            who, rank, tp_rank, name, diff, slice_hint(name, g.tp, s))};
      }
      if (key.rfind("grad.", 0) == 0 && diff > worst) {
        worst = diff;
        worst_name = name;
        worst_rank = rank;
        worst_key = key;
      }
    }
  }
  const double relative = scale > 0 ? worst / scale : worst;
  if (relative > kGradientTolerance) {
    return {Status::kWrongNumber,
            fmt::format("{}: step 1's gradient of rank {}'s slice of {} differs from the same slice of one process's "
                        "gradient by {:.3g} (relative {:.2g} > {:g}). {}",
                        who, worst_rank, worst_name, worst, relative, kGradientTolerance,
                        slice_hint(worst_name, g.tp, s))};
  }
  return {Status::kPassed,
          fmt::format("{}: every rank's parameters are its slices of one process's, and step 1's gradient of each "
                      "slice equals the same slice of one process's gradient (largest difference {:.2g}, relative "
                      "{:.2g}){}",
                      who, worst, relative,
                      s.vocab % g.tp ? fmt::format("; the vocabulary of {} padded to {}", s.vocab,
                                                   (s.vocab + g.tp - 1) / g.tp * g.tp)
                                     : std::string())};
}

const Run* reference_losses(Runner& runner, Verdict* failure) {
  return kit_run(runner, {"reference-gpt2-pipeline", kReferenceGpt2, "pipeline-reference", 1,
                          reference_flags(kLossSteps), false}, failure);
}

Verdict losses(Runner& runner, const std::string& e, const Grid& g) {
  Verdict failure;
  const Run* ref = reference_losses(runner, &failure);
  if (!ref) return failure;
  const Run& run = runner.run(tp_request(e, g, kLossSteps));
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
    const Run& run = runner.run(tp_request(e, g, kLossSteps));
    if (run.failure) return *run.failure;
    const std::string who = fmt::format("{} at {}", e, g.label());
    const nlohmann::json* t = section(run, who, &failure);
    if (!t) return failure;
    if (std::optional<Verdict> verdict = check(g, *t, who)) return verdict;
  }
  return std::nullopt;
}

// The checksums in `sums` of the ranks `ranks` agree (relative kReplicaTolerance); the first
// rank that does not, else -1.
int first_disagreeing(const nlohmann::json& sums, const std::vector<int>& ranks) {
  const double a = sums.at(static_cast<size_t>(ranks.front())).get<double>();
  for (int r : ranks) {
    const double b = sums.at(static_cast<size_t>(r)).get<double>();
    if (std::abs(a - b) > kReplicaTolerance * std::max(std::abs(a), 1.0)) return r;
  }
  return -1;
}

Verdict replicas(Runner& runner, const std::string& e) {
  std::string summary;
  const std::optional<Verdict> verdict = each_losses_run(runner, e, [&](const Grid& g, const nlohmann::json& t,
                                                                          const std::string& who) -> std::optional<Verdict> {
    const nlohmann::json& replicated = t.at("replicated_checksums");
    const nlohmann::json& all = t.at("checksums");
    if (static_cast<int>(replicated.size()) != g.world || static_cast<int>(all.size()) != g.world) {
      return Verdict{Status::kError, fmt::format("{}: results.json's checksums are not one per rank", who)};
    }
    for (int first = 0; first < g.world; first += g.tp) {  // each tensor group: the replicated parameters
      std::vector<int> group;
      for (int r = first; r < first + g.tp; ++r) group.push_back(r);
      if (const int r = first_disagreeing(replicated, group); r >= 0) {
        return Verdict{Status::kWrongNumber,
                fmt::format("{}: after {} steps rank {}'s replicated parameters (wpe, the layer norms, the "
                            "row-parallel biases) differ from rank {}'s in its tensor group (sum of |weights| {:.9g} "
                            "against {:.9g}). Their gradients are equal on every TP rank only when every input they "
                            "see is whole and equal: is g's output the SUM of the ranks' parts on every rank, and "
                            "f's backward the sum of their gradients?",
                            who, kLossSteps, r, first, replicated.at(static_cast<size_t>(r)).get<double>(),
                            replicated.at(static_cast<size_t>(first)).get<double>())};
      }
    }
    for (int tp_rank = 0; tp_rank < g.tp; ++tp_rank) {  // each data group: everything
      std::vector<int> group;
      for (int r = tp_rank; r < g.world; r += g.tp) group.push_back(r);
      if (const int r = first_disagreeing(all, group); r >= 0) {
        return Verdict{Status::kWrongNumber,
                fmt::format("{}: after {} steps rank {}'s parameters differ from rank {}'s, which holds the same slices "
                            "in another data-parallel replica", who, kLossSteps, r, tp_rank)};
      }
    }
    summary += fmt::format("\n  {}: replicated parameters equal across every tensor group{}", g.label(),
                           g.world > g.tp ? ", every slice equal across its data group" : "");
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
    summary += fmt::format("\n  {}: every rank {:.3f} MB of the model's {:.3f} MB", g.label(), 1e-6 * double(want),
                           1e-6 * double(whole));
    return std::nullopt;
  });
  if (verdict) return *verdict;
  return {Status::kPassed, fmt::format("{}: each rank holds 1/TP of every split weight, the rest whole:{}", e, summary)};
}

Verdict traffic(Runner& runner, const std::string& e) {
  std::string summary;
  const std::optional<Verdict> verdict = each_losses_run(runner, e, [&](const Grid& g, const nlohmann::json& t,
                                                                          const std::string& who) -> std::optional<Verdict> {
    const double positions = t.value("positions_per_step", 0.0), measured = t.value("tp_bytes_per_step", 0.0);
    const auto L = t.value("n_layer", int64_t{0}), H = t.value("n_embd", int64_t{0});
    // Note [Bytes of a tensor-parallel step]: (4L + 2) activations of B x T x H, the loss's 3 x B x T, the norm.
    const double want = (4.0 * double(L) + 2) * positions * double(H) * 4 + 3 * positions * 4 + 8;
    if (positions <= 0 || std::abs(measured / want - 1) > kTrafficSlack) {
      return Verdict{Status::kWrongNumber,
              fmt::format("{}: rank 0's tensor group all-reduced {:.0f} bytes a step, not {:.0f} ({:.3f} times): "
                          "(4L + 2) all-reduces of the activations ([B, T, H] floats: per block two in the forward, "
                          "g after each row-parallel layer, and two in the backward, f before each column-parallel "
                          "one; the embedding's g and the head's f) and the loss's three of [B x T]. {}",
                          who, measured, want, measured / want,
                          measured < want ? "An all-reduce is missing: is every row-parallel output summed?"
                                          : "An all-reduce too many: does a layer all-reduce what is already whole?")};
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
      {e, "memory", "each rank holds 1/TP of every split weight (wte's rows of the padded vocabulary), the rest whole",
       2, [e](Runner& r) { return c::memory(r, e); }},
      {e, "traffic", "each tensor group all-reduces (4L + 2) activations and the loss's three vectors per step, within "
                     "1%", 3, [e](Runner& r) { return c::traffic(r, e); }},
  };
}

}  // namespace dtlab::grader
