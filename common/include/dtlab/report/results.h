// The results.json every exercise run writes: configuration, environment, one record per
// iteration and per epoch, and the timing summary. Plots and the grader read it; nothing
// scrapes the console.
//
// Schema "dtlab.results/1":
//   {"schema", "exercise", "config": {...}, "environment": {...},
//    "iterations": [{"step", "epoch", "loss", "seconds", "comm_seconds", "lr", "examples",
//                    "tokens", "padded_tokens"}],
//    "epochs": [{"epoch", "train_loss", "eval_accuracy", "eval_loss", "eval_examples", "seconds",
//                "eval_<metric>"...}],
//    "timing": {"count", "discarded", "mean_seconds", "stdev_seconds", "min_seconds",
//               "max_seconds", "examples_per_second", "tokens_per_second",
//               "padded_tokens_per_second"}}
// Examples and tokens are summed over all ranks.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtlab::report {

struct IterationRecord {
  int64_t step = 0;  // from 1
  int epoch = 0;     // from 1
  double loss = 0;
  double seconds = 0;
  double lr = 0;
  int64_t examples = 0;
  int64_t tokens = 0;  // non-padding tokens
  int64_t padded_tokens = 0;  // tokens computed on, padding included (rows x columns)
  double comm_seconds = 0;  // of `seconds`, waiting for gradient synchronisation
  // Bytes this rank's network interface sent and received during the step (headers included;
  // rank 0's own, not summed over ranks); -1 when not measured (one process, or loopback, whose
  // counters hold every local rank's traffic).
  int64_t tx_bytes = -1, rx_bytes = -1;
};

struct EpochRecord {
  int epoch = 0;
  double train_loss = 0;  // mean over the epoch's iterations
  std::optional<double> eval_accuracy, eval_loss;
  std::map<std::string, double> eval_metrics;  // written as "eval_<name>" ("eval_bleu", ...)
  int64_t eval_examples = 0;
  double seconds = 0;
};

class Results {
 public:
  Results(std::string exercise, nlohmann::json config, nlohmann::json environment);
  void add(const IterationRecord& r) { iterations_.push_back(r); }
  void add(const EpochRecord& r) { epochs_.push_back(r); }
  const std::vector<IterationRecord>& iterations() const { return iterations_; }
  const std::vector<EpochRecord>& epochs() const { return epochs_; }
  // An extra top-level section, e.g. "communication".
  void set_section(const std::string& key, nlohmann::json value) { sections_[key] = std::move(value); }
  nlohmann::json to_json() const;
  // Writes to_json() to path atomically; called after every epoch so a crash keeps what was done.
  void save(const std::filesystem::path& path) const;

 private:
  std::string exercise_;
  nlohmann::json config_, environment_;
  std::vector<IterationRecord> iterations_;
  std::vector<EpochRecord> epochs_;
  nlohmann::json sections_ = nlohmann::json::object();
};

// "throughput: 10210 tokens/s, 58.5 ms/step (39 steps, the first discarded), 12.3 ms of it
// waiting for gradients": the line a driver ends with, from results.json's timing; "" when it
// has none. Scripts (make pipeline, the cluster demo) pick it out of a rank's log.
std::string throughput_line(const nlohmann::json& results);

}  // namespace dtlab::report
