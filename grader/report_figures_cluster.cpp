// Figure 9 of `grader report`: tasks 2a, 2b and 3 on the emulated cluster of
// scripts/cluster_demo.sh (runs of purpose "cluster", their run.json naming the link rate), against
// what the gradient bytes and the link rate predict; see report_parts.h.
#include <array>
#include <functional>
#include <initializer_list>
#include <cmath>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "report_parts.h"

namespace dtlab::grader::report_parts {
namespace cluster_figure_parts {

// The share of a tbf-limited veth link's nominal rate that one TCP stream carries as payload
// (measured for scripts/netns_hosts.sh: --rate 1gbit gives about 0.94 Gbit/s).
constexpr double kPayloadShare = 0.94;

// "1gbit" -> 1, "2500mbit" -> 2.5 (Gbit/s); nullopt for "unlimited" or anything else.
std::optional<double> gbit(const std::string& rate) {
  static const std::regex pattern("^([0-9.]+)(k|m|g)bit$");
  std::smatch m;
  if (!std::regex_match(rate, m, pattern)) return std::nullopt;
  const double scale = m[2] == "k" ? 1e-6 : m[2] == "m" ? 1e-3 : 1.0;
  return std::stod(m[1]) * scale;
}

// S: the gradient bytes one rank hands to its collectives in a step (CommLog's tensor bytes).
double gradient_bytes_per_step(const Run& r) {
  const json* ops = find(r.results, {"communication", "by_operation"});
  const json* iterations = find(r.results, {"iterations"});
  if (!ops || !iterations || iterations->empty()) return 0;
  double bytes = 0;
  for (const auto& [name, op] : ops->items()) {
    if (name == "gather / gradients" || name == "all_reduce / gradients" || name.find("ddp bucket") != std::string::npos) {
      bytes += number(op, {"bytes"}).value_or(0);
    }
  }
  return bytes / static_cast<double>(iterations->size());
}

// Seconds the busiest link needs for a step's gradients: gather/scatter moves (n-1)S into rank 0
// and (n-1)S out of it, one after the other; the ring sends and receives 2(n-1)/n S per rank at
// once (full duplex).
double predicted_seconds(const std::string& task, int n, double s, double gbit_per_s) {
  const double bytes_per_second = gbit_per_s * 1e9 / 8 * kPayloadShare;
  const double bytes = task == "task2a" ? 2.0 * (n - 1) * s : 2.0 * (n - 1) / n * s;
  return bytes / bytes_per_second;
}

}  // namespace cluster_figure_parts

Figure cluster_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  namespace c = cluster_figure_parts;
  Figure fig{9, "cluster", "Tasks 2a, 2b and 3 on an emulated cluster"};
  // world -> task -> runs
  std::map<int, std::map<std::string, std::vector<const Run*>>> runs;
  for (const Run& r : f.runs) {
    if (r.purpose == "cluster" && number(r.results, {"timing", "mean_seconds"})) runs[r.world][r.exercise].push_back(&r);
  }
  if (runs.empty()) {
    fig.missing = "no emulated-cluster runs (purpose \"cluster\"): `sudo make cluster-demo` makes them";
    return fig;
  }
  table = {"Tasks 2a, 2b and 3 on emulated hosts (scripts/cluster_demo.sh)",
           {"task", "hosts", "link", "s / step", "waiting s", "predicted s", "gradients S (MB)",
            "rank 0's link: model (MB)", "counters (MB)", "run"},
           "lrlrrrrrrl", {}};
  const int world = runs.rbegin()->first;
  std::string data = fmt::format("# Figure 9: {} hosts; one block per task (2a, 2b, 3)\n# gbit_per_s seconds_per_step "
                                 "waiting_seconds predicted_seconds  (run)\n", world);
  std::string at_one_gbit;
  // At `world` hosts, per limited rate: task 2b's waiting and computing seconds and its step
  // over DDP's, for the sentence that names the rate where communication and computation are
  // closest (where DDP's overlap can gain the most).
  std::map<double, std::array<double, 3>> ring_by_rate;  // rate -> {2b waiting, 2b computing, 2b step / DDP step}
  std::map<double, double> ddp_step;
  for (const auto& [n, by_task] : runs) {
    for (const char* task : {"task2a", "task2b", "task3"}) {
      std::vector<std::pair<double, const Run*>> rated;
      const auto it = by_task.find(task);
      if (it != by_task.end()) {
        for (const Run* r : it->second) {
          const std::string rate = text(r->record, {"rate"}, "?");
          const auto g = c::gbit(rate);
          rated.emplace_back(g.value_or(1e9), r);  // unlimited last
        }
      }
      std::sort(rated.begin(), rated.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      if (n == world) data += fmt::format("# {}\n", task);
      for (const auto& [g, r] : rated) {
        const double step = number(r->results, {"timing", "mean_seconds"}).value();
        const double wait = number(r->results, {"timing", "mean_comm_seconds"}).value_or(0);
        const double s = c::gradient_bytes_per_step(*r);
        const bool limited = g < 1e9;
        const double predicted = limited ? c::predicted_seconds(task, n, s, g) : 0;
        // Sent plus received by rank 0 per step: (n-1)S each way through the star's centre,
        // 2(n-1)/n S each way on the ring; the counters' include the headers and the loss.
        const double link_bytes = std::string(task) == "task2a" ? 2.0 * (n - 1) * s : 2 * 2.0 * (n - 1) / n * s;
        const auto tx = number(r->results, {"timing", "mean_tx_bytes"}), rx = number(r->results, {"timing", "mean_rx_bytes"});
        const std::string counted = tx && rx ? fmt::format("{:.1f}", (*tx + *rx) / 1e6) : "-";
        table.rows.push_back({task, std::to_string(n), text(r->record, {"rate"}, "?"), fmt::format("{:.2f}", step),
                              fmt::format("{:.2f}", wait), limited ? fmt::format("{:.2f}", predicted) : "-",
                              fmt::format("{:.1f}", s / 1e6), fmt::format("{:.1f}", link_bytes / 1e6), counted, r->id});
        if (n == world && limited) data += fmt::format("{:g} {:.4f} {:.4f} {:.4f}  # runs/{}\n", g, step, wait, predicted, r->id);
        if (n == world && limited && std::string(task) == "task2b") ring_by_rate[g] = {wait, step - wait, step};
        if (n == world && limited && std::string(task) == "task3") ddp_step[g] = step;
        if (n == world && limited && std::abs(g - 1) < 1e-9) {
          at_one_gbit += fmt::format("{}{} {:.2f} s", at_one_gbit.empty() ? "" : ", ", task, step);
        }
      }
      if (n == world) data += "\n\n";
    }
  }
  std::string closest;
  double best = 1e300;
  for (const auto& [g, ring] : ring_by_rate) {
    const auto ddp = ddp_step.find(g);
    if (ddp == ddp_step.end() || ring[0] <= 0 || ring[1] <= 0 || ddp->second <= 0) continue;
    const double distance = std::abs(std::log(ring[0] / ring[1]));
    if (distance < best) {
      best = distance;
      closest = fmt::format(
          " Communication and computation are closest at {:g} Gbit/s (task 2b waits {:.2f} s and computes {:.2f} s a "
          "step): there DDP's step is {:.2f} times faster than task 2b's.",
          g, ring[0], ring[1], ring[2] / ddp->second);
    }
  }
  // What was trained, from the first run's configuration (scripts/cluster_demo.sh says why).
  const Run& first = *runs.rbegin()->second.begin()->second.front();
  const double s_first = c::gradient_bytes_per_step(first);
  const std::string trained = fmt::format(
      "sequence {}, global batch {}, dropout 0, S = {:.0f} MB of gradients a step",
      text(first.results, {"config", "max_seq_length"}, "?"),
      text(first.results, {"config", "global_train_batch_size"}, "?"), s_first / 1e6);
  fig.provenance = pv.line({world});
  plotter.plot(fig, data, {fmt::format("world={}", world)});
  fig.caption = fmt::format(
      "Tasks 2a, 2b and 3 (reference solutions) on {} network-namespace hosts of this machine whose links are "
      "rate-limited in both directions (sudo make cluster-demo): a BERT sized so that the network decides "
      "(scripts/cluster_demo.sh says how), {}. Left: seconds per step (the first discarded). Right: the "
      "time spent waiting for gradients against what the bytes predict on a link carrying {:.0f}% of its rate as "
      "payload: gather/scatter through rank 0 moves 2(n-1)S through rank 0's link, one direction after the other; "
      "the ring all_reduce 2(n-1)/n S through every rank's, both directions at once; DDP's waiting is what backward "
      "did not hide. The table puts the bytes the model says rank 0's link carries beside what its interface "
      "counters measured. The hosts still share this machine's cores (each rank gets cores / ranks threads). {}{}.{}",
      world, trained, 100 * c::kPayloadShare, at_one_gbit.empty() ? "" : "At 1 Gbit/s: ", at_one_gbit, closest);
  return fig;
}

// Figure 12: the GPT-2 exercises on the same emulated hosts. dp at 1, 2, 4 hosts (weak scaling);
// pp at 2 and 4 hosts, each rank's bytes per step predicted from the boundaries and measured on
// its interface, and the step against compute (the unlimited run's) + busiest rank's bytes / rate.
Figure cluster_lm_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  namespace c = cluster_figure_parts;
  Figure fig{12, "cluster_lm", "GPT-2 data parallel and pipeline across ranks on an emulated cluster"};
  std::map<int, const Run*> dp;                               // hosts -> run
  std::map<int, std::map<std::string, const Run*>> pp;        // hosts -> rate -> run
  for (const Run& r : f.runs) {
    if (!number(r.results, {"timing", "mean_seconds"})) continue;
    if (r.purpose == "cluster-dp") dp[r.world] = &r;
    if (r.purpose == "cluster-pp") pp[r.world][text(r.record, {"rate"}, "?")] = &r;
  }
  if (dp.empty() && pp.empty()) {
    fig.missing = "no emulated-cluster runs of dp or pp (purposes \"cluster-dp\", \"cluster-pp\"): `sudo make "
                  "cluster-demo` makes them";
    return fig;
  }
  table = {"dp and pp on emulated hosts (scripts/cluster_demo.sh)",
           {"exercise", "hosts", "link", "s / step", "tokens/s", "model s / step", "step / model", "rank: bytes/step "
            "predicted / measured (MB)", "run"},
           "lrlrrrrll", {}};
  std::string data = "# Figure 12, index 0: dp, one row per host count\n# hosts seconds_per_step tokens_per_second "
                     "waiting_seconds  (run)\n";
  for (const auto& [n, r] : dp) {
    const double step = number(r->results, {"timing", "mean_seconds"}).value();
    const double tokens = number(r->results, {"timing", "tokens_per_second"}).value_or(0);
    data += fmt::format("{} {:.4f} {:.1f} {:.4f}  # runs/{}\n", n, step, tokens,
                        number(r->results, {"timing", "mean_comm_seconds"}).value_or(0), r->id);
    table.rows.push_back({"dp", std::to_string(n), text(r->record, {"rate"}, "?"), fmt::format("{:.3f}", step),
                          fmt::format("{:.0f}", tokens), "-", "-", "-", r->id});
  }
  data += "\n\n# index 1: pp, one row per rank of the rate-limited runs\n# position rank predicted_MB measured_tx_MB "
          "hosts  (run)\n";
  int position = 0;
  std::string agreement;
  for (const auto& [n, by_rate] : pp) {
    const Run* unlimited = by_rate.count("unlimited") ? by_rate.at("unlimited") : nullptr;
    for (const auto& [rate, r] : by_rate) {
      const auto g = c::gbit(rate);
      const double step = number(r->results, {"timing", "mean_seconds"}).value();
      const json* ranks = find(r->results, {"pp", "traffic", "ranks"});
      std::string bytes;
      double busiest = 0;
      if (ranks && ranks->is_array()) {
        for (const json& k : *ranks) {
          const double predicted = number(k, {"predicted_sent_bytes_per_step"}).value_or(0);
          const double measured = number(k, {"measured_tx_bytes_per_step"}).value_or(0);
          busiest = std::max(busiest, predicted);
          bytes += fmt::format("{}{}: {:.2f} / {:.2f}", bytes.empty() ? "" : "; ", text(k, {"rank"}), predicted / 1e6,
                               measured / 1e6);
          if (g) {
            data += fmt::format("{} {} {:.4f} {:.4f} {}  # runs/{}\n", position++, text(k, {"rank"}), predicted / 1e6,
                                measured / 1e6, n, r->id);
          }
        }
      }
      std::string model = "-", ratio = "-";
      if (g && unlimited) {
        const double compute = number(unlimited->results, {"timing", "mean_seconds"}).value();
        const double seconds = compute + busiest / (*g * 1e9 / 8 * c::kPayloadShare);
        model = fmt::format("{:.3f}", seconds);
        ratio = fmt::format("{:.2f}", step / seconds);
        agreement += fmt::format("{}{} hosts at {}: {:.3f} s against {:.3f} s ({:.2f})", agreement.empty() ? "" : "; ",
                                 n, rate, step, seconds, step / seconds);
      }
      table.rows.push_back({"pp", std::to_string(n), rate, fmt::format("{:.3f}", step),
                            fmt::format("{:.0f}", number(r->results, {"timing", "tokens_per_second"}).value_or(0)), model,
                            ratio, bytes, r->id});
    }
  }
  fig.provenance = pv.line({1, 2, 4});
  plotter.plot(fig, data, {});
  fig.caption = fmt::format(
      "The GPT-2 exercises (reference solutions, gpt2-mini on the translation fixture) on network-namespace hosts of "
      "this machine (sudo make cluster-demo). Left: dp with 8 pairs per host (weak scaling): seconds per step and "
      "tokens per second summed over the hosts; each host computes on its share of this machine's cores, so the "
      "ideal is a flat step time. Right: pp, one stage per host, 1F1B, 8 micro-batches of a batch of 32: each rank's "
      "bytes per step, predicted from the boundaries (each micro-batch's activation forward and its gradient back, "
      "float32; the tied embedding's gradient between the first and the last stage) and measured on its eth0 (the "
      "difference: TCP/IP headers, the step's two scalar all_reduces, the rendezvous heartbeats). Step against the "
      "model compute (the unlimited run's step) + the busiest rank's predicted bytes / rate ({:.0f}% of it payload): "
      "{}.",
      100 * c::kPayloadShare, agreement.empty() ? "no rate-limited run with its unlimited twin" : agreement);
  return fig;
}

