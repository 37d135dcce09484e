// The checks of the pipeline across ranks (pp): the schedules (simulated for every m, n in 1..8:
// complete, deadlock-free, in an order the wire can pair, GPipe's fill-drain and 1F1B's bounded
// memory), the losses of 20 steps of GPipe, 1F1B and data x pipeline against the kit's
// single-process run, and the activations each stage rank stored. The first judges what
// `pp --probe schedules` recorded (common/exercises/pp/probe.cpp) with the kit's simulator
// (pipeline/simulate.h); the grader holds its own answer.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "checks.h"
#include "compare.h"
#include "dtlab/pipeline/simulate.h"
#include "dtlab/pipeline/stage_schedule.h"
#include "dtlab/pipeline/timeline.h"

namespace dtlab::grader {
// Named, not anonymous: the grader compiles in batches (Note [Unity builds]).
namespace pp_check {

using pipeline::Action;
using pipeline::StageOp;
using pipeline::StageSchedule;

constexpr int kBatch = 16;
constexpr int kLossSteps = 20;
constexpr int kTimingMicroBatches[] = {1, 2, 4, 8};
constexpr int kTimingBatch = 32;
// The overlap check: each action sleeps kSleepMs; at least kMinConcurrency ranks at work on average.
constexpr int kSleepMs = 20;
constexpr double kMinConcurrency = 1.5;
// Step 1's gradients against one process's: max |g - g_full| / max |g_full| over every tensor.
constexpr double kStepGradientTolerance = 1e-5;

std::vector<std::string> equivalence_flags(int steps) {
  std::vector<std::string> flags = lm_equivalence_flags(steps);
  flags.insert(flags.end(), {"--batch_size", std::to_string(kBatch)});
  return flags;
}

// "F0 F1 B0" as the probe wrote it; nullopt for text that is not a list of actions.
std::optional<StageSchedule> parse(const std::string& text) {
  StageSchedule list;
  size_t at = 0;
  while (at < text.size()) {
    const size_t space = std::min(text.find(' ', at), text.size());
    const std::string word = text.substr(at, space - at);
    if (word.size() < 2 || (word[0] != 'F' && word[0] != 'B') ||
        word.find_first_not_of("0123456789", 1) != std::string::npos) {
      return std::nullopt;
    }
    list.push_back({word[0] == 'F' ? StageOp::kForward : StageOp::kBackward, std::stoi(word.substr(1))});
    at = space + 1;
  }
  return list;
}

std::string builder_of(const std::string& kind) { return kind == "gpipe" ? "gpipe_schedule" : "one_f_one_b_schedule"; }

// Note [A pipeline's causality]: the memory, overlap and timing checks measure counts and busy
// times, which a run_stage that never sends or receives (each action fed zeros) has too: every
// action runs, in its schedule's order, on every rank at once. What only a pipeline has is
// causality: stage s computes micro-batch i's forward only once stage s-1 has sent it its
// activation, and its backward only once stage s+1 has sent it the gradient. So on the timeline
// (every rank's actions on the one clock of this machine) F(i) on s starts after F(i) ended on
// s-1, and B(i) on s after B(i) ended on s+1; without a tolerance, since the end is recorded
// before the send and the start after the receive. Each of those checks (and order, whose
// message order a run without messages would pass) first requires it of its runs, so that a run
// without messages earns none of their points.
std::optional<Verdict> not_causal(const nlohmann::json& results, const std::string& label) {
  const nlohmann::json* timeline = nullptr;
  if (results.contains("pp") && results.at("pp").contains("timeline")) timeline = &results.at("pp").at("timeline");
  if (!timeline || !timeline->contains("events") || timeline->at("events").empty()) {
    return Verdict{Status::kError, fmt::format("{}: results.json has no timeline of the stage ranks", label)};
  }
  const int stages = timeline->value("stages", 0);
  std::map<std::tuple<int, std::string, int>, std::pair<double, double>> span_of;  // (stage, pass, micro)
  for (const auto& ev : timeline->at("events")) {
    span_of[{ev.at("stage").get<int>(), ev.at("pass").get<std::string>(), ev.at("micro").get<int>()}] = {
        ev.at("start").get<double>(), ev.at("end").get<double>()};
  }
  // The violation that starts first on the clock: the one a student can find on the timeline.
  std::optional<Verdict> first;
  double first_start = INFINITY;
  for (const auto& [key, span] : span_of) {
    const auto& [stage, pass, micro] = key;
    const bool forward = pass == "forward";
    const int from = forward ? stage - 1 : stage + 1;  // the stage that sends this action's input
    if (from < 0 || from >= stages) continue;
    const auto sender = span_of.find({from, pass, micro});
    if (sender == span_of.end()) {
      return Verdict{Status::kError,
                     fmt::format("{}: the timeline has no {} of micro-batch {} on stage {}", label, pass, micro, from)};
    }
    if (span.first < sender->second.second && span.first < first_start) {
      first_start = span.first;
      const std::string action = fmt::format("{}{}", forward ? 'F' : 'B', micro);
      first = Verdict{Status::kWrongNumber,
                      fmt::format("{}: stage rank {} started {} at {:.1f} ms, before stage rank {} had finished {} (at "
                                  "{:.1f} ms), whose {} it needs: these stages did not talk. A stage computes "
                                  "micro-batch i only after its neighbour sent it; does run_stage receive each "
                                  "action's input from the neighbour (into activation_buffer(i) or gradient_buffer(i)) "
                                  "and send each result?", label, stage, action, 1e3 * span.first, from, action,
                                  1e3 * sender->second.second, forward ? "activation" : "gradient")};
    }
  }
  if (first) return first;
  return std::nullopt;
}

// One (kind, n, m) of the probe: every stage's list, or why it is wrong.
Verdict judge_case(const nlohmann::json& c) {
  const std::string kind = c.at("kind");
  const int n = c.at("n"), m = c.at("m");
  const std::string builder = builder_of(kind);
  std::vector<StageSchedule> lists;
  for (int s = 0; s < n; ++s) {
    const auto& got = c.at("stages").at(static_cast<size_t>(s));
    const std::string call = fmt::format("{}({}, {}, {})", builder, s, n, m);
    if (got.contains("error")) {
      return {Status::kWrongNumber, fmt::format("{} threw instead of returning a list: {}", call,
                                                got.at("error").get<std::string>())};
    }
    std::optional<StageSchedule> list = parse(got.at("actions").get<std::string>());
    if (!list) return {Status::kError, fmt::format("{}: the probe recorded an unreadable list", call)};
    lists.push_back(std::move(*list));
  }
  const std::string what = fmt::format("{} for {} stage{} and {} micro-batch{}", builder, n, n == 1 ? "" : "s", m,
                                       m == 1 ? "" : "es");
  pipeline::SimulationResult r;
  try {
    r = pipeline::check_schedules(lists, m);  // complete, each B after its F, no deadlock
    pipeline::check_message_order(lists);
  } catch (const std::exception& e) {
    // check_schedules words a deadlock as "... deadlock after K of N actions: ..." (simulate.h): a
    // deadlock is its own verdict, not a wrong number.
    const bool deadlock = std::string(e.what()).find(" deadlock after ") != std::string::npos;
    return {deadlock ? Status::kDeadlock : Status::kWrongNumber, fmt::format("{}: {}", what, e.what())};
  }
  for (int s = 0; s < n; ++s) {
    const StageSchedule& list = lists[static_cast<size_t>(s)];
    if (kind == "gpipe") {
      // Fill, then drain: no backward before the last forward.
      const auto first_backward = std::find_if(list.begin(), list.end(), [](const Action& a) {
        return a.op == StageOp::kBackward;
      });
      if (first_backward - list.begin() != m) {
        return {Status::kWrongNumber, fmt::format("{}: stage {} runs {} before its last forward ({}): GPipe runs every "
                                                  "forward, then every backward", what, s, describe(*first_backward),
                                                  pipeline::schedule_text(list))};
      }
    } else {
      const int bound = std::min(n - s, m);
      const int peak = r.peak_activations[static_cast<size_t>(s)];
      if (peak > bound) {
        return {Status::kWrongNumber,
                fmt::format("{}: stage {} stores up to {} activations at once ({}); 1F1B stores at most "
                            "min(stages - stage, m) = {}: a warm-up of stages - stage - 1 forwards, then one forward "
                            "and one backward", what, s, peak, pipeline::schedule_text(list), bound)};
      }
      if (peak < bound) {
        return {Status::kWrongNumber,
                fmt::format("{}: stage {} stores at most {} activation(s) ({}), fewer than 1F1B's min(stages - stage, "
                            "m) = {}: its warm-up is too short, so the stages after it wait", what, s, peak,
                            pipeline::schedule_text(list), bound)};
      }
    }
  }
  return {Status::kPassed, ""};
}

Verdict schedules(Runner& runner, const std::string& e) {
  const Run& run = runner.run({e + "-probe-schedules", e, "pp-probe", 1, {"--probe", "schedules"}, false});
  if (run.failure) return *run.failure;
  if (!run.results.contains("result")) {
    return {Status::kError, fmt::format("{} --probe schedules: results.json holds no result", e)};
  }
  int cases = 0;
  for (const auto& c : run.results.at("result")) {
    if (c.value("refuse", false)) {
      const auto& got = c.at("stages").at(0);
      if (!got.contains("error")) {
        return {Status::kWrongNumber, fmt::format("{}({}, {}, {}) returned {} instead of refusing the arguments "
                                                  "(pipeline::check_schedule_arguments)", builder_of(c.at("kind")),
                                                  c.at("stage").get<int>(), c.at("n").get<int>(), c.at("m").get<int>(),
                                                  got.value("actions", std::string("a list")))};
      }
      continue;
    }
    Verdict v = judge_case(c);
    if (v.status != Status::kPassed) return v;
    ++cases;
  }
  if (cases != 2 * 64) return {Status::kError, fmt::format("{} --probe schedules: {} cases, expected 128", e, cases)};
  return {Status::kPassed, fmt::format("{}: gpipe_schedule and one_f_one_b_schedule for every n, m in 1..8 simulated: "
                                       "complete, deadlock-free, in an order c10d pairs; GPipe fills then drains, "
                                       "1F1B stores min(n - stage, m) activations; bad arguments refused", e)};
}

struct PpRun {
  std::string id, label;
  int world, stages, micro_batches;
  std::string schedule;
  bool data_parallel;
};

// The odd configurations: 3 stages with 5 and 7 micro-batches (16 rows do not divide into
// either), and 2 pipelines x 2 stages with 3 micro-batches of 8 rows.
const std::vector<PpRun>& pp_runs() {
  static const std::vector<PpRun> runs = {
      {"gpipe", "GPipe, 3 stage ranks x 5 micro-batches", 3, 3, 5, "gpipe", false},
      {"1f1b", "1F1B, 3 stage ranks x 7 micro-batches", 3, 3, 7, "1f1b", false},
      {"dp-pp", "2 pipelines x 2 stages (4 ranks), 1F1B, 3 micro-batches", 4, 2, 3, "1f1b", true},
  };
  return runs;
}

// The flags of `steps` steps of p's grid, on the same global batch as the single-process run.
std::vector<std::string> grid_flags(const PpRun& p, int steps) {
  std::vector<std::string> flags = equivalence_flags(steps);
  flags.insert(flags.end(), {"--stages", std::to_string(p.stages), "--micro_batches", std::to_string(p.micro_batches),
                             "--schedule", p.schedule});
  if (p.data_parallel) flags.insert(flags.end(), {"--global_batch_size", std::to_string(kBatch)});
  return flags;
}

// The run of `p`: 20 steps where this grading compares its losses, else the 3 the memory and order
// checks read (the peaks of every step; the timeline and the order of sends of step 3, kept after
// the first steps' allocations): Note [A run as long as its checks], shared_run_steps.
const Run& run_of(Runner& runner, const std::string& e, const PpRun& p) {
  const int steps = shared_run_steps(runner, {"losses-" + p.id}, kLossSteps);
  return runner.run({e + "-" + p.id, e, "pp-" + p.id, p.world, grid_flags(p, steps), false});
}

Verdict losses(Runner& runner, const std::string& e, const PpRun& p) {
  Verdict failure;
  // The pipeline exercise's reference run: the same flags, so one run serves both.
  const Run* ref = kit_run(runner, {"reference-gpt2-pipeline", kReferenceGpt2, "pipeline-reference", 1,
                                    equivalence_flags(kLossSteps), false}, &failure);
  if (!ref) return failure;
  const Run& run = run_of(runner, e, p);
  if (run.failure) return *run.failure;
  return losses_match(run, *ref, kLossSteps, e + ": " + p.label,
                      "Step 1 already differs: does every micro-batch go forward and backward once, through the "
                      "activations and gradients of its own micro-batch?",
                      // Note [A hint the evidence singles out]: the losses cannot tell a gradient
                      // that never reached a stage from one computed on a receive buffer that a later
                      // micro-batch overwrote; the gradients check compares each stage's.
                      "Step 1 agrees, so step 1's update differs: its gradients are not one process's. The "
                      "gradients check says which stage's parameters first differ; a micro-batch's activations or "
                      "gradients overwritten before its backward read them (a receive buffer used again) shows "
                      "there as well as a gradient that never reached its stage.");
}

// What the runtime measured: 1F1B's stage s stored at most min(n - s, m) micro-batches, GPipe's m,
// and held no more than that (Note [Held, not only stored] in pipeline/stage_step.h: stored, or
// alive in a send not yet waited for), in runs that were pipelines (Note [A pipeline's causality]).
Verdict memory(Runner& runner, const std::string& e) {
  std::string summary;
  for (const PpRun& p : pp_runs()) {
    if (p.data_parallel) continue;
    const Run& run = run_of(runner, e, p);
    if (run.failure) return *run.failure;
    if (auto wrong = not_causal(run.results, p.label)) return *wrong;
    const auto* section = run.results.contains("pp") ? &run.results.at("pp") : nullptr;
    if (!section || !section->contains("peak_stored_micro_batches") || !section->contains("peak_held_micro_batches")) {
      return {Status::kError, fmt::format("{}: results.json has no pp section with the stored activations", p.label)};
    }
    const std::vector<int> peaks = section->at("peak_stored_micro_batches");
    const std::vector<int> held = section->at("peak_held_micro_batches");
    const std::vector<int64_t> bytes = section->at("peak_activation_bytes");
    const std::string schedule = p.schedule == "gpipe" ? "GPipe" : "1F1B (min(stages - stage, m))";
    for (int s = 0; s < p.stages; ++s) {
      const int want = p.schedule == "gpipe" ? p.micro_batches : std::min(p.stages - s, p.micro_batches);
      const int got = peaks.at(static_cast<size_t>(s));
      if (got != want) {
        return {Status::kWrongNumber,
                fmt::format("{}: stage rank {} held {} micro-batches' activations at once; {} holds {}", p.label, s, got,
                            schedule, want)};
      }
      const int alive = held.at(static_cast<size_t>(s));
      if (alive > want) {
        return {Status::kWrongNumber,
                fmt::format("{}: stage rank {} held the activations of {} micro-batches at once, stored or in sends "
                            "not yet waited for; its schedule stores {}, and {} holds {}. A send keeps its tensor alive "
                            "until it is waited for: wait for each action's sends once the next action's input has "
                            "arrived, not at the end of the step", p.label, s, alive, got, schedule, want)};
      }
    }
    summary += fmt::format("\n  {}: peak micro-batches stored per stage rank [{}], held [{}], bytes held [{}]", p.label,
                           fmt::join(peaks, ", "), fmt::join(held, ", "), fmt::join(bytes, ", "));
  }
  return {Status::kPassed, fmt::format("{}: the runtime's count of stored and held activations:{}", e, summary)};
}

// The stage ranks computed at the same time: a GPipe run of 3 stages x 5 micro-batches whose
// every action also sleeps kSleepMs (--stage_sleep_ms: a sleep needs no core, so the measure does
// not depend on what else this machine runs), and on step 3's timeline (every rank's actions on
// the clock they share) the ranks' busy times must add up to more than kMinConcurrency spans.
// Ideal: n m / (m + n - 1) = 2.1 ranks at work; ranks that take turns reach at most 1.
Verdict overlap(Runner& runner, const std::string& e) {
  std::vector<std::string> flags = equivalence_flags(3);
  flags.insert(flags.end(), {"--stages", "3", "--micro_batches", "5", "--schedule", "gpipe", "--stage_sleep_ms",
                             std::to_string(kSleepMs)});
  const std::string label = "GPipe, 3 stage ranks x 5 micro-batches, each action sleeping " + std::to_string(kSleepMs) +
                            " ms";
  const Run& run = runner.run({e + "-overlap", e, "pp-overlap", 3, flags, false});
  if (run.failure) return *run.failure;
  // Ranks that never talk are busy at once too (Note [A pipeline's causality]).
  if (auto wrong = not_causal(run.results, label)) return *wrong;
  const nlohmann::json* timeline = &run.results.at("pp").at("timeline");
  double busy = 0;
  std::vector<double> per_stage_ms(3, 0.0);
  for (const auto& ev : timeline->at("events")) {
    const double d = ev.at("end").get<double>() - ev.at("start").get<double>();
    busy += d;
    per_stage_ms.at(ev.at("stage").get<size_t>()) += 1e3 * d;
  }
  const double span = timeline->at("span").get<double>();
  const double concurrency = span > 0 ? busy / span : 0;
  const std::string numbers = fmt::format("the ranks were busy {:.0f} ms in all ([{:.0f}] ms per stage rank) within a "
                                          "step of {:.0f} ms: {:.2f} ranks at work on average", 1e3 * busy,
                                          fmt::join(per_stage_ms, ", "), 1e3 * span, concurrency);
  if (concurrency < kMinConcurrency) {
    return {Status::kWrongNumber,
            fmt::format("{}: the stage ranks took turns instead of working at once: {} (at least {:g} must hold). Does "
                        "a stage wait for more than the one input its next action needs (receiving every micro-batch "
                        "before the first forward, or waiting for each send to complete)?", label, numbers,
                        kMinConcurrency)};
  }
  return {Status::kPassed, fmt::format("{}: {}", label, numbers)};
}

// Note [One stream per pair] (dist/p2p_order.h): NCCL runs a pair's sends and receives on one
// stream in posting order, and Gloo does not, so a protocol whose neighbours both send first works
// here and hangs on GPUs. The runtime gathered the timeline step's posted order of every rank and
// checked it (results.json's pp.p2p_order); the 1F1B runs are judged, where the steady state
// has neighbours that each send and receive, and 2 pipelines x 2 stages adds the tied gradient's
// exchange between the first and the last stage.
Verdict order(Runner& runner, const std::string& e) {
  std::string summary;
  for (const PpRun& p : pp_runs()) {
    if (p.schedule != "1f1b") continue;
    const Run& run = run_of(runner, e, p);
    if (run.failure) return *run.failure;
    if (auto wrong = not_causal(run.results, p.label)) return *wrong;
    const nlohmann::json* o = nullptr;
    if (run.results.contains("pp") && run.results.at("pp").contains("p2p_order")) {
      o = &run.results.at("pp").at("p2p_order");
    }
    if (!o || !o->contains("problem")) {
      return {Status::kError, fmt::format("{}: results.json has no pp.p2p_order", p.label)};
    }
    const std::string problem = o->at("problem").get<std::string>();
    if (!problem.empty()) {
      return {Status::kWrongNumber,
              fmt::format("{}, step {}: {}. Gloo ran it; NCCL would not. After a backward whose next action is a "
                          "forward, post that forward's receive (recv_async) before sending the gradient back",
                          p.label, o->value("step", 0), problem)};
    }
    summary += fmt::format("\n  {}: every pair's sends and receives of step {} in an order NCCL pairs", p.label,
                           o->value("step", 0));
  }
  return {Status::kPassed, fmt::format("{}: {}", e, summary)};
}

// Step 1's gradients, once final (the tied embedding's summed, averaged over the pipelines), equal
// one process's on the same global batch: each stage rank dumps its stage's (train/rank_dump.h),
// and together the ranks of every pipeline must hold every gradient of dtlab-gpt2's dump.
Verdict gradients(Runner& runner, const std::string& e) {
  Verdict failure;
  const Run* ref = kit_run(runner, {"reference-gpt2-pp-step1", kReferenceGpt2, "pp-reference", 1,
                                    equivalence_flags(1), true}, &failure);
  if (!ref) return failure;
  const io::TensorMap full = load_dumps(ref->dump_dir, 1).at(0);
  std::string summary;
  for (const PpRun& p : pp_runs()) {
    if (p.schedule != "gpipe" && !p.data_parallel) continue;  // GPipe and data x pipeline
    const Run& run = runner.run({e + "-gradients-" + p.id, e, "pp-gradients", p.world, grid_flags(p, 1), true});
    if (run.failure) return *run.failure;
    const std::vector<io::TensorMap> dumps = load_dumps(run.dump_dir, p.world);
    double worst = 0, scale = 0;
    std::string worst_name;
    for (int pipe = 0; pipe < p.world / p.stages; ++pipe) {
      std::set<std::string> held;
      for (int s = 0; s < p.stages; ++s) {
        const int rank = pipe * p.stages + s;
        const io::TensorMap& mine = dumps.at(static_cast<size_t>(rank));
        io::TensorMap want;  // one process's gradients of the tensors this stage rank holds
        for (const auto& [name, g] : mine) {
          if (name.rfind("grad.", 0) == 0 && full.count(name)) want.emplace(name, full.at(name));
        }
        const Difference d = compare_tensors(mine, want, "grad.");
        if (!d.missing.empty()) {
          return {Status::kWrongNumber, fmt::format("{}: stage rank {}'s gradient of {} has another shape than one "
                                                    "process's", p.label, rank, d.missing)};
        }
        for (const auto& [name, g] : want) held.insert(name);
        scale = std::max(scale, d.scale);
        if (d.max_abs > worst) {
          worst = d.max_abs;
          worst_name = fmt::format("stage rank {}'s {}", rank, d.worst);
        }
      }
      for (const auto& [name, g] : full) {
        if (name.rfind("grad.", 0) == 0 && !held.count(name)) {
          return {Status::kWrongNumber, fmt::format("{}: after step 1's backward no stage rank of pipeline {} holds a "
                                                    "gradient of {}: does every micro-batch's backward reach every "
                                                    "stage?", p.label, pipe, name.substr(5))};
        }
      }
    }
    const double relative = scale > 0 ? worst / scale : worst;
    if (relative > kStepGradientTolerance) {
      return {Status::kWrongNumber,
              fmt::format("{}: step 1's gradient differs from one process's on the same batch: {} by {:.3g} (relative "
                          "{:.2g}, more than {:g}). Does each backward receive the gradient of its own micro-batch's "
                          "output, and send back the gradient of its input (what step.backward returns)?", p.label,
                          worst_name, worst, relative, kStepGradientTolerance)};
    }
    summary += fmt::format("\n  {}: largest difference {:.2g} (relative {:.2g})", p.label, worst, relative);
  }
  return {Status::kPassed, fmt::format("{}: every stage rank's step-1 gradients equal one process's:{}", e, summary)};
}

// GPipe and 1F1B on 2 stage ranks at 1, 2, 4 and 8 micro-batches: time per step, the bubble
// measured on the ranks' timelines, the stored activations. The report draws them (figures 10
// and 11); nothing here is judged against a speed.
Verdict timing(Runner& runner, const std::string& e) {
  const int iterations = runner.options().timing_iterations;
  std::string summary;
  for (const char* schedule : {"gpipe", "1f1b"}) {
    for (int m : kTimingMicroBatches) {
      const std::vector<std::string> flags = {"--batch_size", std::to_string(kTimingBatch), "--max_steps", std::to_string(iterations),
                                              "--no_eval", "--stages", "2", "--micro_batches", std::to_string(m),
                                              "--schedule", schedule};
      const RunRequest request{fmt::format("{}-timing-{}-m{}", e, schedule, m), e, "pp-timing", 2, flags, false};
      const Run& run = runner.run(request);
      if (run.failure) return *run.failure;
      if (auto wrong = incomplete_timing(run, request, iterations)) return *wrong;
      // Times of ranks that never talked are no pipeline's (Note [A pipeline's causality]).
      const std::string label = fmt::format("{} on 2 stage ranks x {} micro-batch{}", schedule, m, m == 1 ? "" : "es");
      if (auto wrong = not_causal(run.results, label)) {
        return *wrong;
      }
      const auto& t = run.results.at("timing");
      const auto& p = run.results.value("pp", nlohmann::json::object());
      summary += fmt::format("\n  {} m={}: {:.1f} ms/step, bubble {:.2f} (GPipe's (n-1)/(m+n-1) = {:.2f}), peak "
                             "micro-batches stored per stage rank [{}], held [{}], bytes held [{}]", schedule, m,
                             1e3 * t.value("mean_seconds", 0.0),
                             p.value("timeline", nlohmann::json::object()).value("bubble_fraction", 0.0),
                             pipeline::ideal_bubble_fraction(m, 2),
                             fmt::join(p.value("peak_stored_micro_batches", std::vector<int>{}), ", "),
                             fmt::join(p.value("peak_held_micro_batches", std::vector<int>{}), ", "),
                             fmt::join(p.value("peak_activation_bytes", std::vector<int64_t>{}), ", "));
    }
  }
  return {Status::kPassed, fmt::format("{}: {} iterations per run (first discarded; GPT-2 fixture, batch {}, 2 stage "
                                       "ranks sharing this machine's cores):{}", e, iterations, kTimingBatch, summary)};
}

}  // namespace pp_check

std::vector<CheckSpec> pp_checks(const std::string& e) {
  namespace c = pp_check;
  std::vector<CheckSpec> checks = {
      {e, "schedules", "both schedules for every n, m in 1..8: complete, deadlock-free, GPipe fills then drains, 1F1B "
                       "stores min(n - stage, m)", 4, [e](Runner& r) { return c::schedules(r, e); }},
  };
  for (const c::PpRun& p : c::pp_runs()) {
    checks.push_back({e, "losses-" + p.id,
                      fmt::format("20 losses of {} equal single-process training within 1e-5", p.label), 3,
                      [e, p](Runner& r) { return c::losses(r, e, p); }});
  }
  checks.push_back({e, "memory", "the stage ranks, talking as a pipeline, stored and held what their schedule implies: "
                                 "GPipe m, 1F1B min(n - stage, m)",
                    2, [e](Runner& r) { return c::memory(r, e); }});
  checks.push_back({e, "order", "1F1B's sends and receives, and the tied gradient's, posted in an order NCCL can pair "
                                "(on each pair the earlier stage sends first, the later receives first)", 1,
                    [e](Runner& r) { return c::order(r, e); }});
  checks.push_back({e, "gradients", "step 1's gradients of GPipe and of 2 x 2 stage ranks equal one process's within "
                                    "1e-5", 2, [e](Runner& r) { return c::gradients(r, e); }});
  checks.push_back({e, "overlap", "the stage ranks compute at the same time: on one GPipe step's timeline (each action "
                                  "also sleeping 20 ms, each after its input was sent) their busy times add up to more "
                                  "than 1.5 x the step", 2,
                    [e](Runner& r) { return c::overlap(r, e); }});
  checks.push_back({e, "timing", "times GPipe and 1F1B on 2 stage ranks at 1, 2, 4, 8 micro-batches, each run a "
                                 "pipeline (every action after its input was sent)", 1,
                    [e](Runner& r) { return c::timing(r, e); }});
  return checks;
}

}  // namespace dtlab::grader
