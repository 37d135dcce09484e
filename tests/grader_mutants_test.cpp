// Deliberately broken solutions of task 2b, dp, pipeline, pp, zero, tp, cp, mesh and precision
// (tests/mutants), graded: each must fail the check that should catch it, with the words that tell
// a student what is wrong, within its timeout. A check that stops catching its bug fails here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <cstdlib>
#include <ostream>

#include "dtlab/tooling/process.h"
#include "dtlab/io/json_file.h"
#include "test_util.h"

namespace {

struct Mutant {
  std::string exercise;
  std::string name;     // DTLAB_MUTANT
  std::string check;    // the check that must fail (run alone with --only)
  std::string outcome;  // how it fails
  std::string words;    // what its message must say
  double max_seconds;   // the grading must end within this
};

// The collective timeout of these runs: a rank that waits for a hung one gives up after it.
constexpr int kTimeout = 5;

const std::vector<Mutant> kTask2bMutants = {
    {"task2b", "sum_not_average", "gradients", "wrong number", "not divided by the world size", 120},
    {"task2b", "no_broadcast", "broadcast", "wrong number", "every rank must start from rank 0's weights", 120},
    {"task2b", "clip_before_sync", "gradients", "wrong number", "differs from the full-batch gradient", 120},
    {"task2b", "overlapping_shards", "sampler", "wrong number", "read by more than one rank", 120},
    {"task2b", "missing_shards", "sampler", "wrong number", "read by no rank", 120},
    {"task2b", "sleep_forever", "losses-2", "hang", "rank 1 hung", 3 * kTimeout + 60},
    // Note [A run that stalls]: every rank waits in its own code, where no collective times out;
    // stopped at the stall bound (here max(kTimeout + 5, 20) = 20 s), not at --run-timeout (300 s).
    {"task2b", "all_wait_forever", "losses-2", "hang", "ranks 0 and 1 hung: no rank had started a step or a kit "
     "operation for", 3 * kTimeout + 60},
    {"task2b", "crash", "losses-2", "crash", "rank 1 crashed: killed by signal 11", 120},
    // Note [What each tolerance must catch] (grader/checks.h): the smallest mistake the gradient
    // tolerance must catch, told as rounding, not as a wrong average.
    {"task2b", "half_precision_wire", "gradients", "wrong number", "as rounding makes: is the gradient sent in a "
     "shorter float", 120},
};

// Task 4's measured check reads the interface's counters against the student's model: the
// smallest mistake of the formula's factors (Note [What each tolerance must catch]) leaves the
// band. The model check catches it too, exactly; this proves the band bites on its own.
const std::vector<Mutant> kTask4Mutants = {
    {"task4", "whole_tensor_twice", "measured", "wrong number", "measured / expected = 0.75", 120},
};

// The original assignment's tests passed when every rank held the whole data set and when no
// gradient existed at all; these are the mistakes its checks could not see, and more.
const std::vector<Mutant> kDpMutants = {
    {"dp", "whole_dataset", "partition", "wrong number", "reads all 5000 examples", 120},
    {"dp", "overlapping_parts", "partition", "wrong number", "is read by ranks 0 and 1", 120},
    {"dp", "strided_parts", "partition", "wrong number", "does not read part 0 of the seed's shuffle", 120},
    {"dp", "seed_per_rank", "partition", "wrong number", "the parts must be disjoint", 120},
    {"dp", "seed_ignored", "partition", "wrong number", "of the seed's shuffle", 120},
    {"dp", "seed_always_42", "partition", "wrong number", "--seed 7 gives the same parts as --seed 42", 120},
    {"dp", "uneven_parts", "partition", "error", "different numbers of steps per epoch", 120},
    {"dp", "whole_batch", "partition", "wrong number", "examples per step", 120},
    {"dp", "sum_not_average", "gradients", "wrong number", "not divided by the world size", 120},
    {"dp", "no_gradients", "gradients", "wrong number", "every gradient of rank 0 is zero", 120},
    {"dp", "averaged_too_late", "gradients", "wrong number", "differs from rank 0's", 120},
};

// The original pipeline exercise's tests compared forward outputs only and never proved that
// stages ran at the same time; each of these passes such tests and fails a check here.
const std::vector<Mutant> kPipelineMutants = {
    {"pipeline", "sequential_pipe", "concurrency", "wrong number", "the forward tasks of tick 1 did not run at the same time", 120},
    {"pipeline", "backward_not_pipelined", "concurrency", "wrong number", "the backward tasks of tick 1 did not run at the same time", 120},
    {"pipeline", "schedule_off_by_one", "schedule", "wrong number", "clock_cycles(1, 1): tick 0 is []", 120},
    {"pipeline", "unscaled_micro_losses", "transparency", "wrong number", "no scaling per micro-batch", 120},
    {"pipeline", "dropped_block", "transparency", "wrong number", "does every layer of the model run, once, in order", 120},
    {"pipeline", "group_by_device", "split", "wrong number", "returns to an earlier device starts a new partition", 120},
    // a parameter that backward never reaches is named as missing, not as a wrong value.
    {"pipeline", "block_without_grad", "transparency", "wrong number", "transformer.h.0.attn.c_attn.bias has no gradient", 120},
    // The smallest mistake the transparency check's tolerance must catch (Note [The Pipe's tolerance]).
    {"pipeline", "half_precision_hand_off", "transparency", "wrong number", "the Pipe's logits differ from the model's by", 120},
    // The driver checks clock_cycles before the first step (check_pipe_schedules).
    {"pipeline", "schedule_off_by_one", "losses", "error", "clock_cycles(1, 3) cannot drive the Pipe: forward schedule of 3 ticks: task (micro-batch 0, stage 2) is missing", 180},
    {"pipeline", "no_clear", "errors", "wrong number", "the same Pipe's next forward failed or was wrong", 120},
};

// The pipeline across ranks: schedules that deadlock or store too much are caught by simulation
// before any rank runs them; a protocol that deadlocks on the wire, within the timeout, named.
const std::vector<Mutant> kPpMutants = {
    {"pp", "warmup_grows", "schedules", "deadlock", "deadlock after", 120},
    {"pp", "warmup_plus_one", "schedules", "wrong number", "one_f_one_b_schedule for 1 stage and 2 micro-batches: stage 0 stores up to 2 activations at once", 120},
    {"pp", "lifo_last_stage", "schedules", "wrong number", "sends its gradients in the order 1 0", 120},
    {"pp", "skip_last_backward", "schedules", "wrong number", "stage 0: the backward of micro-batch 0 (B0) is missing", 120},
    {"pp", "warmup_plus_one", "memory", "wrong number", "stage rank 0 held 4 micro-batches' activations at once", 180},
    {"pp", "forwarded_gradient", "gradients", "wrong number", "step 1's gradient differs from one process's", 180},
    {"pp", "serial_stages", "overlap", "wrong number", "the stage ranks took turns instead of working at once", 180},
    // Every stage rank waits in a send or recv at once: a deadlock, told as one, not "one rank is behind".
    {"pp", "blocking_send", "losses-1f1b", "deadlock", "no rank can go on: a deadlock", 3 * kTimeout + 120},
    // Note [A dropped PendingWork]: named at the rank's next operation, long before the timeout.
    {"pp", "dropped_send", "losses-1f1b", "error", "(activation 0) to rank 1 was never waited for", 120},
    // Note [One stream per pair]: right on Gloo; NCCL could not pair 1F1B's steady state.
    {"pp", "late_receive", "order", "wrong number",
     "ranks 0 and 1 each post a send as their operation 3 with each other", 180},
    // Note [Held, not only stored]: sends waited for only at the end keep 1F1B's stage 0 holding all 7.
    {"pp", "sends_held_to_end", "memory", "wrong number",
     "stage rank 0 held the activations of 7 micro-batches at once, stored or in sends not yet waited for", 180},
};

// Sharding: each mistake fails the check of its own stage, named in the strategy's terms; the
// kit's optimiser owns AdamW on the pieces, so "AdamW over the whole model" cannot be written here.
const std::vector<Mutant> kZeroMutants = {
    {"zero", "sum_not_average", "gradients-1", "wrong number", "the sum over 3 ranks was not divided by the world size", 120},
    {"zero", "piece_off_by_one", "gradients-1", "wrong number", "the gradient the ranks' pieces make together differs", 120},
    // Note [A hint the evidence singles out]: not "divided by the world size twice" (the pieces
    // are not a uniform multiple of the gradient), but the ring's indices.
    {"zero", "ring_one_step_off", "gradients-1", "wrong number", "does your ring add the piece it receives into the "
     "piece of the same index", 120},
    // Ranks that forget the all-gather each keep their own pieces' updates: the replicas part.
    {"zero", "no_all_gather", "losses-1", "wrong number", "rank 1's model differs from rank 0's", 120},
    {"zero", "keeps_gradients", "memory", "wrong number", "which no rank may hold", 180},
    {"zero", "never_frees", "memory", "wrong number", "that is the whole model", 180},
    // Every unit gathered at once before backward: the forward and the traffic are right.
    {"zero", "gathers_all_before_backward", "memory", "wrong number", "whole parameters at once in the backward", 180},
    // One block past the bound, right in every number: the smallest mistake the memory bound must
    // catch (Note [A shape where the bound bites]).
    {"zero", "freed_two_stages_late", "memory", "wrong number", "whole parameters at once in the forward", 180},
    {"zero", "gathers_again", "traffic", "wrong number", "a unit gathered more often than needed", 180},
    // Note [The traffic's tolerance]: the head gathered twice, 0.02% more bytes.
    {"zero", "smallest_unit_twice", "traffic", "wrong number", "+688 from the", 180},
    // The gradient through c10d's all_reduce, not the ring: named from the log, in traffic and in
    // scaling alike, not "a collective left out".
    {"zero", "c10d_all_reduce", "traffic", "wrong number", "through c10d's all_reduce: that is DDP's collective", 180},
    {"zero", "c10d_all_reduce", "scaling", "wrong number", "through c10d's all_reduce: that is DDP's collective", 180},
    // Note [A gather that puts pieces in the wrong place]: right at 2 ranks, wrong from 3; told
    // as the gather's slots, not as the data or the reduce-scatter.
    {"zero", "gather_wrong_slots", "losses-3", "wrong number", "an all-gather must write each piece it receives "
     "into the slot of the rank that owns it", 120},
    {"zero", "gather_wrong_slots", "gradients-3", "wrong number", "an all-gather must write each piece it receives "
     "into the slot of the rank that owns it", 120},
    // Read while freed: LibTorch's "storage of size 0", said in the strategy's terms.
    {"zero", "freed_before_backward", "losses-3", "error", "the backward read parameters of a unit that was freed", 120},
    // A strategy that moves nothing still trains to the end (on zero gradients): no recorded point.
    {"zero", "does_nothing", "scaling", "wrong number", "rank 0 sent 0 bytes per step, not the", 180},
};

// Tensor parallelism: each mistake fails the check that names it. The data-parallel average of
// the grid's gradients is the kit's (tp/tp_step.h), so "replicated gradients not synchronised
// over DP" cannot be written against this contract; the replicas check catches ranks that drift
// apart through the student's operators instead (f_g_swapped).
const std::vector<Mutant> kTpMutants = {
    // g's forward the identity: the row-parallel outputs are never summed, so the loss is wrong.
    {"tp", "f_g_swapped", "gradients-2", "wrong number", "Is every row-parallel layer's output all-reduced (g)", 120},
    {"tp", "f_g_swapped", "replicas", "wrong number", "rank 1's replicated parameters (wpe, the layer norms", 120},
    {"tp", "no_row_all_reduce", "traffic", "wrong number", "An all-reduce is missing", 120},
    // Note [The tensor group's tolerance]: one [B x T] vector in float64, 0.08% more bytes.
    {"tp", "sum_of_exps_in_double", "traffic", "wrong number", "1.00 B x T floats more a step", 120},
    // GPT-2's biases start at zero: step 1 agrees, step 2 does not.
    {"tp", "bias_on_every_rank", "losses-2", "wrong number", "Is each row-parallel bias added once, after g?", 120},
    // Right in every loss; the smallest mistake the replicas check must catch (Note [The replicas'
    // tolerance]).
    {"tp", "bias_on_rank_zero", "replicas", "wrong number", "rank 1's replicated parameters (wpe, the layer norms", 120},
    {"tp", "contiguous_c_attn", "gradients-2", "wrong number", "not one contiguous slice of the 3 x n_embd columns", 120},
    {"tp", "gathered_logits", "losses-2", "wrong number", "log 2 = 0.693147 too high", 120},
    {"tp", "padding_counted", "gradients-4", "wrong number", "the vocabulary of 1482 is padded to 1484", 120},
    // Note [A hint the evidence singles out] for tp's gradients: a wrong loss is the forward's, a
    // gradient scaled alike everywhere the backward's, whichever parameter differs most.
    {"tp", "max_not_all_reduced", "gradients-2", "wrong number", "Step 1's loss is already", 120},
    {"tp", "ignores_incoming_gradient", "gradients-2", "wrong number", "alike in every parameter, and step 1's loss is "
     "right", 120},
    // Right in every number (the loss, the gradients, within the byte slack): the logits gathered
    // whole on every rank, an ordinary cross-entropy. Only the count of operations tells.
    {"tp", "all_gathered_logits", "traffic", "wrong number", "ran 1 all_gather a step", 120},
    {"tp", "all_gathered_logits", "memory", "wrong number", "logits gathered whole are TP times them", 120},
};

// Context parallelism: a mistake in the algebra fails the probe of the attention, one in the ring
// its probe, and those right in every number the measure of what they skip.
const std::vector<Mutant> kCpMutants = {
    {"cp", "sum_not_rescaled", "attention", "wrong number", "rescaled by exp(old max - new max)", 120},
    {"cp", "diagonal_unmasked", "attention", "wrong number", "the diagonal visible", 120},
    {"cp", "averaged_not_merged", "merge", "wrong number", "an average of the outputs weighs the two pieces alike", 120},
    {"cp", "positions_not_offset", "ring", "wrong number", "the absolute positions of its chunks", 120},
    {"cp", "positions_not_offset", "losses", "wrong number", "Step 1 already differs", 120},
    {"cp", "gradients_kept", "ring", "wrong number", "arrive home after N steps", 120},
    {"cp", "gradients_kept", "gradients", "wrong number", "Step 1's loss is right, so the backward differs", 120},
    // Right in every number: only the kit's measures tell.
    {"cp", "contiguous_chunks", "balance", "wrong number", "one early and one late", 120},
    {"cp", "waits_before_computing", "overlap", "wrong number", "they compute while nothing travels", 120},
    {"cp", "whole_scores", "memory", "wrong number", "more than 8 inputs and 6 blocks of scores", 120},
    {"cp", "sends_after_last_step", "traffic", "wrong number", "More: is something sent twice", 120},
};

// The mesh: a layout whose first axis turns fastest and stages that send to the wrong tensor rank
// train the same numbers (Note [What the mesh's numbers cannot show]): only the layout probe and
// the measured sends tell; so do an unbucketed average, a norm per gradient and pp's warm-up one
// forward too long (only the counts and the memory tell); the rest change the numbers.
const std::vector<Mutant> kMeshMutants = {
    {"mesh", "tensor_axis_slowest", "layout", "wrong number", "The FIRST axis turns fastest here", 120},
    {"mesh", "other_tensor_rank", "sends", "wrong number", "Does stage_neighbours keep this rank's data and tensor", 120},
    {"mesh", "average_over_tensor_group", "gradients", "wrong number", "Is average_over_data a mean over the data group only", 120},
    {"mesh", "tied_across_tensor_ranks", "gradients", "wrong number", "Only the tied embedding", 120},
    {"mesh", "tied_across_tensor_ranks", "sends", "wrong number", "does tied_embedding_peer keep", 120},
    {"mesh", "replicated_counted_tp_times", "losses", "wrong number", "Step 1 agrees, so an update differs", 120},
    {"mesh", "all_reduce_per_gradient", "traffic", "wrong number", "operations a step on its data group, not 1", 120},
    // Right in every number: one collective per gradient for the norm (Note [Each group's bytes]).
    {"mesh", "norm_per_gradient", "traffic", "wrong number", "A collective per gradient gives the same norm", 120},
    // pp's mistake (tests/mutants/pp_mutants.cpp, linked into mesh-mutants), right in every number:
    // the mesh runs the student's own schedules, and its memory check sees the micro-batch too many.
    {"mesh", "warmup_plus_one", "memory", "wrong number", "1F1B stores min(stages - stage, m): 3", 120},
    // ZeRO-1's pieces counted as if every replica held them all: the clip's norm 1/sqrt(2) too small.
    {"mesh", "pieces_as_copies", "losses-zero1", "wrong number", "With ZeRO-1 each rank of a data group holds", 120},
};

// Memory and precision: a recompute that draws new masks and masters rounded to bf16 change
// numbers the checks compare; a block that keeps its graph instead of recomputing (right in every
// number) and a policy one block off show only in what the kit counts; a rank that decides alone
// is stopped by the kit's comparison of the ranks' answers; a scale that never grows, by the rule.
const std::vector<Mutant> kPrecisionMutants = {
    {"precision", "rng_not_restored", "recompute-exact", "wrong number", "restore the generator's state kept in forward", 120},
    {"precision", "keeps_activations", "recompute-memory", "wrong number", "once more in backward, from its kept input", 120},
    {"precision", "every_off_by_one", "recompute-memory", "wrong number", "is_checkpointed chose blocks [1] of 2, not [0]", 120},
    {"precision", "last_micro_batch_only", "bf16-losses", "wrong number", "added in fp32?", 120},
    {"precision", "masters_in_bf16", "bf16-masters", "wrong number", "the masters must stay fp32", 120},
    {"precision", "not_unscaled", "fp16-gradients", "wrong number", "it is still scaled: divide by the scale", 120},
    {"precision", "decides_alone", "scaler", "error", "found_overflow returned true on rank 1 and false on rank 0", 120},
    {"precision", "never_grows", "scaler", "wrong number", "it doubled after step 3: 3 good steps in a row", 120},
};

std::string mutants_binary(const std::string& exercise) {
  if (exercise == "mesh") return DTLAB_PROGRAM("mesh-mutants");
  if (exercise == "precision") return DTLAB_PROGRAM("precision-mutants");
  if (exercise == "cp") return DTLAB_PROGRAM("cp-mutants");
  if (exercise == "tp") return DTLAB_PROGRAM("tp-mutants");
  if (exercise == "task4") return DTLAB_PROGRAM("task4-mutants");
  if (exercise == "zero") return DTLAB_PROGRAM("zero-mutants");
  if (exercise == "pipeline") return DTLAB_PROGRAM("pipeline-mutants");
  if (exercise == "pp") return DTLAB_PROGRAM("pp-mutants");
  return exercise == "dp" ? DTLAB_PROGRAM("dp-mutants") : DTLAB_PROGRAM("task2b-mutants");
}

void PrintTo(const Mutant& m, std::ostream* os) { *os << m.exercise << " " << m.name << " caught by " << m.check; }

class GraderMutants : public ::testing::TestWithParam<Mutant> {};

TEST_P(GraderMutants, FailTheCheckThatShouldCatchThem) {
  const Mutant& m = GetParam();
  const auto dir = dtlab::test::fresh_temp_dir("mutant-" + m.exercise + "-" + m.name + "-" + m.check);
  ::setenv("DTLAB_MUTANT", m.name.c_str(), 1);  // the grader's ranks inherit it
  const auto start = std::chrono::steady_clock::now();
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("grader"), "check", m.exercise, "--only", m.check, "--use-binary",
       m.exercise + "=" + mutants_binary(m.exercise), "--results", dir.string(), "--timeout",
       std::to_string(kTimeout), "--threads", "1"},
      m.max_seconds + 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::unsetenv("DTLAB_MUTANT");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(seconds, m.max_seconds) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "only" / "results.json");  // --only's folder
  ASSERT_EQ(results.at("tests").size(), 1u) << results.dump(2);
  const auto& t = results.at("tests").at(0);
  EXPECT_EQ(t.at("extra_data").at("check"), m.exercise + "/" + m.check);
  EXPECT_EQ(t.at("score").get<double>(), 0.0);
  EXPECT_EQ(t.at("extra_data").at("outcome"), m.outcome) << t.dump(2);
  EXPECT_NE(t.at("output").get<std::string>().find(m.words), std::string::npos) << t.dump(2);
}