namespace cluster_figure_parts {

// Figures 14 and 15: exercises on the same emulated hosts at every rate, time per step against the
// link rate beside "compute (the unlimited run's step) + rank 0's predicted bytes / rate", and
// rank 0's bytes per step predicted and measured on its eth0. What differs between the two: which
// runs, their series, and where each series' prediction comes from.
struct RateFigure {
  int number = 0;
  std::string name, title, table_title, missing;
  std::vector<std::string> order;  // the series, in the order drawn
  // The run's series, or "" when it is not one of this figure's (its purpose says which demo ran it).
  std::function<std::string(const Run&)> series;
  // Rank 0's predicted bytes per step of a series, from its runs (any rate; `all`: every series'),
  // or nullopt.
  std::function<std::optional<double>(const std::string& series, const std::vector<const Run*>& runs,
                                      const std::map<std::string, std::map<std::string, const Run*>>& all)>
      predicted;
  // The caption's first sentences and what the prediction is, {} for the number of hosts.
  std::string caption;
};

Figure rate_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table, const RateFigure& spec) {
  Figure fig{spec.number, spec.name, spec.title};
  fig.template_name = "cluster_rates";
  std::map<std::string, std::map<std::string, const Run*>> runs;  // series -> rate -> run
  int hosts = 0;
  for (const Run& r : f.runs) {
    if (!number(r.results, {"timing", "mean_seconds"})) continue;
    const std::string series = spec.series(r);
    if (series.empty()) continue;
    runs[series][text(r.record, {"rate"}, "?")] = &r;
    hosts = r.world;
  }
  if (runs.empty()) {
    fig.missing = spec.missing;
    return fig;
  }
  table = {spec.table_title,
           {"series", "hosts", "link", "s / step", "model s / step", "step / model", "rank 0 MB/step predicted",
            "measured on eth0", "run"},
           "lrlrrrrrl", {}};
  std::string data = fmt::format("# Figure {}, one index per series ({}), one row per limited rate:\n"
                                 "# gbit_per_s seconds_per_step model_seconds predicted_MB measured_MB  (run)\n",
                                 spec.number, fmt::join(spec.order, ", "));
  std::string series_list, agreement;
  for (const std::string& series : spec.order) {
    if (!runs.count(series)) continue;
    series_list += (series_list.empty() ? "" : " ") + series;
    const auto& by_rate = runs.at(series);
    const Run* unlimited = by_rate.count("unlimited") ? by_rate.at("unlimited") : nullptr;
    std::vector<const Run*> its_runs;
    for (const auto& [rate, r] : by_rate) its_runs.push_back(r);
    const double bytes = spec.predicted(series, its_runs, runs).value_or(0.0);
    data += fmt::format("# {}\n", series);
    // In rate order (the map orders the names as text).
    std::vector<std::pair<double, const Run*>> limited;
    for (const auto& [rate, r] : by_rate) {
      if (const auto g = gbit(rate)) limited.emplace_back(*g, r);
    }
    std::sort(limited.begin(), limited.end());
    for (const auto& [g, r] : limited) {
      const double step = number(r->results, {"timing", "mean_seconds"}).value();
      const double measured = number(r->results, {"timing", "mean_tx_bytes"}).value_or(NAN);
      double model = NAN;
      if (unlimited) model = number(unlimited->results, {"timing", "mean_seconds"}).value() + bytes / (g * 1e9 / 8 * kPayloadShare);
      data += fmt::format("{:g} {:.4f} {:.4f} {:.4f} {:.4f}  # runs/{}\n", g, step, model, bytes / 1e6, measured / 1e6, r->id);
      table.rows.push_back({series, std::to_string(r->world), text(r->record, {"rate"}, "?"), fmt::format("{:.3f}", step),
                            std::isnan(model) ? "-" : fmt::format("{:.3f}", model),
                            std::isnan(model) ? "-" : fmt::format("{:.2f}", step / model), fmt::format("{:.2f}", bytes / 1e6),
                            std::isnan(measured) ? "-" : fmt::format("{:.2f}", measured / 1e6), r->id});
      if (!std::isnan(model)) {
        agreement += fmt::format("{}{} at {:g} Gbit/s {:.3f} s against {:.3f} s", agreement.empty() ? "" : "; ", series, g,
                                 step, model);
      }
    }
    if (unlimited) {
      table.rows.push_back({series, std::to_string(unlimited->world), "unlimited",
                            fmt::format("{:.3f}", number(unlimited->results, {"timing", "mean_seconds"}).value()), "-", "-",
                            fmt::format("{:.2f}", bytes / 1e6), "-", unlimited->id});
    }
    data += "\n\n";
  }
  fig.provenance = pv.line({hosts});
  plotter.plot(fig, data, {"series=" + gp_string(series_list), "heading=" + gp_string(spec.title)});
  fig.caption = fmt::format("{} {}.", fmt::format(fmt::runtime(spec.caption), hosts),
                            agreement.empty() ? "No rate-limited run with its unlimited twin" : agreement);
  return fig;
}

