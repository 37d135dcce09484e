// The training loop, see train/loop.h.
#include "dtlab/train/loop.h"

#include <fmt/format.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/dist/netdev.h"
#include "dtlab/report/process_memory.h"
#include "dtlab/report/tensor_bytes.h"
#include "dtlab/report/profile.h"
#include "dtlab/report/timing.h"
#include "dtlab/train/step.h"

namespace dtlab::train {
namespace {

std::string duration(double seconds) {
  const long s = std::lround(seconds);
  return fmt::format("{}:{:02d}", s / 60, s % 60);
}

// The mean over ranks of each value: the loss of the global batch is the mean of the ranks'
// minibatch losses (equal minibatches).
void average_over_ranks(Run& run, std::vector<double>& values, const std::string& tag) {
  if (!run.group || values.empty()) return;
  torch::Tensor t = torch::tensor(values, torch::kFloat64);
  run.group->all_reduce(t, dist::ReduceOp::AVG_BY_DIVISION, tag);
  for (size_t i = 0; i < values.size(); ++i) values[i] = t[static_cast<int64_t>(i)].item<double>();
}

// Note [A non-finite loss]: a rank whose loss is NaN or infinite must not stop alone: the others
// would learn it only from a failed collective, and their logs would name a "stopped" rank, not
// the loss. A NaN reaches every rank anyway (its gradient is averaged into everyone's), so with
// ranks the loop goes on to the end of the epoch, where the losses are exchanged in any case
// (`tokens` below carries every rank's loss of every step), and there every rank throws the same
// sentence, naming the first such step and the ranks whose loss it was. One process stops at the
// step itself. tests/train_core_test.cpp (TrainLoop) runs both.
//
// At step 1 no update has happened yet, so the learning rate cannot be the cause: the advice
// names the first parameter that held a non-finite value before that step (a broken
// checkpoint), or, where the forward read whole parameters that the exercise's code put together
// (FSDP's all-gathers: TrainState::forward_reading), what was wrong in them, or says the weights
// were finite and points at the data. The weights are looked at once, before step 1 (the step's
// update would spread a NaN to all of them); with ranks, each rank's finding is gathered (a
// pipeline's stages hold different weights), so the words stay the same on every rank.
std::string non_finite_loss(const std::vector<int>& ranks, const std::vector<double>& losses, int64_t step,
                            const std::string& non_finite_weight, const std::string& forward_reading) {
  std::string who, values;
  for (size_t i = 0; i < ranks.size(); ++i) {
    who += fmt::format("{}{}", i ? ", " : "", ranks[i]);
    values += fmt::format("{}{}", i ? ", " : "", losses[i]);
  }
  // What step 1's forward read wrong explains a later step's too: the wrong whole came first.
  const std::string advice =
      step == 1 && !non_finite_weight.empty()
          ? ", before any update: the weights are not finite (" + non_finite_weight +
                "): check the checkpoint (--model_name_or_path)"
      : !forward_reading.empty()
          ? std::string(step == 1 ? ", before any update" : "") + ", with every weight finite at rest: from step 1 "
            "on the forward read whole parameters that are not the model's (" + forward_reading + ")"
      : step != 1 ? ": lower --learning_rate or check the data"
                  : ", before any update, with every weight finite: check the data";
  return fmt::format("{} {}: the loss is {} at step {}{}", ranks.size() == 1 ? "rank" : "ranks", who,
                     values, step, advice);
}

// "NAME holds nan (first at [i, j])" for the first parameter, in named_parameters order, with
// an element that is NaN or infinite; "" when every one is finite. One pass over the weights.
// A parameter this rank holds no memory for (FSDP's units at rest, shard/flat_parameters.h) is
// not read.
std::string first_non_finite_parameter(const torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (const auto& item : module.named_parameters()) {
    const torch::Tensor& p = item.value();
    const auto needed = static_cast<size_t>((p.storage_offset() + p.numel()) * static_cast<int64_t>(p.element_size()));
    if (!p.has_storage() || p.storage().nbytes() < needed) continue;
    const torch::Tensor flat = item.value().detach().flatten();
    const torch::Tensor bad = torch::logical_not(torch::isfinite(flat));
    if (!bad.any().item<bool>()) continue;
    int64_t offset = bad.nonzero()[0][0].item<int64_t>();
    const double value = flat[offset].item<double>();
    // The flat offset as an index of each dimension, last dimension fastest (row-major).
    std::vector<int64_t> index(static_cast<size_t>(item.value().dim()));
    for (int64_t d = item.value().dim() - 1; d >= 0; --d) {
      index[static_cast<size_t>(d)] = offset % item.value().size(d);
      offset /= item.value().size(d);
    }
    return fmt::format("{} holds {} (first at [{}])", item.key(), value, fmt::join(index, ", "));
  }
  return "";
}

// Note [A non-finite loss]: what first_non_finite_parameter said on each rank, as
// "rank 1: NAME holds nan (first at [0, 3]); ..." (the ranks whose weights were finite left
// out), the same words on every rank; "" when every rank's weights were finite. A collective:
// every rank calls it, or none.
constexpr int64_t kWeightNameChars = 512;  // room for a parameter name, a value and an index
std::string weights_of_every_rank(Run& run, const std::string& mine) {
  torch::Tensor chars = torch::zeros({kWeightNameChars}, torch::kInt64);
  auto c = chars.accessor<int64_t, 1>();
  for (size_t i = 0; i < mine.size() && i + 1 < static_cast<size_t>(kWeightNameChars); ++i) {
    c[static_cast<int64_t>(i)] = static_cast<unsigned char>(mine[i]);
  }
  std::string all;
  const std::vector<torch::Tensor> gathered = run.group->all_gather(chars, "non-finite weights");
  for (size_t r = 0; r < gathered.size(); ++r) {
    std::string name;
    const torch::Tensor t = gathered[r].cpu();
    const auto c = t.accessor<int64_t, 1>();
    for (int64_t i = 0; i < kWeightNameChars && c[i] != 0; ++i) name += static_cast<char>(c[i]);
    if (!name.empty()) all += fmt::format("{}rank {}: {}", all.empty() ? "" : "; ", r, name);
  }
  return all;
}

// Examples, real tokens and padded tokens of each step, summed over the ranks: minibatches of
// translation pairs differ in length from rank to rank, so rank 0's count times the world size
// would be a guess. The same exchange carries every rank's own loss of each step (a column per
// rank, zero but its own), so that every rank can name a non-finite one (Note [A non-finite
// loss]); returns the first such step's error, or "". non_finite_weight: what
// first_non_finite_parameter said before step 1 on this rank.
std::string sum_over_ranks(Run& run, std::vector<report::IterationRecord>& records, int ranks_per_batch,
                           const std::string& non_finite_weight, const std::function<std::string()>& forward_reading) {
  if (!run.group || records.empty()) return "";
  const int world = run.world();
  torch::Tensor t = torch::zeros({static_cast<int64_t>(records.size()), 3 + world}, torch::kFloat64);
  for (size_t i = 0; i < records.size(); ++i) {
    const auto row = static_cast<int64_t>(i);
    t[row][0] = static_cast<double>(records[i].examples);
    t[row][1] = static_cast<double>(records[i].tokens);
    t[row][2] = static_cast<double>(records[i].padded_tokens);
    t[row][3 + run.rank()] = records[i].loss;
  }
  run.group->all_reduce(t, dist::ReduceOp::SUM, "tokens");
  const auto sums = t.accessor<double, 2>();
  std::string error;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto row = static_cast<int64_t>(i);
    records[i].examples = static_cast<int64_t>(sums[row][0]) / ranks_per_batch;
    records[i].tokens = static_cast<int64_t>(sums[row][1]) / ranks_per_batch;
    records[i].padded_tokens = static_cast<int64_t>(sums[row][2]) / ranks_per_batch;
    std::vector<int> ranks;
    std::vector<double> losses;
    for (int r = 0; r < world; ++r) {
      if (std::isfinite(sums[row][3 + r])) continue;
      ranks.push_back(r);
      losses.push_back(sums[row][3 + r]);
    }
    if (error.empty() && !ranks.empty()) {
      // Every rank sees the same sums, so every rank makes this exchange or none does.
      const std::string weights = records[i].step == 1 ? weights_of_every_rank(run, non_finite_weight) : "";
      const std::string read = weights_of_every_rank(run, forward_reading ? forward_reading() : std::string());
      error = non_finite_loss(ranks, losses, records[i].step, weights, read);
    }
  }
  return error;
}

void print_first_step(Run& run, const report::IterationRecord& r) {
  float loss = static_cast<float>(r.loss);
  if (run.group) {  // print the loss of the global batch: the mean over ranks
    torch::Tensor l = torch::tensor({loss}, torch::kFloat32);
    run.group->all_reduce(l, dist::ReduceOp::AVG_BY_DIVISION, "loss");
    loss = l.item<float>();
  }
  if (!run.lead()) return;
  fmt::print("step={} epoch={} loss={:.6f} lr={:.3e} seconds={:.3f}\n", r.step, r.epoch, loss, r.lr, r.seconds);
  std::fflush(stdout);
}

void print_epoch(const report::EpochRecord& record) {
  fmt::print("epoch={} train_loss={:.4f}", record.epoch, record.train_loss);
  if (record.eval_accuracy) fmt::print(" eval_accuracy={:.4f}", *record.eval_accuracy);
  if (record.eval_loss) {
    fmt::print(" eval_loss={:.4f}", *record.eval_loss);
    for (const auto& [name, value] : record.eval_metrics) fmt::print(" eval_{}={:.4f}", name, value);
    fmt::print(" eval_examples={}", record.eval_examples);
  }
  fmt::print(" seconds={:.1f}\n", record.seconds);
  std::fflush(stdout);
}

}  // namespace