// The same binaries without a mutant pass the same checks: the failures above are the bugs'.
TEST(GraderMutants, WithoutAMutantTheSameBinariesPass) {
  for (const auto& [exercise, checks] : {std::pair{std::string("task2b"), "broadcast"},
                                         std::pair{std::string("dp"), "partition,gradients"},
                                         std::pair{std::string("pipeline"), "schedule,split,transparency,concurrency"},
                                         std::pair{std::string("pp"), "schedules,memory,overlap,gradients,order"},
                                         std::pair{std::string("zero"), "gradients-1,losses-1,losses-3,memory,traffic"},
                                         std::pair{std::string("tp"), "gradients-2,losses-2,replicas,traffic"},
                                         std::pair{std::string("cp"), "attention,merge,memory,ring,overlap,balance"},
                                         std::pair{std::string("mesh"), "layout,gradients,losses,losses-zero1,sends,traffic,memory"},
                                         std::pair{std::string("precision"), "recompute-exact,recompute-memory,bf16-losses,bf16-masters,fp16-gradients,scaler"},
                                         // Note [A run as long as its checks]: without the losses (or tp's
                                         // replicas) asked, the runs these read train 3 steps, as most mutants'
                                         // gradings do; zero's stage 2 and the mesh's memory already do above.
                                         std::pair{std::string("tp"), "memory,traffic"},
                                         std::pair{std::string("mesh"), "sends,traffic"}}) {
    const auto dir = dtlab::test::fresh_temp_dir("mutant-none-" + exercise);
    const dtlab::ProcessResult r = dtlab::run_process(
        {DTLAB_PROGRAM("grader"), "check", exercise, "--only", checks, "--use-binary", exercise + "=" + mutants_binary(exercise),
         "--results", dir.string(), "--threads", "1"},
        300);
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

// Note [Fair evidence] (grader/checks.h): a bug loses the points of the checks it breaks, not
// those of the code beside it that the same runs also exercise. Each of these wrong submissions
// is graded on the four checks that share its runs, and each check must end as its bug implies,
// with words a student can act on where it fails.
struct FairCase {
  std::string exercise;
  std::string mutant;
  std::map<std::string, std::string> outcome;  // check -> outcome
  std::map<std::string, std::string> words;    // check -> what its message must say
};

const std::vector<FairCase> kFairCases = {
    // Ranks that skip the gradient all_reduce: the ranks disagree; what they read and start from is right.
    {"task2b", "only_rank0_syncs",
     {{"sampler", "passed"}, {"broadcast", "passed"}, {"gradients", "ranks disagree"}, {"losses-2", "ranks disagree"}},
     // Rank 0 meets the others' loss all_reduce with its gradient all_reduce: named, not a crash.
     {{"losses-2", "rank 0: all_reduce #42 (gradients) float32 [662, 128]; rank 1: all_reduce #42 (loss) float32 [1]"},
      {"gradients", "rank 1: all_reduce"}}},
    // Half the parameters averaged: the other half differs between ranks.
    {"task2b", "half_synced",
     {{"sampler", "passed"}, {"broadcast", "passed"}, {"gradients", "wrong number"}, {"losses-2", "wrong number"}},
     {{"gradients", "every rank must end with the same averaged gradient"},
      {"losses-2", "Step 1 agrees, so the update differs"}}},
    // MAX instead of SUM: the ranks agree, on the wrong gradient.
    {"task2b", "max_not_sum",
     {{"sampler", "passed"}, {"broadcast", "passed"}, {"gradients", "wrong number"}, {"losses-2", "wrong number"}},
     {{"gradients", "differs from the full-batch gradient"}, {"losses-2", "Step 1 agrees, so the update differs"}}},
    // Broadcast from rank 1: the ranks agree, on rank 1's weights; only the broadcast check can tell
    // (its run draws different weights per rank; the others start every rank from the checkpoint).
    {"task2b", "broadcast_from_rank1",
     {{"sampler", "passed"}, {"broadcast", "wrong number"}, {"gradients", "passed"}, {"losses-2", "passed"}},
     {{"broadcast", "broadcast from rank 0, not from another rank"}}},
    // Every rank takes rank 0's shard: the sampler check fails; the gradient and loss checks
    // compare with one process on what the ranks read, and the ranks average that correctly.
    {"task2b", "overlapping_shards",
     {{"sampler", "wrong number"}, {"broadcast", "passed"}, {"gradients", "passed"}, {"losses-2", "passed"}},
     {{"sampler", "read by more than one rank"}}},
    // dp: a valid cut of the shuffle that is not the seed's (every world-th example): the partition
    // check fails; the ranks average what they read correctly, and the reference reads the same.
    {"dp", "strided_parts",
     {{"partition", "wrong number"}, {"gradients", "passed"}, {"losses-2", "passed"}},
     {{"partition", "does not read part 0 of the seed's shuffle"}}},
    // Every rank reads the whole data set: caught by the partition check, and only there.
    {"dp", "whole_dataset",
     {{"partition", "wrong number"}, {"gradients", "passed"}, {"losses-2", "passed"}},
     {{"partition", "reads all 5000 examples"}}},
    // Note [A pipeline's causality] (grader/checks_pp.cpp): stage ranks that never send or receive
    // run every action, so counts and busy times look right (and no message is out of order); the
    // builders are right. It loses the 6 points of memory, overlap, order and timing, and keeps
    // the schedules' 4.
    {"pp", "no_communication",
     {{"schedules", "passed"}, {"memory", "wrong number"}, {"overlap", "wrong number"}, {"order", "wrong number"},
      {"timing", "wrong number"}},
     {{"memory", "these stages did not talk"}, {"overlap", "these stages did not talk"},
      {"order", "these stages did not talk"}, {"timing", "these stages did not talk"}}},
    // tp: padding columns counted in the loss change nothing where the vocabulary divides (TP 2:
    // 1482 rows), only at TP 4 (padded to 1484): gradients-4 alone fails.
    {"tp", "padding_counted",
     {{"gradients-2", "passed"}, {"gradients-4", "wrong number"}, {"losses-2", "passed"}, {"memory", "passed"}},
     {{"gradients-4", "transformer.wte.weight"}}},
    // FSDP gathering every unit before backward: right in every number and every byte sent; only
    // the memory check, which samples the backward too, fails.
    {"zero", "gathers_all_before_backward",
     {{"gradients-3", "passed"}, {"losses-3", "passed"}, {"traffic", "passed"}, {"memory", "wrong number"}},
     {{"memory", "not all at once before"}}},
    // tp: the logits gathered whole, an ordinary cross-entropy: right in every number, so only the
    // checks of the point fail: traffic counts the tensor group's operations, not only their bytes,
    // and memory finds a tensor TP times the logits this rank computes.
    {"tp", "all_gathered_logits",
     {{"gradients-2", "passed"}, {"losses-2", "passed"}, {"memory", "wrong number"}, {"traffic", "wrong number"}},
     {{"traffic", "gathering the logits holds B x T x V on every rank"}, {"memory", "2.00 times its logits'"}}},
};

class FairGrading : public ::testing::TestWithParam<FairCase> {};

TEST_P(FairGrading, EachCheckEndsAsTheBugImplies) {
  const FairCase& c = GetParam();
  const auto dir = dtlab::test::fresh_temp_dir("mutant-fair-" + c.exercise + "-" + c.mutant);
  ::setenv("DTLAB_MUTANT", c.mutant.c_str(), 1);
  std::string checks;
  for (const auto& [check, outcome] : c.outcome) checks += (checks.empty() ? "" : ",") + check;
  const dtlab::ProcessResult r = dtlab::run_process(
      {DTLAB_PROGRAM("grader"), "check", c.exercise, "--only", checks, "--use-binary",
       c.exercise + "=" + mutants_binary(c.exercise), "--results", dir.string(), "--timeout",
       std::to_string(kTimeout), "--threads", "1"},
      300);
  ::unsetenv("DTLAB_MUTANT");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const nlohmann::json results = dtlab::io::read_json_file(dir / "only" / "results.json");  // --only's folder
  std::map<std::string, std::string> outcome, output;
  for (const auto& t : results.at("tests")) {
    const std::string check = t.at("extra_data").at("check").get<std::string>().substr(c.exercise.size() + 1);
    outcome[check] = t.at("extra_data").at("outcome");
    output[check] = t.at("output");
  }
  EXPECT_EQ(outcome, c.outcome) << results.dump(2);
  for (const auto& [check, words] : c.words) {
    EXPECT_NE(output[check].find(words), std::string::npos) << check << ":\n" << output[check];
  }
}

std::string test_name(const ::testing::TestParamInfo<Mutant>& p) {
  std::string id = p.param.name + "_" + p.param.check;
  for (char& c : id) if (c == '-') c = '_';
  return id;
}

INSTANTIATE_TEST_SUITE_P(Task2b, GraderMutants, ::testing::ValuesIn(kTask2bMutants), test_name);
INSTANTIATE_TEST_SUITE_P(Task4, GraderMutants, ::testing::ValuesIn(kTask4Mutants), test_name);
INSTANTIATE_TEST_SUITE_P(Dp, GraderMutants, ::testing::ValuesIn(kDpMutants), test_name);
INSTANTIATE_TEST_SUITE_P(Pipeline, GraderMutants, ::testing::ValuesIn(kPipelineMutants), test_name);
INSTANTIATE_TEST_SUITE_P(Pp, GraderMutants, ::testing::ValuesIn(kPpMutants), test_name);
INSTANTIATE_TEST_SUITE_P(Zero, GraderMutants, ::testing::ValuesIn(kZeroMutants), test_name);
INSTANTIATE_TEST_SUITE_P(Tp, GraderMutants, ::testing::ValuesIn(kTpMutants), test_name);
INSTANTIATE_TEST_SUITE_P(Mesh, GraderMutants, ::testing::ValuesIn(kMeshMutants), test_name);
INSTANTIATE_TEST_SUITE_P(Cp, GraderMutants, ::testing::ValuesIn(kCpMutants), test_name);
INSTANTIATE_TEST_SUITE_P(Precision, GraderMutants, ::testing::ValuesIn(kPrecisionMutants), test_name);
INSTANTIATE_TEST_SUITE_P(Fair, FairGrading, ::testing::ValuesIn(kFairCases),
                         [](const ::testing::TestParamInfo<FairCase>& p) { return p.param.exercise + "_" + p.param.mutant; });

}  // namespace