// The first prediction at `keys` among `runs`.
std::optional<double> first_number(const std::vector<const Run*>& runs, std::initializer_list<const char*> keys) {
  for (const Run* r : runs) {
    if (const auto p = number(r->results, keys)) return p;
  }
  return std::nullopt;
}

}  // namespace cluster_figure_parts

// Figure 14: sharding on the same emulated hosts. dp and the zero reference at ZeRO-1, ZeRO-2 and
// FSDP on 4 hosts at every rate, rank 0's bytes predicted by the rings (Note [Bytes of a sharded
// step]); dp's all-reduce sends what ZeRO-1's two rings send, less the padding: ZeRO-1's.
Figure cluster_zero_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  namespace c = cluster_figure_parts;
  c::RateFigure spec;
  spec.number = 14;
  spec.name = "cluster_zero";
  spec.title = "Sharding on an emulated cluster: time per step against the link rate";
  spec.table_title = "dp and zero on emulated hosts (scripts/cluster_demo.sh)";
  spec.missing = "no emulated-cluster runs of zero (purpose \"cluster-zero\"): `sudo make cluster-demo` makes them";
  spec.order = {"dp", "ZeRO-1", "ZeRO-2", "FSDP"};
  spec.series = [](const Run& r) -> std::string {
    if (r.purpose != "cluster-zero") return "";
    const auto stage = number(r.results, {"sharding", "stage"});
    if (r.exercise != "dp" && !stage) return "";
    return !stage ? "dp" : *stage == 1 ? "ZeRO-1" : *stage == 2 ? "ZeRO-2" : "FSDP";
  };
  spec.predicted = [](const std::string& series, const std::vector<const Run*>& runs, const auto& all) {
    if (series != "dp") return c::first_number(runs, {"sharding", "predicted_bytes_sent_per_step"});
    if (!all.count("ZeRO-1")) return std::optional<double>();
    std::vector<const Run*> zero1;
    for (const auto& [rate, r] : all.at("ZeRO-1")) zero1.push_back(r);
    return c::first_number(zero1, {"sharding", "predicted_bytes_sent_per_step"});
  };
  spec.caption = fmt::format(
      "dp and the zero reference (gpt2-mini, 8 pairs per host) on {{}} network-namespace hosts of this machine (sudo "
      "make cluster-demo). Left: seconds per step against the link rate, measured (solid) and modelled (dashed) as "
      "the unlimited run's step plus rank 0's predicted bytes / rate ({:.0f}% of the rate payload). Right: rank 0's "
      "bytes per step at each rate, predicted (the rings': 2(N-1)/N of the padded model for ZeRO-1 and 2, 3(N-1)/N "
      "for FSDP; dp's all-reduce as ZeRO-1's, less the padding) and measured on its eth0 (TCP/IP headers and the "
      "step's scalar all-reduces besides).",
      100 * c::kPayloadShare);
  return c::rate_figure(f, pv, plotter, table, spec);
}

