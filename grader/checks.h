// The checks of every exercise: docs/DESIGN.md's "Numbers that must hold", each run at the world
// sizes it needs and scored. A check compares against properties and against the kit's own
// single-process run (dtlab-reference), never against stored reference outputs, so a student
// release without solutions/ grades itself the same way.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/io/safetensors.h"
#include "exercises.h"
#include "outcome.h"
#include "runs.h"

namespace dtlab::grader {

struct CheckSpec {
  std::string exercise;  // "task2b"
  std::string id;        // "gradients"
  std::string title;     // what must hold, as the student reads it
  double points = 1;
  std::function<Verdict(Runner&)> run;
  std::string name() const { return exercise + "/" + id; }
};

struct CheckOutcome {
  const CheckSpec* spec = nullptr;
  Verdict verdict;
  double seconds = 0;
  double score() const { return verdict.status == Status::kPassed ? spec->points : 0.0; }
};

// Every check, in order; checks_of one exercise.
const std::vector<CheckSpec>& all_checks();
std::vector<const CheckSpec*> checks_of(const std::string& exercise);

// Runs one check; whatever the ranks do, it returns a verdict (an exception of the grader
// itself becomes an error verdict that says so).
CheckOutcome run_check(const CheckSpec& check, Runner& runner);

// The checks of each kind of exercise (exercises.txt's kind column), defined next to the runs
// they read: finetune (task 1), sync and ddp (2a, 2b; 3 adds the bucket-cap sweep), traffic (4),
// dp, pipeline and pp (the GPT-2 exercises).
std::vector<CheckSpec> checks_of_kind(const Exercise& exercise);
std::vector<CheckSpec> finetune_checks(const std::string& exercise);
std::vector<CheckSpec> data_parallel_checks(const std::string& exercise, bool ddp);
std::vector<CheckSpec> traffic_checks(const std::string& exercise);
std::vector<CheckSpec> lm_data_parallel_checks(const std::string& exercise);
std::vector<CheckSpec> pipeline_checks(const std::string& exercise);
std::vector<CheckSpec> pp_checks(const std::string& exercise);
std::vector<CheckSpec> zero_checks(const std::string& exercise);
std::vector<CheckSpec> tp_checks(const std::string& exercise);
std::vector<CheckSpec> cp_checks(const std::string& exercise);
std::vector<CheckSpec> precision_checks(const std::string& exercise);
std::vector<CheckSpec> mesh_checks(const std::string& exercise);

// Note [Fair evidence]: one run serves several checks, and a check must fail for its own reason.
// A check of what each rank reads (the sampler, dp's partition) or starts from (the initial
// broadcast) grades the files the ranks write before step 1 (train/rank_dump.h), so a run whose
// synchronisation breaks later fails the synchronisation's checks (gradients, losses), not these.
// Only when those files are missing does the run's failure become such a check's verdict.
//
// Shared by the checks of every kind:
// the rank<r>.start dumps of a run, or nullptr and the verdict to give (the run's failure);
// the kit's own run (a reference), or nullptr and a verdict that says the kit, not the student,
// failed;
const Run* kit_run(Runner& runner, const RunRequest& request, Verdict* failure);
std::optional<std::vector<io::TensorMap>> start_dumps(const Run& run, int world, Verdict* failure);
// What each rank read, from its start dump: its part of the data set in reading order ("shard")
// and its examples per step ("batch"); nullopt and the verdict when the dumps are missing.
struct ReadExamples {
  std::vector<std::vector<int64_t>> shards;
  std::vector<int64_t> batches;
};
std::optional<ReadExamples> read_examples(const Run& run, int world, Verdict* failure);
// The order in which one process reads what the ranks read in `steps` steps: step s takes
// examples s*b_r .. (s+1)*b_r of every rank r's part, rank by rank. The kit's single-process run
// reads it with --train_order, so the gradient and loss checks compare a submission with
// training on the examples its ranks read, not on those they should have read (the sampler or
// partition check grades that): a mistake in what is read costs that check alone. Written to
// RESULTS/orders/<key>.json, the key naming its content (runs that read the same share one
// reference); nullopt and the verdict when a part is too short for the steps.
struct TrainOrder {
  std::filesystem::path path;
  std::string key;
  int64_t global_batch = 0;
};
std::optional<TrainOrder> union_order(const Runner& runner, const ReadExamples& read, int steps, Verdict* failure);
// Step 1's gradients: the dumps of `run`'s `world` ranks and the kit's single-process dump of one
// step on the examples they read (gpt2_reference_request); nullopt and the verdict when the run,
// its dumps or the reference failed.
struct StepOneDumps {
  std::vector<io::TensorMap> ranks;
  io::TensorMap full;
};
std::optional<StepOneDumps> gpt2_step_one_dumps(Runner& runner, const Run& run, int world, Verdict* failure);
// The kit's single-process GPT-2 run (lm_equivalence_flags) on the examples the ranks read in
// `steps` steps (union_order): what dp's and zero's gradients and losses are compared with.
std::optional<RunRequest> gpt2_reference_request(Runner& runner, const ReadExamples& read, int steps,
                                                 Verdict* failure);
// the per-iteration losses of `run` against the reference's over the first n steps, within
// kLossTolerance; the hints say what to look at when step 1 differs and when a later one does.
Verdict losses_match(const Run& run, const Run& ref, size_t n, const std::string& what,
                     const std::string& hint_first, const std::string& hint_later);

// A verdict when a timing run's results.json does not summarise the iterations it ran (the first
// discarded) or counts no tokens; nullopt when it does.
std::optional<Verdict> incomplete_timing(const Run& run, const RunRequest& request, int iterations);
// "2542, 430, 846, 4406, 2154, ...": the first n of a list, for messages.
std::string first_items(const std::vector<int64_t>& values, size_t n = 5);

// The flags of a GPT-2 run that must take the same steps as the kit's single-process run (dp and
// pipeline, both sides): dropout off; a learning rate at which the tiny GPT-2 learns the fixture;
// a clipping norm (0.5) below its gradient norms, so clipping is active and clipping at the wrong
// moment shows; `steps` steps; no evaluation.
std::vector<std::string> lm_equivalence_flags(int steps);

// Note [A run as long as its checks] (checks_glue.cpp), for GPT-2's losses runs that other checks
// also read (the mesh's sends, traffic and memory; ZeRO's and TP's traffic and memory): such a run
// trains `loss_steps` when this grading runs one of `full_readers` (the checks that compare its
// losses, or that need its length, as TP's replicas do), else kCountedSteps. Those other checks read
// what the kit counts a step (its totals divided by the steps it trained) and what a step held at
// its peak; every step of these runs does the same work, so three steps show what twenty do. Three,
// not fewer: the kit keeps the timeline of step 3 (pipeline/stage_ranks.cpp's kTimelineStep), after
// the first steps' allocations, and TP's largest tensor is counted from step 2 on.
constexpr int kCountedSteps = 3;
int shared_run_steps(const Runner& runner, const std::vector<std::string>& full_readers, int loss_steps);

// When the ranks' gradient `got` is the reference's `want` times the world size or its inverse,
// uniformly (every element, compare.h's scaled_residual under 1%), the usual cause; else "": a
// gradient that differs in other ways (pieces in the wrong places, some parameters not averaged)
// is not told it was scaled because its projection happens to come out near 1/N (Note [A hint
// the evidence singles out]).
std::string scale_hint(const io::TensorMap& got, const io::TensorMap& want, int world, const std::string& reference);

// Tolerances, stated once: the grader's messages and the handouts quote them.
//
// Note [What each tolerance must catch]: a tolerance lies between what a right submission shows
// and the smallest mistake it must catch, each measured with a mutant. kGradientTolerance: right
// runs agree within about 3e-7 relative (task 2b, zero and tp's gradients checks print theirs);
// the smallest mistake is a gradient rounded to fp16 for the wire and back (task 2b's mutant
// half_precision_wire: 1.8e-4 at 4 ranks, about 2^-11 of its largest element), caught with a
// margin of 1.8. kLossTolerance is no finer net: the same fp16 wire agrees in 20 losses within 3e-7
// (AdamW's normalised step and the clip hide a rounding of the gradient), so a mistake in the
// gradients is the gradients check's to catch; the losses check catches what changes an update
// (a gradient left out, a rank's update lost) and the loss itself, each far above 1e-5. Bytes the
// kit counts from its log of payloads are exact, and zero's and tp's traffic checks allow no
// difference (Note [The traffic's tolerance] in checks_zero.cpp, Note [The tensor group's
// tolerance] in checks_tp.cpp: their smallest mistakes, 0.02% and 0.08% of a step's bytes, have
// mutants). tp's replicas (Note [The replicas' tolerance]) and the pipeline's Pipe against the
// model (Note [The Pipe's tolerance]) say theirs, each with a mutant. Task 4's kTrafficLow/High
// bound what the network interface counts, headers and retransmissions included, against the
// student's formula: a right run measures 1.0035 at every batch (the TCP/IP headers on
// loopback), so the band cannot be finer than the wire's overhead and the noise of a shared
// interface. It is not the net for the student's arithmetic, which the model check compares
// exactly (an iteration left out, 2.6% at batch 64, fails there); the band's smallest mistake is
// one of the formula's factors, the ring's (n - 1) / n left out: 0.75 of what the model expects
// at 4 ranks (mutant whole_tensor_twice). The ranks' gradients against rank 0's after the average
// (1e-6 relative, task 2's and dp's gradients checks): right runs are equal bit for bit under
// Gloo, but the bound is not 0, since no backend promises every rank the same bits (a rank that
// sums in its own order differs by about 1e-7 and changes no loss); what it must catch is a rank
// whose gradient is not the average, which differs by its own minibatch's share: 0.57 of the
// largest element where dp's ranks step before the average arrives (mutant averaged_too_late),
// 3.8 where task 2b averages half the parameters (half_synced).
constexpr double kLossTolerance = 1e-5;      // per-iteration loss vs single-process training
constexpr double kGradientTolerance = 1e-4;  // max |g - g_full| / max |g_full|
constexpr double kTrafficLow = 0.95, kTrafficHigh = 1.10;  // measured / expected bytes

}  // namespace dtlab::grader
