// The dp exercise's figures of `grader report` (5 and 6): scaling against ranks, and what the
// learning run learned per epoch; see report_parts.h.
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "report_parts.h"

namespace dtlab::grader::report_parts {

Figure dp_scaling_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  Figure fig{5, "dp_scaling", "GPT-2 data parallel: time per epoch and throughput vs ranks"};
  // purpose -> ranks -> run
  std::map<std::string, std::map<int, const Run*>> runs;
  for (const Run& r : f.runs) {
    if ((r.purpose == "dp-timing-weak" || r.purpose == "dp-timing-strong") &&
        number(r.results, {"timing", "mean_seconds"})) {
      runs[r.purpose].emplace(r.world, &r);
    }
  }
  if (runs.size() != 2) {
    fig.missing = fmt::format("no finished dp timing runs of both kinds (purposes \"dp-timing-weak\" and "
                              "\"dp-timing-strong\") in {}", (f.dir / "runs").string());
    return fig;
  }
  table = {"GPT-2 data parallel (dp): time and throughput vs ranks (timing runs)",
           {"scaling", "ranks", "batch per rank", "ms / iteration", "average_gradients ms", "s / epoch",
            "tokens/s (all ranks)", "with padding", "run"},
           "lrrrrrrrl", {}};
  std::string data = "# Figure 5: dp against ranks; index 0 weak scaling (batch per rank fixed), 1 strong (global "
                     "batch fixed)\n# ranks ms_per_iteration comm_ms epoch_seconds tokens_per_second "
                     "padded_tokens_per_second  (run)\n";
  std::set<int> ranks;
  std::string weak, strong;
  for (const char* purpose : {"dp-timing-weak", "dp-timing-strong"}) {
    const bool is_weak = std::string(purpose) == "dp-timing-weak";
    data += fmt::format("# {}\n", purpose);
    for (const auto& [world, r] : runs[purpose]) {
      const json& t = r->results["timing"];
      const double mean = number(t, {"mean_seconds"}).value(), comm = number(t, {"mean_comm_seconds"}).value_or(0),
                   tokens = number(t, {"tokens_per_second"}).value_or(0),
                   padded = number(t, {"padded_tokens_per_second"}).value_or(0);
      const double batch = number(r->results, {"config", "per_rank_train_batch_size"}).value_or(0),
                   pairs = number(r->results, {"config", "pairs_per_rank"}).value_or(0);
      const double epoch = batch > 0 ? mean * std::ceil(pairs / batch) : 0;
      data += fmt::format("{} {:.4f} {:.4f} {:.3f} {:.1f} {:.1f}  # runs/{}\n", world, mean * 1e3, comm * 1e3, epoch,
                          tokens, padded, r->id);
      table.rows.push_back({is_weak ? "weak" : "strong", std::to_string(world), fmt::format("{:g}", batch), ms(mean),
                            ms(comm), fmt::format("{:.1f}", epoch), fmt::format("{:.0f}", tokens),
                            fmt::format("{:.0f}", padded), r->id});
      ranks.insert(world);
      const std::string title =
          is_weak ? fmt::format("batch {:g} per rank", batch)
                  : fmt::format("global batch {}", text(r->results, {"config", "global_train_batch_size"}, "?"));
      (is_weak ? weak : strong) = title;
    }
    data += "\n\n";
  }
  fig.provenance = pv.line(ranks);
  plotter.plot(fig, data, {"weak=" + gp_string(weak), "strong=" + gp_string(strong)});
  fig.caption = fmt::format(
      "The dp exercise's timing runs: GPT-2 ({}) on the translation fixture, with the batch per rank fixed ({}; the "
      "original assignment's comparison) and with the global batch fixed ({}). Left: seconds per epoch, the mean "
      "step time (after the first, discarded) times the steps of an epoch of each rank's part. Right: tokens per "
      "second summed over ranks, padding excluded (solid) and included (dashed). All ranks share this machine's "
      "cores and talk over loopback: this measures contention and communication cost, not scaling on a cluster.",
      model_name(runs.begin()->second.begin()->second->results), weak, strong);
  return fig;
}

Figure dp_epochs_figure(const Folder& f, const Provenance& pv, Plotter& plotter) {
  Figure fig{6, "dp_epochs", "GPT-2 data parallel: validation loss and BLEU per epoch"};
  const Run* run = nullptr;
  for (const Run& r : f.runs) {
    if (r.purpose == "dp-learning" && !run) run = &r;
  }
  const json* epochs = run ? find(run->results, {"epochs"}) : nullptr;
  if (!epochs || !epochs->is_array() || epochs->empty()) {
    fig.missing = fmt::format("no finished dp learning run (purpose \"dp-learning\") with epochs in {}",
                              (f.dir / "runs").string());
    return fig;
  }
  std::string data = "# Figure 6: the dp learning run per epoch\n# epoch validation_loss bleu\n";
  std::string trend;
  for (const json& e : *epochs) {
    const auto epoch = number(e, {"epoch"}), loss = number(e, {"eval_loss"}), bleu = number(e, {"eval_bleu"});
    if (!epoch || !loss || !bleu) continue;
    data += fmt::format("{:g} {:.5f} {:.3f}\n", *epoch, *loss, *bleu);
    trend += fmt::format("{}epoch {:g}: loss {:.3f}, BLEU {:.1f}", trend.empty() ? "" : "; ", *epoch, *loss, *bleu);
  }
  if (trend.empty()) {
    fig.missing = run->results_path.string() + ": no epoch has eval_loss and eval_bleu";
    return fig;
  }
  fig.provenance = pv.line({run->world});
  plotter.plot(fig, data, {"run=" + gp_string(run->label())});
  fig.caption = fmt::format(
      "Validation loss on the target tokens (left axis) and BLEU of greedy translations of {} test pairs (right "
      "axis) after each epoch of {} (global batch {}, learning rate {}). {}.",
      text(run->results, {"config", "bleu_examples"}, "?"), run->label(),
      text(run->results, {"config", "global_train_batch_size"}, "?"),
      text(run->results, {"config", "learning_rate"}, "?"), trend);
  return fig;
}

}  // namespace dtlab::grader::report_parts