void plan_steps(LoopPlan& plan, int64_t dataset_size, int world, int num_epochs, int64_t max_steps) {
  const int64_t shard = (dataset_size + world - 1) / world;
  const int64_t steps_per_epoch = (shard + plan.batch_per_rank - 1) / plan.batch_per_rank;
  plan.total_steps = max_steps > 0 ? max_steps : steps_per_epoch * num_epochs;
  plan.epochs = max_steps > 0 && steps_per_epoch > 0
                    ? static_cast<int>((max_steps + steps_per_epoch - 1) / steps_per_epoch)
                    : num_epochs;
}

StepFunction kit_step(GradientSync& sync, AfterSync after_sync) {
  return [&sync, after_sync](TrainState& state, const StepInput& input) {
    return training_step(state, input, sync, after_sync);
  };
}

void record_evaluation(report::EpochRecord& record, const EvalResult& result) {
  record.eval_accuracy = result.accuracy;
  record.eval_loss = result.loss;
  record.eval_metrics = result.metrics;
  record.eval_examples = result.examples;
}

void train_loop(Run& run, TrainState& state, const Dataset& data, const LoopPlan& plan,
                const StepFunction& step, const AfterEpoch& after_epoch, report::Results& results,
                const std::filesystem::path& results_path) {
  if (plan.evaluate && !after_epoch) throw Error("train_loop: plan.evaluate is set but no after_epoch was given");
  // Note [Memory a rank holds]: what loading freed goes back to the kernel, the load's peak is
  // kept, and the kernel's peak starts again from what the first step holds.
  report::give_back_free_heap();
  run.load_peak_rss_bytes = report::read_process_memory().peak_rss_bytes;
  run.peak_reset &= report::reset_peak_rss();
  // The tensors' peak beside it, read after every step (a trainer may reset the meter's peak at its
  // own step's start to measure that step) and restarted after each evaluation.
  report::TensorBytes* meter = report::TensorBytes::installed();
  if (meter) {
    meter->reset_peak();
    run.tensor_steps_peak_bytes = 0;
  }
  int64_t steps = 0;
  report::Stopwatch since_start, since_progress;
  // The bytes this rank's interface moves per step, where they are this rank's alone: not on one
  // process, not on loopback (whose counters hold every local rank's traffic).
  std::optional<std::string> link;
  if (run.world() > 1) {
    const std::string name =
        dist::interface_towards(run.settings.master_addr, run.settings.master_port, run.settings.interface);
    if (name != "lo") link = name;
  }
  const bool profile = run.lead() && !plan.profile_dir.empty();
  // Note [A non-finite loss]: the weights before any update, named if step 1's loss is not finite.
  const std::string non_finite_weight = state.module ? first_non_finite_parameter(*state.module) : "";
  report::StepProfiler profiler(plan.profile_dir, run.world() > 1 ? run.name + ", rank 0" : run.name,
                                report::kProfileFirstStep, profile ? report::kProfileSteps : 0);
  for (int epoch = 1; epoch <= plan.epochs && steps < plan.total_steps; ++epoch) {
    report::Stopwatch epoch_time;
    std::vector<report::IterationRecord> records;
    const std::vector<int64_t> shard = data::shard_indices(plan.sampler, epoch - 1);
    for (const std::vector<int64_t>& rows : data::minibatches(shard, plan.batch_per_rank)) {
      if (steps >= plan.total_steps) break;
      const data::Batch batch = data.batch(rows).to(run.device);
      const double lr = state.scheduler->last_lr();
      if (run.group) run.group->note_step(steps + 1);  // named if this rank stops (Note [Who stopped])
      const dist::InterfaceCounters before = link ? dist::read_counters(*link) : dist::InterfaceCounters{};
      profiler.before_step(steps + 1);
      report::Stopwatch step_time;
      const StepResult r = step(state, {steps + 1, epoch, &rows, &batch});
      const double seconds = step_time.seconds();
      if (meter) run.tensor_steps_peak_bytes = std::max(run.tensor_steps_peak_bytes, meter->peak());
      if (profiler.after_step(steps + 1)) {
        fmt::print("profile: steps {}-{} in {} and {} (those steps' times include the profiler's cost)\n",
                   report::kProfileFirstStep, steps + 1, (plan.profile_dir / "trace.json").string(),
                   (plan.profile_dir / "profile.txt").string());
        std::fflush(stdout);
      }
      const dist::InterfaceCounters after = link ? dist::read_counters(*link) : dist::InterfaceCounters{};
      ++steps;
      // Note [A non-finite loss]: with ranks, said at the epoch's end by every rank.
      if (!run.group && !std::isfinite(r.loss)) {
        throw Error(non_finite_loss({run.rank()}, {r.loss}, steps, non_finite_weight,
                                    state.forward_reading ? state.forward_reading() : ""));
      }
      // This rank's counts; summed over the ranks at the end of the epoch.
      report::IterationRecord record;
      record.step = steps;
      record.epoch = epoch;
      record.loss = r.loss;
      record.seconds = seconds;
      record.lr = lr;
      record.examples = batch.size();
      record.tokens = batch.real_tokens();
      record.padded_tokens = batch.input_ids.numel();
      record.comm_seconds = r.comm_seconds;
      if (link) {
        record.tx_bytes = static_cast<int64_t>(after.tx_bytes - before.tx_bytes);
        record.rx_bytes = static_cast<int64_t>(after.rx_bytes - before.rx_bytes);
      }
      records.push_back(record);
      if (steps <= plan.log_first_steps) {
        print_first_step(run, records.back());
      } else if (run.lead() && since_progress.seconds() >= plan.progress_seconds) {
        const double per_step = since_start.seconds() / double(steps);
        double sum = 0;
        for (const auto& rec : records) sum += rec.loss;
        fmt::print("progress step={}/{} epoch={}/{} loss_avg={:.4f} seconds_per_step={:.3f} eta={}\n",
                   steps, plan.total_steps, epoch, plan.epochs, sum / double(records.size()), per_step,
                   duration(per_step * double(plan.total_steps - steps)));
        std::fflush(stdout);
        since_progress.restart();
      }
    }
    std::vector<double> losses;
    for (const auto& rec : records) losses.push_back(rec.loss);
    average_over_ranks(run, losses, "loss");
    const std::string non_finite =
        sum_over_ranks(run, records, std::max(plan.ranks_per_batch, 1), non_finite_weight, state.forward_reading);
    if (!non_finite.empty()) throw Error(non_finite);  // every rank, the same words
    double loss_sum = 0;
    for (size_t i = 0; i < records.size(); ++i) {
      records[i].loss = losses[i];
      results.add(records[i]);
      loss_sum += losses[i];
    }
    report::EpochRecord record;
    record.epoch = epoch;
    record.train_loss = records.empty() ? 0.0 : loss_sum / double(records.size());
    // The steps' peak, not the evaluation's (FSDP evaluates the whole model, gathered).
    run.steps_peak_rss_bytes = std::max(run.steps_peak_rss_bytes, report::read_process_memory().peak_rss_bytes);
    if (plan.evaluate) record_evaluation(record, after_epoch(state, epoch));
    run.peak_reset &= report::reset_peak_rss();
    if (meter) meter->reset_peak();
    record.seconds = epoch_time.seconds();
    results.add(record);
    if (run.lead()) {
      print_epoch(record);
      results.save(results_path);
    }
  }
  run.steps_peak_rss_bytes = std::max(run.steps_peak_rss_bytes, report::read_process_memory().peak_rss_bytes);
  if (meter && state.module) {
    run.parameter_bytes = storage_bytes(state.module->parameters());
    run.gradient_bytes = state.gradient_bytes;
    run.optimizer_state_bytes = state.optimizer ? optimizer_state_bytes(*state.optimizer) : 0;
  }
  const std::string unfinished_profile = profiler.close();
  if (!unfinished_profile.empty()) fmt::print("{}\n", unfinished_profile);
}

}  // namespace dtlab::train
