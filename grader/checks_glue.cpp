// The checks of the GLUE exercises: task 1 against the kit's single-process run; task 2a, 2b
// and 3 against it and against DistributedSampler's and DDP's properties.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <torch/types.h>

#include "checks.h"
#include "compare.h"
#include "dtlab/core/error.h"

namespace dtlab::grader {
namespace {

constexpr int kGlobalBatch = 32;
constexpr int kLossSteps = 20;
constexpr int64_t kTrainExamples = 2490;  // the fixture's train.tsv (dtlab-fixtures)

// Dropout off and the same seed: single-process and data-parallel training must then take the
// same steps. A learning rate at which the fixture learns, so a wrong update shows in the loss,
// and a clipping norm below the fixture's gradient norms (about 0.36 for the whole batch at
// step 1), so clipping is active and clipping at the wrong moment shows too.
constexpr const char* kMaxGradNorm = "0.1";

std::vector<std::string> equivalence_flags(const std::string& exercise, int steps) {
  std::vector<std::string> f = {"--max_seq_length", "64", "--dropout", "0", "--learning_rate", "3e-4",
                                "--max_grad_norm", kMaxGradNorm, "--max_steps", std::to_string(steps)};
  const bool single = single_process(exercise);
  f.insert(f.end(), {single ? "--per_gpu_train_batch_size" : "--global_batch_size", std::to_string(kGlobalBatch)});
  return f;
}

// Note [A run as long as its checks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A run that several checks read trains as many steps as the longest reader this grading runs.
// The 4-rank losses run serves the sampler (the shards, dumped before step 1), the gradients
// (step 1's dumps) and losses-4 (20 losses); the single-process reference serves task 1's
// pretrained (step 1's loss) and steps (20 losses) and the broadcast (the weights before step 1).
// A full grading trains each 20 steps, as before. `--only sampler,gradients` (a student's quick
// question, and most mutant and fair gradings in the tests) trains one: the same dumps of the same
// step 1, since nothing before step 1's backward depends on how many steps follow (the learning
// rate schedule acts only at the optimiser's step). What such a grading no longer sees is a run
// that fails after step 1, which only the checks that read later steps are about.
// GPT-2's exercises do the same with the losses runs their counting checks read (the mesh's sends,
// traffic and memory; ZeRO's traffic; TP's memory and traffic): 20 steps where their losses are
// compared in this grading, else 3 (shared_run_steps in checks.h). Those checks read means over
// the steps and peaks of steps 2 on, the same at 3 steps as at 20, and a mistake made in every step
// weighs more in a mean over 3.
int losses_steps(const Runner& runner, int world) {
  return runner.grades(world == 1 ? "steps" : fmt::format("losses-{}", world)) ? kLossSteps : 1;
}

RunRequest reference_request(const Runner& runner) {
  return {"reference-w1", "reference", "reference", 1, equivalence_flags("reference", losses_steps(runner, 1)), true};
}

RunRequest losses_request(const Runner& runner, const std::string& exercise, int world) {
  // The kit's step writes the rank dumps; task 1 brings its own step, so it has none.
  // The report's loss figure plots one run per variant: the 4-rank ones (and task 1's).
  return {fmt::format("{}-losses-w{}", exercise, world), exercise, world == 2 ? "equivalence" : "losses", world,
          equivalence_flags(exercise, losses_steps(runner, world)), !single_process(exercise)};
}

const Run* reference(Runner& runner, Verdict* failure) { return kit_run(runner, reference_request(runner), failure); }

// The kit's single-process run on the examples a data-parallel run's ranks read (union_order,
// Note [Fair evidence]): a sampler mistake costs the sampler check, not the gradient and loss
// checks. The run's own failure first: its dumps are read only when it finished.
const Run* reference_of(Runner& runner, const Run& run, int world, Verdict* failure) {
  if (run.failure) {
    *failure = *run.failure;
    return nullptr;
  }
  const std::optional<ReadExamples> read = read_examples(run, world, failure);
  if (!read) return nullptr;
  const int steps = losses_steps(runner, world);
  const std::optional<TrainOrder> order = union_order(runner, *read, steps, failure);
  if (!order) return nullptr;
  std::vector<std::string> flags = equivalence_flags("reference", steps);
  flags.back() = std::to_string(order->global_batch);  // --per_gpu_train_batch_size
  flags.insert(flags.end(), {"--train_order", order->path.string()});
  return kit_run(runner, {"reference-" + order->key, "reference", "reference", 1, flags, true}, failure);
}

// ---- fine-tuning (task 1) ----------------------------------------------------------------------------

Verdict finetune_pretrained(Runner& runner, const std::string& e) {
  Verdict failure;
  const Run* ref = reference(runner, &failure);
  if (!ref) return failure;
  const Run& run = runner.run(losses_request(runner, e, 1));
  if (run.failure) return *run.failure;
  return losses_match(run, *ref, 1, e,
                      "Before any update the loss depends only on the weights: load_model must load "
                      "the checkpoint's weights (model::from_pretrained with the overrides).",
                      "");
}

Verdict finetune_steps(Runner& runner, const std::string& e) {
  Verdict failure;
  const Run* ref = reference(runner, &failure);
  if (!ref) return failure;
  const Run& run = runner.run(losses_request(runner, e, 1));
  if (run.failure) return *run.failure;
  return losses_match(run, *ref, kLossSteps, e,
                      "Step 1 already differs: fix load_model first (see the check of the pretrained weights).",
                      "Step 1 agrees, so the update differs: train_step must do forward, backward, clip to "
                      "max_grad_norm, optimizer step, schedule step and zero the gradients, in that order.");
}

Verdict finetune_learns(Runner& runner, const std::string& e) {
  const RunRequest request{e + "-learns", e, "learning", 1,
                           {"--max_seq_length", "32", "--learning_rate", "6e-4", "--num_train_epochs", "2",
                            "--per_gpu_train_batch_size", "32", "--do_eval"}, false};
  const Run& run = runner.run(request);
  if (run.failure) return *run.failure;
  const auto& epochs = run.results.at("epochs");
  if (epochs.size() != 2) {
    return {Status::kWrongNumber, fmt::format("{}: 2 epochs asked, results.json has {}", e, epochs.size())};
  }
  for (const auto& epoch : epochs) {
    if (epoch.value("eval_accuracy", nlohmann::json()).is_null()) {
      return {Status::kWrongNumber, fmt::format("{}: epoch {} has no evaluation: after_epoch must evaluate "
                                                "(state.evaluate()) and return its result", e, epoch.value("epoch", 0))};
    }
  }
  const double accuracy = epochs.back().at("eval_accuracy").get<double>();
  constexpr double kWant = 0.8;  // measured: 0.708, then 0.935 after 2 epochs
  if (accuracy < kWant) {
    return {Status::kWrongNumber,
            fmt::format("{}: dev accuracy after 2 epochs is {:.3f}, below {:g}: the fixture is learnable at "
                        "this learning rate, so the model does not learn (is every step applied?)", e, accuracy, kWant)};
  }
  return {Status::kPassed, fmt::format("{}: evaluated after each of 2 epochs; dev accuracy {:.3f}, {:.3f}", e,
                                       epochs[0].at("eval_accuracy").get<double>(), accuracy)};
}

// ---- task 2a, 2b, 3 -------------------------------------------------------------------------

Verdict losses_at(Runner& runner, const std::string& exercise, int world) {
  Verdict failure;
  const Run& run = runner.run(losses_request(runner, exercise, world));
  const Run* ref = reference_of(runner, run, world, &failure);
  if (!ref) return failure;
  return losses_match(run, *ref, kLossSteps, describe(losses_request(runner, exercise, world)),
                      "Step 1 already differs, before any update: do all ranks start from the same weights, "
                      "and is the loss of a step the average over the ranks?",
                      "Step 1 agrees, so the update differs: are the gradients averaged over all ranks "
                      "(summed, then divided by the world size), every gradient, every step?");
}

Verdict sampler_shards(Runner& runner, const std::string& exercise) {
  constexpr int kWorld = 4;
  const Run& run = runner.run(losses_request(runner, exercise, kWorld));
  Verdict failure;
  const auto start = start_dumps(run, kWorld, &failure);  // Note [Fair evidence]
  if (!start) return failure;
  const auto& dumps = *start;
  const int64_t per_rank = (kTrainExamples + kWorld - 1) / kWorld;  // DistributedSampler pads
  std::map<int64_t, std::vector<int>> readers;
  for (int r = 0; r < kWorld; ++r) {
    const torch::Tensor shard = dumps[r].at("shard");
    if (shard.numel() != per_rank) {
      return {Status::kWrongNumber,
              fmt::format("{} at 4 ranks: rank {} reads {} examples in an epoch; a DistributedSampler over {} examples "
                          "gives every rank ceil({} / 4) = {} (make_sampler: the group's size and this rank)",
                          exercise, r, shard.numel(), kTrainExamples, kTrainExamples, per_rank)};
    }
    const auto* p = shard.data_ptr<int64_t>();
    for (int64_t i = 0; i < shard.numel(); ++i) {
      if (p[i] < 0 || p[i] >= kTrainExamples) {
        return {Status::kWrongNumber, fmt::format("{}: rank {} reads example {}, outside 0..{}", exercise, r, p[i],
                                                  kTrainExamples - 1)};
      }
      readers[p[i]].push_back(r);
    }
    const int64_t batch = dumps[r].at("batch").numel();
    if (batch != kGlobalBatch / kWorld) {
      return {Status::kWrongNumber, fmt::format("{}: rank {}'s minibatch has {} examples; global batch {} / 4 ranks = {}",
                                                exercise, r, batch, kGlobalBatch, kGlobalBatch / kWorld)};
    }
  }
  std::vector<int64_t> unread, shared;
  for (int64_t i = 0; i < kTrainExamples; ++i) {
    const auto it = readers.find(i);
    if (it == readers.end()) unread.push_back(i);
    else if (std::set<int>(it->second.begin(), it->second.end()).size() > 1) shared.push_back(i);
  }
  // Padding: the sampler repeats the first (per_rank * world - N) positions of its permutation.
  const int64_t padding = per_rank * kWorld - kTrainExamples;
  // Both mistakes at once are common (each rank shuffling its own way): say both.
  std::string wrong;
  if (!unread.empty()) {
    wrong += fmt::format("{} of {} examples are read by no rank in epoch 1 (examples {}): the shards must cover "
                         "the data set", unread.size(), kTrainExamples, first_items(unread));
  }
  if (static_cast<int64_t>(shared.size()) > padding) {
    const auto& who = readers.at(shared.front());
    wrong += fmt::format("{}{} examples are read by more than one rank (example {} by ranks {} and {}); shards must "
                         "be disjoint (only the {} padding repeats are allowed)", wrong.empty() ? "" : "; and ",
                         shared.size(), shared.front(), who[0], who[1], padding);
  }
  if (!wrong.empty()) {
    return {Status::kWrongNumber,
            fmt::format("{} at 4 ranks: {}. make_sampler: num_replicas = the world size, rank = this rank, the same "
                        "seed on every rank", exercise, wrong)};
  }
  return {Status::kPassed, fmt::format("{} at 4 ranks: 4 disjoint shards of {} cover all {} examples ({} padding "
                                       "repeats); {} examples per rank per step", exercise, per_rank,
                                       kTrainExamples, padding, kGlobalBatch / kWorld)};
}

Verdict gradients(Runner& runner, const std::string& exercise) {
  constexpr int kWorld = 4;
  Verdict failure;
  const Run& run = runner.run(losses_request(runner, exercise, kWorld));
  const Run* ref = reference_of(runner, run, kWorld, &failure);
  if (!ref) return failure;
  const auto dumps = load_dumps(run.dump_dir, kWorld);
  const auto full = load_dumps(ref->dump_dir, 1).at(0);
  for (int r = 1; r < kWorld; ++r) {
    const Difference d = compare_tensors(dumps[r], dumps[0], "grad.");
    if (!d.missing.empty()) {
      return {Status::kWrongNumber, fmt::format("{}: after synchronisation rank {} has no gradient for {} (rank 0 has)",
                                                exercise, r, d.missing)};
    }
    if (d.relative() > 1e-6) {
      return {Status::kWrongNumber,
              fmt::format("{} at 4 ranks: after synchronisation rank {}'s gradient of {} differs from rank 0's by "
                          "{:.3g} (relative {:.2g}): every rank must end with the same averaged gradient",
                          exercise, r, d.worst, d.max_abs, d.relative())};
    }
  }
  const Difference d = compare_tensors(dumps[0], full, "grad.");
  if (!d.missing.empty()) {
    return {Status::kWrongNumber, fmt::format("{}: rank 0 has no gradient for {} after synchronisation", exercise, d.missing)};
  }
  if (d.relative() <= kGradientTolerance) {
    return {Status::kPassed, fmt::format("{} at 4 ranks: every rank holds the same gradient, equal to the full-batch "
                                         "gradient of one process (max |diff| {:.2g}, relative {:.2g})",
                                         exercise, d.max_abs, d.relative())};
  }
  std::string hint = scale_hint(dumps[0], full, kWorld, "the full-batch gradient");
  // Note [What each tolerance must catch] (checks.h): rounding shows as an error proportional to
  // each element, within fp16's 2^-11 (and the average's own rounding) of every one.
  if (hint.empty() && within_own_size(dumps[0], full, "grad.", 1.0 / 1024, 1e-7)) {
    hint = "Every element is within 0.1% of its own value, as rounding makes: is the gradient sent in a shorter "
           "float (fp16 or bf16) and converted back? The sum must be exact to float32's precision.";
  }
  if (hint.empty()) {
    hint = "Are they averaged over all ranks, and only after synchronisation clipped (clipping is the kit's, "
           "after sync_gradients)?";
  }
  return {Status::kWrongNumber,
          fmt::format("{} at 4 ranks: after synchronisation the gradient of {} differs from the full-batch gradient "
                      "computed in one process by {:.3g} (relative {:.2g} > {:g}). {}",
                      exercise, d.worst, d.max_abs, d.relative(), kGradientTolerance, hint)};
}

Verdict initial_broadcast(Runner& runner, const std::string& exercise) {
  constexpr int kWorld = 2;
  Verdict failure;
  const Run* ref = reference(runner, &failure);
  if (!ref) return failure;
  std::vector<std::string> flags = equivalence_flags(exercise, 1);
  flags.push_back("--init_seed_per_rank");
  const Run& run = runner.run({exercise + "-broadcast-w2", exercise, "broadcast", kWorld, flags, true});
  const auto start = start_dumps(run, kWorld, &failure);  // Note [Fair evidence]
  if (!start) return failure;
  const auto& dumps = *start;
  const auto initial = load_dumps(ref->dump_dir, 1).at(0);
  const std::string where = grader::exercise(exercise).kind == "ddp" ? "wrap_model (DistributedDataParallel broadcasts when it wraps)"
                                                : "broadcast_parameters";
  const Difference d = compare_tensors(dumps[1], dumps[0], "param.");
  if (!d.missing.empty() || d.max_abs > 0) {
    return {Status::kWrongNumber,
            fmt::format("{} at 2 ranks with --init_seed_per_rank: at step 1 rank 1's {} differs from rank 0's by {:.3g}: "
                        "every rank must start from rank 0's weights; copy them in {}",
                        exercise, d.missing.empty() ? d.worst : d.missing, d.max_abs, where)};
  }
  const Difference r0 = compare_tensors(dumps[0], initial, "param.");
  if (!r0.missing.empty() || r0.max_abs > 0) {
    return {Status::kWrongNumber,
            fmt::format("{}: the ranks agree at step 1 but not with rank 0's initial weights ({} differs by {:.3g}): "
                        "broadcast from rank 0, not from another rank", exercise, r0.worst, r0.max_abs)};
  }
  return {Status::kPassed, fmt::format("{} at 2 ranks with different initial weights per rank: both start from rank "
                                       "0's weights", exercise)};
}

Verdict timing(Runner& runner, const std::string& exercise) {
  const int iterations = runner.options().timing_iterations;
  std::string summary;
  for (int world : {1, 2, 4}) {
    const RunRequest request{fmt::format("{}-timing-w{}", exercise, world), exercise, "timing", world,
                             {"--max_seq_length", "128", "--global_batch_size", std::to_string(kGlobalBatch),
                              "--max_steps", std::to_string(iterations)}, false};
    const Run& run = runner.run(request);
    if (run.failure) return *run.failure;
    if (auto wrong = incomplete_timing(run, request, iterations)) return *wrong;
    const auto& t = run.results.at("timing");
    summary += fmt::format("\n  {} rank{}: {:.1f} ms/iter (stdev {:.1f}), {:.1f} ms waiting for gradients, {:.0f} tokens/s",
                           world, world == 1 ? " " : "s", 1e3 * t.value("mean_seconds", 0.0),
                           1e3 * t.value("stdev_seconds", 0.0), 1e3 * t.value("mean_comm_seconds", 0.0),
                           t.value("tokens_per_second", 0.0));
  }
  return {Status::kPassed, fmt::format("{}: {} iterations at 1, 2 and 4 ranks (first discarded; seq 128, global "
                                       "batch {}; all ranks on this machine):{}", exercise, iterations, kGlobalBatch, summary)};
}

// The bucket cap changes when gradients are reduced, not what: the losses must be identical.
Verdict bucket_sweep(Runner& runner, const std::string& exercise) {
  const int iterations = runner.options().timing_iterations;
  std::string summary;
  std::vector<double> first_losses;
  size_t previous_buckets = 0;
  for (const char* cap : {"0.1", "0.25", "1", "5", "25"}) {
    std::vector<std::string> flags = equivalence_flags(exercise, iterations);
    flags.insert(flags.end(), {"--bucket_cap_mb", cap});
    const RunRequest request{fmt::format("{}-bucket-cap{}-w2", exercise, cap), exercise, "bucket-sweep", 2, flags, false};
    const Run& run = runner.run(request);
    if (run.failure) return *run.failure;
    const size_t buckets = run.results.at("communication").value("ddp_buckets", nlohmann::json::array()).size();
    if (previous_buckets && buckets > previous_buckets) {
      return {Status::kWrongNumber, fmt::format("{}: a larger bucket cap ({} MB) gave more buckets ({} > {})", exercise, cap,
                                                buckets, previous_buckets)};
    }
    previous_buckets = buckets;
    const std::vector<double> losses = iteration_losses(run.results);
    if (first_losses.empty()) first_losses = losses;
    const LossDifference d = compare_losses(losses, first_losses, losses.size(), 0.0);
    if (d.first_step > 0) {
      return {Status::kWrongNumber, fmt::format("{}: with a {} MB bucket cap the loss of step {} differs from the "
                                                "smallest cap's by {:.3g}; buckets must not change the result", exercise, cap,
                                                d.first_step, d.max_abs)};
    }
    const auto& t = run.results.at("timing");
    summary += fmt::format("\n  cap {:>4} MB: {:>2} bucket(s), {:.1f} ms/iter, {:.1f} ms waiting", cap, buckets,
                           1e3 * t.value("mean_seconds", 0.0), 1e3 * t.value("mean_comm_seconds", 0.0));
  }
  return {Status::kPassed, fmt::format("{} at 2 ranks: the same losses for every bucket cap:{}", exercise, summary)};
}

}  // namespace

std::vector<CheckSpec> finetune_checks(const std::string& e) {
  return {
      {e, "pretrained", "loads the pretrained weights: the loss before any update equals the kit's", 4,
       [e](Runner& r) { return finetune_pretrained(r, e); }},
      {e, "steps", "every step equals the kit's single-process step (20 steps, dropout 0)", 4,
       [e](Runner& r) { return finetune_steps(r, e); }},
      {e, "learns", "evaluates after every epoch and learns the fixture (dev accuracy >= 0.8 after 2 epochs)",
       4, [e](Runner& r) { return finetune_learns(r, e); }},
  };
}

std::vector<CheckSpec> data_parallel_checks(const std::string& e, bool ddp) {
  std::vector<CheckSpec> checks = {
      {e, "sampler", "data shards are disjoint and cover the data set; per-rank batch = global / world (4 ranks)", 3,
       [e](Runner& r) { return sampler_shards(r, e); }},
      {e, "broadcast", "every rank starts from rank 0's weights, even when ranks draw different ones (2 ranks)", 3,
       [e](Runner& r) { return initial_broadcast(r, e); }},
      {e, "gradients", "after synchronisation every rank holds the full-batch gradient of one process (4 ranks)", 4,
       [e](Runner& r) { return gradients(r, e); }},
      {e, "losses-2", "per-iteration losses equal single-process training within 1e-5 (2 ranks)", 3,
       [e](Runner& r) { return losses_at(r, e, 2); }},
      {e, "losses-4", "per-iteration losses equal single-process training within 1e-5 (4 ranks)", 3,
       [e](Runner& r) { return losses_at(r, e, 4); }},
      {e, "timing", "times --timing-iterations (default 40; the first discarded) at 1, 2 and 4 ranks", 2,
       [e](Runner& r) { return timing(r, e); }},
  };
  if (ddp) {
    checks.push_back({e, "buckets", "the DDP bucket cap changes the buckets, never the losses (2 ranks)", 2,
                      [e](Runner& r) { return bucket_sweep(r, e); }});
  }
  return checks;
}

}  // namespace dtlab::grader