// Figure 15: the three axes on the same emulated hosts. dp, pp (one stage per host) and tp (TP 4,
// and TP 2 x DP 2) at every rate: tensor parallelism all-reduces activations in every layer, so
// it needs the fastest links (inside a node); data and pipeline parallelism go across.
Figure cluster_tp_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  namespace c = cluster_figure_parts;
  c::RateFigure spec;
  spec.number = 15;
  spec.name = "cluster_tp";
  spec.title = "Data, pipeline and tensor parallelism on an emulated cluster: time per step against the link rate";
  spec.table_title = "dp, pp and tp on emulated hosts (scripts/cluster_demo.sh)";
  spec.missing = "no emulated-cluster runs of tp (purpose \"cluster-tp\"): `sudo make cluster-demo` makes them";
  spec.order = {"dp", "pp", "TP2xDP2", "TP4"};  // gnuplot's words: no spaces
  spec.series = [](const Run& r) -> std::string {
    if (r.purpose != "cluster-tp") return "";
    if (r.exercise == "dp" || r.exercise == "pp") return r.exercise;
    const auto tp = number(r.results, {"tensor_parallel", "tp"});
    const auto dp = number(r.results, {"tensor_parallel", "dp"});
    if (!tp || !dp) return "";
    return *dp > 1 ? fmt::format("TP{:g}xDP{:g}", *tp, *dp) : fmt::format("TP{:g}", *tp);
  };
  spec.predicted = [](const std::string& series, const std::vector<const Run*>& runs,
                      const auto& all) -> std::optional<double> {
    if (series == "pp") {
      for (const Run* r : runs) {
        const json* ranks = find(r->results, {"pp", "traffic", "ranks"});
        if (ranks && ranks->is_array() && !ranks->empty()) return number(ranks->at(0), {"predicted_sent_bytes_per_step"});
      }
      return std::nullopt;
    }
    if (series != "dp") return c::first_number(runs, {"tensor_parallel", "predicted_bytes_sent_per_step"});
    // dp's ring all-reduce of the whole model's gradient: 2(N-1)/N of it (the model's bytes from a tp run).
    for (const auto& [name, by_rate] : all) {
      for (const auto& [rate, r] : by_rate) {
        if (const auto whole = number(r->results, {"tensor_parallel", "whole_bytes"})) {
          const double n = r->world;
          return 2 * (n - 1) / n * *whole;
        }
      }
    }
    return std::nullopt;
  };
  spec.caption = fmt::format(
      "The three axes at the same world on {{}} network-namespace hosts of this machine (sudo make cluster-demo), "
      "gpt2-mini, a global batch of 32 pairs: dp (8 a host), pp (one stage a host, 1F1B, 8 micro-batches) and tp "
      "(TP 4; TP 2 x DP 2). Left: seconds per step against the link rate, measured (solid) and modelled (dashed) as "
      "the unlimited run's step plus rank 0's predicted bytes / rate ({:.0f}% of the rate payload). Right: rank 0's "
      "bytes per step, predicted (dp: a ring all-reduce of the gradient, 2(N-1)/N of the model; pp: the boundaries' "
      "activations and gradients; tp: 2(TP-1)/TP of its tensor group's all-reduces, (4L + 2) x B x T x H floats and "
      "the loss's 3 x B x T, plus 2(DP-1)/DP of its slices' gradient) and measured on its eth0.",
      100 * c::kPayloadShare);
  return c::rate_figure(f, pv, plotter, table, spec);
}

