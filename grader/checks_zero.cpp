// The checks of the sharded exercise (zero): at each stage (ZeRO-1, ZeRO-2, FSDP) the gradient
// the ranks' pieces make together and 20 losses against the kit's single-process run (dtlab-gpt2)
// on the union of the ranks' minibatches, replicas that still agree, the gradient and parameter
// bytes a rank held at once, and the bytes each rank sent per step against the ring's formula.
//
// The data each rank reads is the kit's (lm::equal_shares), so these checks grade the student's
// rings and strategies alone. The gradient check reads the grader's dump of step 1: every
// parameter's gradient assembled by the kit (c10d's all_gather, not the student's ring) from the
// pieces the strategy left in shard_gradients, so a piece reduced wrongly, or put in the wrong
// place, shows as the parameter it belongs to. The memory and traffic checks read what the kit
// measured in the losses runs (results.json's "sharding", Note [Bytes of a sharded step]).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include <torch/types.h>

#include "checks.h"
#include "compare.h"

namespace dtlab::grader {
namespace zero_check {

constexpr int kGlobalBatch = 12;  // divides by 2 and 3
constexpr int kLossSteps = 20;
constexpr int kWorld = 3;          // GPT-2's units do not divide by 3: every stage pads
// Note [The traffic's tolerance]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The bytes a rank sent are the kit's log of the payload of every send it posted, and the rings'
// prediction is exact: each of N-1 steps sends one piece of a buffer padded to N pieces, so
// (N-1)/N of a unit is a whole number of bytes. Any difference is another protocol, so the check
// allows none (half a byte, for a mean over the steps). The smallest mistake it must catch is one
// unit gathered once more than needed where that unit is GPT-2's smallest, the head (ln_f: 2 x
// n_embd floats, padded): (N-1)/N of 1,032 bytes a step at 3 ranks of the fixture, 0.02% of the
// 3.3 MB ZeRO-1 sends (mutant smallest_unit_twice), which the 1% this check allowed until then let
// through.
constexpr double kTrafficSlackBytes = 0.5;
constexpr int kScalingSteps = 3;
constexpr int kScalingWorlds[] = {1, 2, 4};

std::string stage_name(int stage) {
  return stage == 0 ? "replicated" : stage == 1 ? "ZeRO-1" : stage == 2 ? "ZeRO-2" : "FSDP";
}

RunRequest zero_request(const std::string& e, int stage, int world, int steps) {
  std::vector<std::string> flags = lm_equivalence_flags(steps);
  flags.insert(flags.end(), {"--global_batch_size", std::to_string(kGlobalBatch), "--seed", "42", "--zero_stage",
                             std::to_string(stage)});
  const std::string purpose = steps == 1 ? "gradients" : "losses";
  return {fmt::format("{}-{}-stage{}-w{}", e, purpose, stage, world), e, "zero-" + purpose, world, flags, true};
}

std::string what(const std::string& e, int stage, int world) {
  return fmt::format("{} --zero_stage {} ({}) at {} ranks", e, stage, stage_name(stage), world);
}

// The run's results.json "sharding" section, or nullptr and the verdict.
const nlohmann::json* sharding(const Run& run, const std::string& who, Verdict* failure) {
  if (run.results.is_object() && run.results.contains("sharding") && run.results["sharding"].is_object()) {
    return &run.results["sharding"];
  }
  *failure = {Status::kError, who + ": results.json has no \"sharding\" section (the kit writes it at the end of "
                                    "a sharded run: did the run end?)"};
  return nullptr;
}

int64_t bytes_of(const nlohmann::json& s, const char* key) { return s.value(key, int64_t{0}); }

// The "sharding" section of the losses run of `stage` at 3 ranks (what the traffic check reads), or
// nullptr and the verdict. It trains 20 steps where this grading compares its losses, else 3: the
// bytes are a mean over the steps, and every step sends the same (Note [A run as long as its
// checks], shared_run_steps).
const nlohmann::json* losses_run_sharding(Runner& runner, const std::string& e, int stage, Verdict* failure) {
  const int steps = shared_run_steps(runner, {fmt::format("losses-{}", stage)}, kLossSteps);
  const Run& run = runner.run(zero_request(e, stage, kWorld, steps));
  if (run.failure) {
    *failure = *run.failure;
    return nullptr;
  }
  return sharding(run, what(e, stage, kWorld), failure);
}

// Note [A hint the evidence singles out]: a rank that sent less than its rings would have is told
// why only when its log says why: a gradient put through c10d's all_reduce (more than a few kB a
// step of it, where the kit's own all-reduces carry norms and losses) is DDP's collective, not the
// exercise's ring. Otherwise the sentence says what less or more usually means.
std::string traffic_cause(const nlohmann::json& s, double sent, double predicted) {
  constexpr double kKitsOwnAllReduces = 4096;  // bytes a step: the gradient norm's, the loss's
  const double all_reduced = s.value("all_reduced_bytes_per_step", 0.0);
  if (sent < predicted && all_reduced > kKitsOwnAllReduces) {
    return fmt::format("rank 0 put {:.0f} bytes a step through c10d's all_reduce: that is DDP's collective, which "
                       "the exercise replaces by your rings over send/recv (a reduce-scatter of each gradient, then "
                       "an all-gather of the pieces' new values), the only traffic the kit counts here",
                       all_reduced);
  }
  return sent > predicted ? "more means a piece sent twice or a unit gathered more often than needed"
                          : "less means a collective left out or sending less than a piece";
}

// Note [A gather that puts pieces in the wrong place] (shard/sharded_trainer.cpp): what FSDP's step 1
// found in the units the student gathered, from rank 0's results.json; "" when nothing (or no
// such section). The evidence singles the gather out: every piece at rest was right.
std::string gather_finding(const Run& run) {
  const nlohmann::json& r = run.results;
  if (!r.is_object() || !r.contains("sharding") || !r["sharding"].is_object()) return "";
  const nlohmann::json& f = r["sharding"].value("gather_finding", nlohmann::json(""));
  return f.is_string() ? f.get<std::string>() : "";
}

Verdict gradients(Runner& runner, const std::string& e, int stage) {
  Verdict failure;
  const RunRequest request = zero_request(e, stage, kWorld, 1);
  const std::optional<StepOneDumps> step_one = gpt2_step_one_dumps(runner, runner.run(request), kWorld, &failure);
  if (!step_one) return failure;
  const auto& dumps = step_one->ranks;
  const auto& full = step_one->full;
  const std::string who = what(e, stage, kWorld);
  const Difference d = compare_tensors(dumps.at(0), full, "grad.");
  if (!d.missing.empty()) {
    return {Status::kWrongNumber, fmt::format("{}: the kit found no gradient piece for {} after after_backward",
                                              who, d.missing)};
  }
  if (d.relative() <= kGradientTolerance) {
    return {Status::kPassed,
            fmt::format("{}: the pieces in shard_gradients after after_backward make one process's gradient of the "
                        "global batch (max |diff| {:.2g}, relative {:.2g})", who, d.max_abs, d.relative())};
  }
  std::string hint = gather_finding(runner.run(request));
  if (!hint.empty()) hint = "The forward read whole parameters that are not the model's: on rank 0, " + hint + ".";
  if (hint.empty()) hint = scale_hint(dumps.at(0), full, kWorld, "the global batch's gradient");
  if (hint.empty()) {
    hint = "The parameter named is where the pieces first go wrong: does your ring add the piece it receives into "
           "the piece of the same index (piece rank-s-2 at step s), so that after N-1 steps piece `rank` has been "
           "through every rank, and is this rank's piece (flat.shard(flat.gradients(), rank)) the one copied into "
           "shard_gradients?";
  }
  return {Status::kWrongNumber,
          fmt::format("{}: the gradient the ranks' pieces make together differs from one process's gradient of the "
                      "global batch at {} by {:.3g} (relative {:.2g} > {:g}). {}",
                      who, d.worst, d.max_abs, d.relative(), kGradientTolerance, hint)};
}

Verdict losses(Runner& runner, const std::string& e, int stage, int world) {
  Verdict failure;
  const RunRequest request = zero_request(e, stage, world, kLossSteps);
  const Run& run = runner.run(request);
  if (run.failure) return *run.failure;
  const std::string who = what(e, stage, world);
  const nlohmann::json* s = sharding(run, who, &failure);
  if (!s) return failure;
  // Replicas first: ranks that stopped agreeing train different models, whatever the losses say.
  const nlohmann::json& sums = (*s)["replica_checksums"];
  if (sums.is_array()) {
    for (size_t r = 1; r < sums.size(); ++r) {
      if (sums[r].get<double>() != sums[0].get<double>()) {
        return {Status::kWrongNumber,
                fmt::format("{}: after {} steps rank {}'s model differs from rank 0's (sum of |weights| {:.9g} "
                            "against {:.9g}): the ranks no longer hold the same replica. Each rank's optimiser "
                            "updates only its own pieces: after the update, all-gather every unit's values "
                            "(after_update) so that every rank holds every piece's new values",
                            who, kLossSteps, r, sums[r].get<double>(), sums[0].get<double>())};
      }
    }
  }
  const std::optional<ReadExamples> read = read_examples(run, world, &failure);
  if (!read) return failure;
  const std::optional<RunRequest> reference = gpt2_reference_request(runner, *read, kLossSteps, &failure);
  if (!reference) return failure;
  const Run* ref = kit_run(runner, *reference, &failure);
  if (!ref) return failure;
  const std::string gathered = gather_finding(run);
  return losses_match(run, *ref, kLossSteps, who,
                      gathered.empty()
                          ? "Step 1 already differs, before any update: the forward reads parameters that are not "
                            "one process's (FSDP: is every unit gathered whole before its stage runs?)"
                          : "Step 1 already differs, before any update: the forward read whole parameters that are "
                            "not the model's: on rank 0, " + gathered + ".",
                      // Not "is each piece averaged": AdamW's update and the clip are blind to the
                      // gradient's scale, so a sum instead of a mean does not show in the losses
                      // (the gradients check catches it); what does show is a piece of the wrong
                      // gradient, or an update some rank never sees.
                      "Step 1 agrees, so an update differs: does each rank's piece hold its own piece of the "
                      "gradient summed over every rank, and are the updated pieces gathered into every unit (FSDP: "
                      "before the forward and again before the backward)? (A sum where a mean belongs would not show "
                      "here: AdamW and the clip are blind to the gradient's scale; the gradients check tells.)");
}

// What a rank may hold at once, from the units' padded bytes (results.json's unit_bytes). The
// gradient: the tied embeddings' grows from the head's backward to the embeddings' (the first
// unit backward starts and the last it finishes), the head's, and two blocks' (one being computed,
// one laid into its flat buffer and reduced). The parameters: in the forward the tied embeddings
// stay gathered from the first stage to the head, with the head and two blocks (one computing,
// the next prefetched). Neither may be the whole model's.
//
// Note [A shape where the bound bites]: on the fixture's GPT-2 of two blocks those bounds are the
// whole model, so a strategy that holds one block too many could not show. The memory check runs
// its own short runs on a random GPT-2 of the preset gpt2-narrow (eight blocks of width 64 with the
// fixture's vocabulary: the embeddings 103k parameters, each block 50k), where the bound is 40% of
// the whole (812,568 of 2,012,232 bytes at 3 ranks). The reference's FSDP holds 612,108 bytes at
// most (the embeddings and one block). The smallest mistake it must catch is one block held past
// the bound: FSDP freeing each unit two stages after the last that reads it (mutant
// freed_two_stages_late), 1,011,996 bytes, three blocks at once, right in every loss and byte
// sent. A unit freed one stage late (two blocks) is the prefetch the bound allows.
struct UnitBytes {
  int64_t embeddings = 0, head = 0, largest_block = 0, whole = 0;
};

UnitBytes unit_bytes(const nlohmann::json& s) {
  UnitBytes u;
  for (const auto& [name, bytes] : s["unit_bytes"].items()) {
    const int64_t b = bytes.get<int64_t>();
    if (name == "embeddings") u.embeddings = b;
    else if (name == "head") u.head = b;
    else u.largest_block = std::max(u.largest_block, b);
    u.whole += b;
  }
  return u;
}

constexpr const char* kMemoryShape = "gpt2-narrow";
constexpr int kMemorySteps = 2;

// Note [A shape where the bound bites]: the memory check's own run of `stage`.
RunRequest memory_request(const std::string& e, int stage) {
  RunRequest r = zero_request(e, stage, kWorld, kMemorySteps);
  r.id = fmt::format("{}-memory-stage{}-w{}", e, stage, kWorld);
  r.purpose = "zero-memory";
  r.dump = false;
  r.flags.insert(r.flags.end(), {"--model_config", kMemoryShape});
  return r;
}

Verdict memory(Runner& runner, const std::string& e) {
  Verdict failure;
  std::string summary;
  int64_t whole = 0;
  for (const int stage : {2, 3}) {
    const std::string who = what(e, stage, kWorld) + " on " + kMemoryShape;
    const Run& run = runner.run(memory_request(e, stage));
    if (run.failure) return *run.failure;
    const nlohmann::json* s = sharding(run, who, &failure);
    if (!s) return failure;
    const UnitBytes u = unit_bytes(*s);
    whole = u.whole;
    const int64_t gradient = bytes_of(*s, "peak_gradient_bytes");
    // FSDP: the most whole parameters at once in the forward (stage hooks) or the backward
    // (gradient hooks): a unit gathered for backward too early holds as much as one never freed.
    const int64_t forward = bytes_of(*s, "peak_parameter_bytes"),
                  backward = s->contains("peak_backward_parameter_bytes") ? bytes_of(*s, "peak_backward_parameter_bytes") : 0;
    const int64_t parameters = std::max(forward, backward);
    const int64_t gradient_bound = u.embeddings + u.head + 2 * u.largest_block;
    const int64_t parameter_bound = u.embeddings + u.head + 2 * u.largest_block;
    if (stage >= 2 && (gradient >= u.whole || gradient > gradient_bound)) {
      return {Status::kWrongNumber,
              fmt::format("{}: rank 0 held {} bytes of gradient at once during backward; {}. Once a unit's "
                          "gradient is reduced, free it: release_gradients() and every parameter's gradient set to "
                          "none", who, gradient,
                          gradient >= u.whole
                              ? fmt::format("the whole model's gradient is {}, which no rank may hold", u.whole)
                              : fmt::format("a rank needs at most {} (the tied embeddings' and the head's, {} and "
                                            "{}, and two blocks' of {})", gradient_bound, u.embeddings, u.head,
                                            u.largest_block))};
    }
    if (stage == 3 && (parameters >= u.whole || parameters > parameter_bound)) {
      return {Status::kWrongNumber,
              fmt::format("{}: rank 0 held {} bytes of whole parameters at once in the {}; {}. {}", who, parameters,
                          backward > forward ? "backward" : "forward",
                          parameters >= u.whole
                              ? fmt::format("that is the whole model ({}), which FSDP never holds", u.whole)
                              : fmt::format("a rank needs at most {} (the tied embeddings, which the head reads "
                                            "last, {}; the head, {}; a block computing and the next one "
                                            "prefetched, {} each)", parameter_bound, u.embeddings, u.head,
                                            u.largest_block),
                          backward > forward ? "Gather a unit for its backward when backward reaches it (a hook on "
                                               "the output of the stage that read it), not all at once before"
                                             : "Free each unit after the last stage that reads it")};
    }
    summary += fmt::format("\n  {}: optimiser state {} bytes, gradient at most {} bytes (bound {}), whole parameters "
                           "at most {} bytes{}", stage_name(stage), bytes_of(*s, "optimizer_state_bytes"), gradient,
                           stage >= 2 ? fmt::format("{}, and less than the whole", gradient_bound)
                                      : std::string("none: ZeRO-1 keeps it whole"),
                           parameters, stage == 3 ? fmt::format(" (bound {}, and less than the whole)", parameter_bound) : "");
  }
  return {Status::kPassed, fmt::format("{} at {} ranks, rank 0, of a random {} of {} bytes padded:{}", e, kWorld,
                                       kMemoryShape, whole, summary)};
}

Verdict traffic(Runner& runner, const std::string& e) {
  Verdict failure;
  std::string summary;
  for (const int stage : {1, 2, 3}) {
    const std::string who = what(e, stage, kWorld);
    const nlohmann::json* s = losses_run_sharding(runner, e, stage, &failure);
    if (!s) return failure;
    const double sent = s->value("bytes_sent_per_step", 0.0), predicted = s->value("predicted_bytes_sent_per_step", 0.0);
    const double whole = static_cast<double>(bytes_of(*s, "whole_bytes"));
    const double ratio = predicted > 0 ? sent / predicted : 0.0;
    if (std::abs(sent - predicted) > kTrafficSlackBytes) {
      return {Status::kWrongNumber,
              fmt::format("{}: rank 0 sent {:.0f} bytes per step, {:+.0f} from the {:.0f} of the rings ({:.4f} "
                          "times; {} times (N-1)/N of the {:.0f}-byte padded model: {}). A ring sends one piece "
                          "per step, N-1 steps, for every reduce-scatter and every all-gather; {}",
                          who, sent, sent - predicted, predicted, ratio, stage == 3 ? 3 : 2, whole,
                          stage == 3 ? "a gather before each unit's forward and its backward, a reduce-scatter of "
                                       "its gradient"
                                     : "a reduce-scatter of the gradient and an all-gather of the parameters",
                          traffic_cause(*s, sent, predicted))};
    }
    summary += fmt::format("\n  {}: {:.0f} bytes per step over steps 1-{}, {:.2f} x the padded model ({} x (N-1)/N = "
                           "{:.2f})", stage_name(stage), sent, s->value("steps", 0), sent / whole, stage == 3 ? 3 : 2,
                           (stage == 3 ? 3.0 : 2.0) * (kWorld - 1) / kWorld);
  }
  return {Status::kPassed, fmt::format("{} at {} ranks, bytes rank 0 sent (the kit's log of its sends):{}"
                                       "\n  FSDP sends 1.5 times what ZeRO-1 and ZeRO-2 send, as all-reduce's "
                                       "2(N-1)/N becomes 3(N-1)/N", e, kWorld, summary)};
}

// Each stage at 1, 2 and 4 ranks for a few steps, beside the kit's replicated baseline (stage 0,
// Note [The replicated baseline] in shard/sharded_trainer.h) measured the same way: what a rank holds
// (results.json's "sharding", every tensor's storage included) and sends, for the report's
// figure. The memory check grades the bytes; this one asks only that the figure show a strategy
// that did its work: every run ended, and above one rank each of stages 1-3 sent the rings' bytes
// and (ZeRO-1 and 2) ended with the ranks' replicas equal. A strategy that does nothing also
// trains to the end (on zero gradients), and would otherwise earn this point. The rows are short
// and few (4 of 32 tokens a step), so that what sharding divides, the state (parameters,
// gradients, AdamW), is the larger part of what a rank holds, not the activations it leaves whole.
RunRequest scaling_request(const std::string& e, int stage, int world) {
  std::vector<std::string> flags = lm_equivalence_flags(kScalingSteps);
  flags.insert(flags.end(), {"--global_batch_size", "4", "--max_length", "32", "--zero_stage", std::to_string(stage)});
  return {fmt::format("{}-scaling-stage{}-w{}", e, stage, world), e, "zero-scaling", world, flags, false};
}

Verdict scaling(Runner& runner, const std::string& e) {
  Verdict failure;
  std::string summary;
  for (const int stage : {0, 1, 2, 3}) {
    summary += fmt::format("\n  {}:", stage_name(stage));
    for (const int world : kScalingWorlds) {
      const RunRequest request = scaling_request(e, stage, world);
      const Run& run = runner.run(request);
      if (run.failure) return *run.failure;
      const nlohmann::json* s = sharding(run, describe(request), &failure);
      if (!s) return failure;
      if (bytes_of(*s, "peak_tensor_bytes") <= 0) {
        return {Status::kError, fmt::format("{}: results.json's sharding has no peak_tensor_bytes (the kit's meter "
                                            "of every tensor: is the kit's driver in use?)", describe(request))};
      }
      const double sent = s->value("bytes_sent_per_step", 0.0), predicted = s->value("predicted_bytes_sent_per_step", 0.0);
      if (stage > 0 && world > 1 && std::abs(sent - predicted) > kTrafficSlackBytes) {
        return {Status::kWrongNumber,
                fmt::format("{}: rank 0 sent {:.0f} bytes per step, not the {:.0f} of the rings: what it held is no "
                            "figure of {}: {}", describe(request), sent, predicted, stage_name(stage),
                            traffic_cause(*s, sent, predicted))};
      }
      const nlohmann::json& sums = (*s)["replica_checksums"];
      if (sums.is_array() && !sums.empty()) {
        for (const auto& sum : sums) {
          if (sum != sums[0]) {
            return {Status::kWrongNumber,
                    fmt::format("{}: the ranks' replicas differ at the end: every rank must hold every piece's new "
                                "values (after_update's all-gather)", describe(request))};
          }
        }
      }
      summary += fmt::format(" {} rank{} {:.2f} MB (optimiser {:.2f}, gradient {:.2f}, parameters {:.2f});", world,
                             world == 1 ? "" : "s", 1e-6 * static_cast<double>(bytes_of(*s, "peak_tensor_bytes")),
                             1e-6 * static_cast<double>(bytes_of(*s, "optimizer_state_bytes")),
                             1e-6 * static_cast<double>(bytes_of(*s, "peak_gradient_bytes")),
                             1e-6 * static_cast<double>(bytes_of(*s, "peak_parameter_bytes")));
    }
  }
  return {Status::kPassed, fmt::format("{}: the replicated baseline and every stage at 1, 2 and 4 ranks, {} steps, "
                                       "rank 0's peak of all its tensors (the parts each at its own peak):{}\n  "
                                       "`grader report` draws them against the memory model (shard/memory_model.h)",
                                       e, kScalingSteps, summary)};
}

}  // namespace zero_check

std::vector<CheckSpec> zero_checks(const std::string& e) {
  namespace c = zero_check;
  std::vector<CheckSpec> checks;
  for (const int stage : {1, 2, 3}) {
    checks.push_back({e, fmt::format("gradients-{}", stage),
                      fmt::format("{}: the pieces after after_backward make one process's gradient of the global "
                                  "batch (3 ranks)", c::stage_name(stage)),
                      stage == 1 ? 4.0 : 2.0, [e, stage](Runner& r) { return c::gradients(r, e, stage); }});
  }
  for (const int stage : {1, 2, 3}) {
    checks.push_back({e, fmt::format("losses-{}", stage),
                      fmt::format("{}: 20 per-iteration losses equal single-process training within 1e-5, replicas "
                                  "agree (3 ranks)", c::stage_name(stage)),
                      3, [e, stage](Runner& r) { return c::losses(r, e, stage, 3); }});
  }
  checks.push_back({e, "losses-fsdp-2", "FSDP: 20 per-iteration losses equal single-process training within 1e-5 (2 "
                                         "ranks)", 2, [e](Runner& r) { return c::losses(r, e, 3, 2); }});
  checks.push_back({e, "memory", "ZeRO-2 and FSDP never hold the whole model's gradient (at most the embeddings', the "
                                 "head's and two blocks'), FSDP never its whole parameters (3 ranks, a random GPT-2 of eight blocks)", 3,
                    [e](Runner& r) { return c::memory(r, e); }});
  checks.push_back({e, "traffic", "each rank sends the rings' bytes per step: 2(N-1)/N of the model for ZeRO-1 and "
                                  "2, 3(N-1)/N for FSDP (3 ranks)", 2, [e](Runner& r) { return c::traffic(r, e); }});
  checks.push_back({e, "scaling", "runs every stage and the replicated baseline at 1, 2 and 4 ranks, sending the "
                                  "rings' bytes, and records what rank 0 held (the report's memory figure)", 1,
                    [e](Runner& r) { return c::scaling(r, e); }});
  return checks;
}

}  // namespace dtlab::grader
