// The registry of checks and how one is run, see checks.h.
#include "checks.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <functional>

#include <torch/types.h>

#include "compare.h"
#include "dtlab/core/error.h"
#include "dtlab/io/json_file.h"

namespace dtlab::grader {

std::vector<CheckSpec> checks_of_kind(const Exercise& e) {
  if (e.kind == "finetune") return finetune_checks(e.name);
  if (e.kind == "sync") return data_parallel_checks(e.name, /*ddp=*/false);
  if (e.kind == "ddp") return data_parallel_checks(e.name, /*ddp=*/true);
  if (e.kind == "traffic") return traffic_checks(e.name);
  if (e.kind == "dp") return lm_data_parallel_checks(e.name);
  if (e.kind == "pipeline") return pipeline_checks(e.name);
  if (e.kind == "pp") return pp_checks(e.name);
  if (e.kind == "zero") return zero_checks(e.name);
  if (e.kind == "tp") return tp_checks(e.name);
  if (e.kind == "cp") return cp_checks(e.name);
  if (e.kind == "mesh") return mesh_checks(e.name);
  if (e.kind == "precision") return precision_checks(e.name);
  throw Error("exercises.txt: " + e.name + " has the kind '" + e.kind + "', which has no checks");
}

const std::vector<CheckSpec>& all_checks() {
  static const std::vector<CheckSpec> checks = [] {
    std::vector<CheckSpec> all;
    for (const Exercise& e : exercises()) {
      for (auto& c : checks_of_kind(e)) all.push_back(std::move(c));
    }
    return all;
  }();
  return checks;
}

std::vector<const CheckSpec*> checks_of(const std::string& exercise) {
  std::vector<const CheckSpec*> out;
  for (const auto& c : all_checks()) {
    if (c.exercise == exercise) out.push_back(&c);
  }
  return out;
}

const Run* kit_run(Runner& runner, const RunRequest& request, Verdict* failure) {
  const Run& ref = runner.run(request);
  if (ref.failure) {
    *failure = {Status::kError, "the kit's own single-process run failed (a problem of the kit or the machine, "
                                "not of your code):\n" + ref.failure->message};
    return nullptr;
  }
  return &ref;
}

std::optional<std::vector<io::TensorMap>> start_dumps(const Run& run, int world, Verdict* failure) {
  try {
    return load_dumps(run.dump_dir, world, train::DumpPoint::kBeforeStep);
  } catch (const Error& e) {
    *failure = run.failure ? *run.failure : Verdict{Status::kError, e.what()};
    return std::nullopt;
  }
}

std::optional<ReadExamples> read_examples(const Run& run, int world, Verdict* failure) {
  const auto dumps = start_dumps(run, world, failure);
  if (!dumps) return std::nullopt;
  ReadExamples read;
  for (const io::TensorMap& dump : *dumps) {
    const torch::Tensor shard = dump.at("shard").to(torch::kInt64).contiguous();
    read.shards.emplace_back(shard.data_ptr<int64_t>(), shard.data_ptr<int64_t>() + shard.numel());
    read.batches.push_back(dump.at("batch").numel());
  }
  return read;
}

std::optional<TrainOrder> union_order(const Runner& runner, const ReadExamples& read, int steps, Verdict* failure) {
  nlohmann::json order = nlohmann::json::array();
  TrainOrder out;
  for (int step = 0; step < steps; ++step) {
    for (size_t r = 0; r < read.shards.size(); ++r) {
      const int64_t b = read.batches[r];
      const auto& part = read.shards[r];
      if (step == 0) out.global_batch += b;
      if (static_cast<int64_t>(part.size()) < (step + 1) * b) {
        *failure = {Status::kWrongNumber, fmt::format("rank {}'s part holds {} examples, too few for {} steps of {} "
                                                      "(see the check of what each rank reads)", r, part.size(), steps, b)};
        return std::nullopt;
      }
      for (int64_t i = step * b; i < (step + 1) * b; ++i) order.push_back(part[static_cast<size_t>(i)]);
    }
  }
  const std::string text = order.dump();
  out.key = fmt::format("{:016x}", std::hash<std::string>{}(text));
  // Absolute: the run reads it inside its sandbox, whose working folder is its scratch folder.
  out.path = std::filesystem::absolute(runner.options().results_dir / "orders" / (out.key + ".json"));
  std::filesystem::create_directories(out.path.parent_path());
  io::write_json_file(out.path, order);
  return out;
}

namespace {

std::string show_losses(const std::vector<double>& got, const std::vector<double>& want, size_t n) {
  std::string out = "  step  yours        single-process\n";
  for (size_t i = 0; i < n && i < got.size() && i < want.size(); ++i) {
    out += fmt::format("  {:>4}  {:.7f}  {:.7f}{}\n", i + 1, got[i], want[i],
                       std::abs(got[i] - want[i]) > kLossTolerance ? "  <- differs" : "");
  }
  return out;
}

}  // namespace

Verdict losses_match(const Run& run, const Run& ref, size_t n, const std::string& what,
                     const std::string& hint_first, const std::string& hint_later) {
  const std::vector<double> got = iteration_losses(run.results), want = iteration_losses(ref.results);
  if (got.size() < n) {
    return {Status::kWrongNumber, fmt::format("{}: results.json has {} iteration(s), expected {}", what, got.size(), n)};
  }
  const LossDifference d = compare_losses(got, want, n, kLossTolerance);
  if (d.first_step < 0) {
    return {Status::kPassed, fmt::format("{}: {} with single-process training (max |diff| {:.2g} <= {:g})", what,
                                         n == 1 ? "the loss of step 1 agrees" : fmt::format("the {} losses agree", n),
                                         d.max_abs, kLossTolerance)};
  }
  return {Status::kWrongNumber,
          fmt::format("{}: the loss of step {} differs from single-process training by more than {:g} "
                      "(max |diff| {:.3g}). {}\n{}",
                      what, d.first_step, kLossTolerance, d.max_abs, d.first_step == 1 ? hint_first : hint_later,
                      show_losses(got, want, n))};
}

std::optional<Verdict> incomplete_timing(const Run& run, const RunRequest& request, int iterations) {
  const auto& t = run.results.value("timing", nlohmann::json::object());
  const int count = t.value("count", 0), discarded = t.value("discarded", 0);
  if (count + discarded == iterations && discarded == 1 && t.value("tokens_per_second", 0.0) > 0) return std::nullopt;
  return Verdict{Status::kWrongNumber, fmt::format("{}: {} iterations run but the timing summarises {} (+{} discarded)",
                                                   describe(request), iterations, count, discarded)};
}

std::string first_items(const std::vector<int64_t>& values, size_t n) {
  std::string s;
  for (size_t i = 0; i < values.size() && i < n; ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + (values.size() > n ? ", ..." : "");
}

std::vector<std::string> lm_equivalence_flags(int steps) {
  return {"--dropout", "0", "--learning_rate", "1e-3", "--max_grad_norm", "0.5", "--max_steps", std::to_string(steps),
          "--no_eval"};
}

int shared_run_steps(const Runner& runner, const std::vector<std::string>& full_readers, int loss_steps) {
  for (const std::string& check : full_readers) {
    if (runner.grades(check)) return loss_steps;
  }
  return kCountedSteps;
}

std::optional<RunRequest> gpt2_reference_request(Runner& runner, const ReadExamples& read, int steps,
                                                 Verdict* failure) {
  const std::optional<TrainOrder> order = union_order(runner, read, steps, failure);
  if (!order) return std::nullopt;
  std::vector<std::string> flags = lm_equivalence_flags(steps);
  flags.insert(flags.end(), {"--batch_size", std::to_string(order->global_batch), "--train_order", order->path.string()});
  return RunRequest{fmt::format("reference-gpt2-steps{}-{}", steps, order->key), kReferenceGpt2, "dp-reference", 1, flags,
                    true};
}

std::optional<StepOneDumps> gpt2_step_one_dumps(Runner& runner, const Run& run, int world, Verdict* failure) {
  if (run.failure) {
    *failure = *run.failure;
    return std::nullopt;
  }
  const std::optional<ReadExamples> read = read_examples(run, world, failure);
  if (!read) return std::nullopt;
  const std::optional<RunRequest> reference = gpt2_reference_request(runner, *read, 1, failure);
  if (!reference) return std::nullopt;
  const Run* ref = kit_run(runner, *reference, failure);
  if (!ref) return std::nullopt;
  return StepOneDumps{load_dumps(run.dump_dir, world), load_dumps(ref->dump_dir, 1).at(0)};
}

// Note [A hint the evidence singles out]: a check names a cause only where what it measured
// points at that cause and not at others; otherwise it says what it saw. A gradient 1/N of the
// reference's could be divided twice, or a ring that leaves each rank a wrong piece: the two
// differ in whether every element is scaled alike.
std::string scale_hint(const io::TensorMap& got, const io::TensorMap& want, int world, const std::string& reference) {
  constexpr double kUniform = 0.01;
  const double factor = projection_factor(got, want, "grad.");
  if (factor == 0 || scaled_residual(got, want, "grad.", factor) > kUniform) return "";
  if (std::abs(factor - world) < 0.05 * world) {
    return fmt::format("They are {:.2f} times {}: the sum over {} ranks was not divided by the world size.", factor,
                       reference, world);
  }
  if (std::abs(factor * world - 1) < 0.05) {
    return fmt::format("They are about 1/{} of {}: divided by the world size twice, or not a SUM over ranks "
                       "(no all_reduce, or ReduceOp::MAX)?", world, reference);
  }
  return "";
}

CheckOutcome run_check(const CheckSpec& check, Runner& runner) {
  const auto start = std::chrono::steady_clock::now();
  CheckOutcome outcome;
  outcome.spec = &check;
  try {
    outcome.verdict = check.run(runner);
  } catch (const std::exception& e) {
    outcome.verdict = {Status::kError, check.name() + ": the grader could not finish this check: " + e.what()};
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

}  // namespace dtlab::grader