// Figure 17: the axes composed, on 2 emulated hosts of 4 ranks each (a machine of 4 devices on one
// NIC): every layout of the mesh reference that fits, at the axes' rates. The prediction is the
// bytes rank 0's host sends a step, from the kit's own log (Note [The host link's bytes],
// mesh/mesh_trainer.h): its sends to the other host and the hops of the data and tensor groups'
// rings that leave it. Tensor parallelism inside a host sends nothing of its per-layer all-reduces
// over the link; across the hosts it sends them all.
Figure cluster_mesh_figure(const Folder& f, const Provenance& pv, Plotter& plotter, Table& table) {
  namespace c = cluster_figure_parts;
  c::RateFigure spec;
  spec.number = 17;
  spec.name = "cluster_mesh";
  spec.title = "The axes composed on two emulated hosts of four ranks: time per step against the link rate";
  spec.table_title = "mesh layouts on 2 emulated hosts of 4 ranks (scripts/cluster_demo.sh --parts mesh)";
  spec.missing = "no emulated-cluster runs of the mesh (purpose \"cluster-mesh\"): `sudo make cluster-demo` makes them";
  spec.order = {"D8", "P2xT4", "D2xP2xT2", "D2xT4", "D2xT4across"};  // gnuplot's words: no spaces
  spec.series = [](const Run& r) -> std::string {
    if (r.purpose != "cluster-mesh") return "";
    const auto d = number(r.results, {"mesh", "data"}), p = number(r.results, {"mesh", "pipeline"}),
               t = number(r.results, {"mesh", "tensor"});
    if (!d || !p || !t) return "";
    std::string name;
    for (const auto& [letter, size] : {std::pair{"D", *d}, std::pair{"P", *p}, std::pair{"T", *t}}) {
      if (size > 1) name += fmt::format("{}{}{:g}", name.empty() ? "" : "x", letter, size);
    }
    // The tensor axis not the fastest: its groups span hosts (Note [The mesh's order]).
    const std::string order = text(r.results, {"mesh", "order"});
    const bool across = *t > 1 && order.rfind("tensor") + std::string("tensor").size() + 2 < order.size();
    return name + (across ? "across" : "");
  };
  spec.predicted = [](const std::string&, const std::vector<const Run*>& runs, const auto&) {
    return c::first_number(runs, {"mesh", "predicted_bytes_sent_per_step"});
  };
  spec.caption = fmt::format(
      "The mesh reference (gpt2-mini, a global batch of 32 pairs in 4 micro-batches) on {{}} ranks as 2 "
      "network-namespace hosts of this machine, 4 ranks each, which talk inside a host over its own loopback and "
      "between hosts over the shaped link (sudo make cluster-demo). D data, P pipeline, T tensor; \"across\": the "
      "tensor groups span both hosts (--mesh_order tensor,data,pipeline), otherwise each sits inside one (Megatron's "
      "order). Left: seconds per step against the link rate, measured (solid) and modelled (dashed) as the unlimited "
      "run's step plus host 0's predicted bytes / rate ({:.0f}% of the rate payload). Right: the bytes host 0 sends "
      "a step, predicted from the kit's log (the sends to the other host, and the hops of each data and tensor ring "
      "that leave it, 2(n-1)/n of the payload each) and measured on its eth0.",
      100 * c::kPayloadShare);
  return c::rate_figure(f, pv, plotter, table, spec);
}

}  // namespace dtlab::grader::report_parts
