// results.json, see report/results.h.
#include "dtlab/report/results.h"

#include <fmt/format.h>

#include "dtlab/io/json_file.h"
#include "dtlab/report/timing.h"

namespace dtlab::report {

Results::Results(std::string exercise, nlohmann::json config, nlohmann::json environment)
    : exercise_(std::move(exercise)), config_(std::move(config)), environment_(std::move(environment)) {}

nlohmann::json Results::to_json() const {
  nlohmann::json iterations = nlohmann::json::array();
  std::vector<double> seconds;
  for (const IterationRecord& r : iterations_) {
    iterations.push_back({{"step", r.step}, {"epoch", r.epoch}, {"loss", r.loss},
                          {"seconds", r.seconds}, {"comm_seconds", r.comm_seconds}, {"lr", r.lr}, {"examples", r.examples},
                          {"tokens", r.tokens}, {"padded_tokens", r.padded_tokens}});
    if (r.tx_bytes >= 0) {
      iterations.back()["tx_bytes"] = r.tx_bytes;
      iterations.back()["rx_bytes"] = r.rx_bytes;
    }
    seconds.push_back(r.seconds);
  }
  nlohmann::json epochs = nlohmann::json::array();
  for (const EpochRecord& e : epochs_) {
    nlohmann::json j = {{"epoch", e.epoch}, {"train_loss", e.train_loss}, {"seconds", e.seconds}};
    j["eval_accuracy"] = e.eval_accuracy ? nlohmann::json(*e.eval_accuracy) : nlohmann::json();
    j["eval_loss"] = e.eval_loss ? nlohmann::json(*e.eval_loss) : nlohmann::json();
    j["eval_examples"] = e.eval_examples;
    for (const auto& [name, value] : e.eval_metrics) j["eval_" + name] = value;
    epochs.push_back(j);
  }
  const TimingSummary t = summarize(seconds);
  // Throughput over the same iterations as the mean time.
  double examples = 0, tokens = 0, padded = 0, comm = 0, tx = 0, rx = 0;
  bool counted = t.count > 0;
  for (size_t i = kDiscardedIterations; i < kDiscardedIterations + t.count; ++i) {
    examples += double(iterations_[i].examples);
    tokens += double(iterations_[i].tokens);
    padded += double(iterations_[i].padded_tokens);
    comm += iterations_[i].comm_seconds;
    counted = counted && iterations_[i].tx_bytes >= 0;
    tx += double(iterations_[i].tx_bytes);
    rx += double(iterations_[i].rx_bytes);
  }
  const double timed = t.mean * double(t.count);
  nlohmann::json timing = {{"count", t.count},
                           {"discarded", kDiscardedIterations},
                           {"mean_seconds", t.mean},
                           {"stdev_seconds", t.stdev},
                           {"min_seconds", t.min},
                           {"max_seconds", t.max},
                           {"mean_comm_seconds", t.count ? comm / double(t.count) : 0.0},
                           {"examples_per_second", timed > 0 ? examples / timed : 0.0},
                           {"tokens_per_second", timed > 0 ? tokens / timed : 0.0},
                           {"padded_tokens_per_second", timed > 0 ? padded / timed : 0.0}};
  if (counted) {  // rank 0's interface, per timed step
    timing["mean_tx_bytes"] = tx / double(t.count);
    timing["mean_rx_bytes"] = rx / double(t.count);
  }
  nlohmann::json j = {{"schema", "dtlab.results/1"}, {"exercise", exercise_}, {"config", config_},
                      {"environment", environment_}, {"iterations", iterations}, {"epochs", epochs},
                      {"timing", timing}};
  for (const auto& [key, value] : sections_.items()) j[key] = value;
  return j;
}

void Results::save(const std::filesystem::path& path) const { io::write_json_file(path, to_json()); }

std::string throughput_line(const nlohmann::json& results) {
  const nlohmann::json t = results.value("timing", nlohmann::json::object());
  if (t.value("count", 0) == 0) return "";
  std::string line = fmt::format("throughput: {:.0f} tokens/s, {:.1f} ms/step ({} steps, the first discarded)",
                                 t.value("tokens_per_second", 0.0), 1e3 * t.value("mean_seconds", 0.0),
                                 t.value("count", 0));
  const double comm = t.value("mean_comm_seconds", 0.0);
  // A sharded step waits for gradient pieces and for parameters, in backward and in the forward; a
  // tensor-parallel one for the activations' all-reduces in both.
  const char* waiting = results.contains("sharding")          ? "waiting for other ranks (receives, all-reduces)"
                        : results.contains("tensor_parallel") ? "in all-reduces (activations, gradients, loss)"
                                                              : "waiting for gradients";
  if (comm > 0) line += fmt::format(", {:.1f} ms of it {}", 1e3 * comm, waiting);
  return line;
}

}  // namespace dtlab::report
