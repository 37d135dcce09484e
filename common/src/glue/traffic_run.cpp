// Task 4's driver, see glue/traffic_run.h: the training core's run and step, DDP as the
// synchronisation, the interface counters read around each measured epoch.
#include "dtlab/glue/traffic_run.h"

#include <CLI/CLI.hpp>
#include <ATen/Parallel.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <cmath>
#include <cstdlib>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/data/sampler.h"
#include "dtlab/dist/ddp.h"
#include "dtlab/dist/netdev.h"
#include "dtlab/glue/options.h"
#include "dtlab/glue/parts.h"
#include "dtlab/io/json_file.h"
#include "dtlab/report/profile.h"
#include "dtlab/report/timing.h"
#include "dtlab/tokenizer/bert_tokenizer.h"
#include "dtlab/train/run.h"
#include "dtlab/train/runtime.h"
#include "dtlab/train/step.h"

namespace fs = std::filesystem;

namespace dtlab::glue {
namespace {

struct Measurement {
  int global_batch = 0;
  int64_t iterations = 0;
  std::vector<dist::CommRecord> one_iteration;  // the gradient all_reduces of one iteration
  double expected_per_rank = 0, expected_host = 0;
  uint64_t measured_tx = 0, measured_rx = 0;
  double seconds_per_iteration = 0;
};

nlohmann::json to_json(const Measurement& m) {
  nlohmann::json records = nlohmann::json::array();
  for (const auto& r : m.one_iteration) {
    records.push_back({{"shape", r.shape}, {"dtype", r.dtype}, {"bytes", r.bytes}, {"tag", r.tag}});
  }
  return {{"global_batch_size", m.global_batch},
          {"iterations", m.iterations},
          {"all_reduces_per_iteration", records},
          {"expected_bytes_per_rank", m.expected_per_rank},
          {"expected_bytes_this_host", m.expected_host},
          {"measured_tx_bytes", m.measured_tx},
          {"measured_rx_bytes", m.measured_rx},
          {"ratio_measured_to_expected", m.expected_host > 0 ? double(m.measured_tx) / m.expected_host : 0.0},
          {"seconds_per_iteration", m.seconds_per_iteration}};
}

// The interface this rank's traffic leaves by: the one holding the address that reaches the
// master (loopback when every rank is on this host).
std::string traffic_interface(const GlueOptions& o, const train::Run& run) {
  if (run.world() == 1) return o.launch.interface.value_or("lo");
  return dist::interface_towards(run.settings.master_addr, run.settings.master_port, o.launch.interface);
}

// One epoch (or --max_steps iterations) of DDP training at one global batch size, with the
// interface's byte counters read before and after.
Measurement measure(const GlueOptions& o, train::Run& run, const data::Features& train_set, int global,
                    const TrafficModel& traffic, const std::string& interface) {
  dist::Group& group = *run.group;
  const int world = run.world();
  if (global <= 0 || global % world != 0) {
    throw Error("--batch_sizes: " + std::to_string(global) + " is not a positive multiple of the world size " +
                std::to_string(world));
  }
  torch::manual_seed(o.seed);
  train::TrainState state;
  const model::BertForSequenceClassification model = model::from_pretrained(
      o.model_name_or_path, overrides_from(o, static_cast<int64_t>(data::glue_task(o.task_name).labels.size())));
  state.module = model.ptr();
  state.module->to(run.device);  // before DDP makes its buckets beside the parameters
  state.loss = classification_loss(model);
  dist::DdpOptions ddp_options;
  ddp_options.bucket_cap_bytes = static_cast<int64_t>(o.bucket_cap_mb * 1024 * 1024);
  auto ddp = std::make_unique<dist::DistributedDataParallel>(state.module, group, ddp_options);
  const size_t buckets = ddp->buckets().size();
  const std::unique_ptr<train::GradientSync> sync = train::sync_by_ddp(std::move(ddp));
  const data::SamplerOptions sampler{train_set.size(), world, run.rank(), /*shuffle=*/true, o.seed};
  const auto batches = data::minibatches(data::shard_indices(sampler, 0), global / world);
  const int64_t iterations = o.max_steps > 0 ? std::min<int64_t>(o.max_steps, batches.size())
                                             : static_cast<int64_t>(batches.size());
  add_optimizer(state, o, iterations);

  group.barrier("task4 start");
  group.log().clear();
  const dist::InterfaceCounters before = dist::read_counters(interface);
  // --profile: rank 0's steps 2-4 at this batch size, in a folder of their own (the bytes do not
  // change; the time per iteration then includes the profiler's cost).
  const std::filesystem::path profile_dir = std::filesystem::path(o.output_dir) / fmt::format("profile-batch{}", global);
  report::StepProfiler profiler(profile_dir, fmt::format("task4 batch {}, rank 0", global), report::kProfileFirstStep,
                                o.profile && run.lead() ? report::kProfileSteps : 0);
  report::Stopwatch watch;
  for (int64_t i = 0; i < iterations; ++i) {
    const data::Batch batch = data::make_batch(train_set, batches[i]).to(run.device);
    profiler.before_step(i + 1);
    train::training_step(state, {i + 1, 1, &batches[i], &batch}, *sync);
    if (profiler.after_step(i + 1)) fmt::print("profile: steps 2-{} in {}\n", i + 1, profile_dir.string());
  }
  const double seconds = watch.seconds();
  const std::string unfinished_profile = profiler.close();
  if (!unfinished_profile.empty()) fmt::print("{}\n", unfinished_profile);
  const dist::InterfaceCounters after = dist::read_counters(interface);
  group.barrier("task4 end");

  Measurement m;
  m.global_batch = global;
  m.iterations = iterations;
  // Every iteration reduces the same buckets: the first iteration's records describe all.
  for (const auto& r : group.log().records()) {
    if (r.op == "all_reduce" && r.tag.rfind("ddp bucket", 0) == 0 && m.one_iteration.size() < buckets) {
      m.one_iteration.push_back(r);
    }
  }
  m.expected_per_rank = traffic.expected_epoch_bytes_per_rank(m.one_iteration, iterations, world);
  m.expected_host = m.expected_per_rank * group.local_world_size();
  m.measured_tx = after.tx_bytes - before.tx_bytes;
  m.measured_rx = after.rx_bytes - before.rx_bytes;
  m.seconds_per_iteration = seconds / double(iterations);
  return m;
}

double ratio(const Measurement& m) { return m.expected_host > 0 ? double(m.measured_tx) / m.expected_host : 0.0; }

void print_measurement(const Measurement& m) {
  int64_t bytes = 0;
  for (const auto& r : m.one_iteration) bytes += r.bytes;
  fmt::print("batch={} iterations={} all_reduces_per_iteration={} bytes_per_iteration={} "
             "expected_tx={:.0f} measured_tx={} ratio={:.3f} seconds_per_iteration={:.3f}\n",
             m.global_batch, m.iterations, m.one_iteration.size(), bytes, m.expected_host, m.measured_tx,
             ratio(m), m.seconds_per_iteration);
  std::fflush(stdout);
}

void write_summary(const GlueOptions& o, const train::Run& run, const std::string& interface,
                   const std::vector<Measurement>& measurements) {
  const int ranks_here = run.group->local_world_size();
  fmt::print("\n{:>6} {:>10} {:>16} {:>16} {:>8} {:>10}\n", "batch", "iterations", "expected bytes",
             "measured bytes", "ratio", "s/iter");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& m : measurements) {
    fmt::print("{:>6} {:>10} {:>16.0f} {:>16} {:>8.3f} {:>10.3f}\n", m.global_batch, m.iterations,
               m.expected_host, m.measured_tx, ratio(m), m.seconds_per_iteration);
    rows.push_back(to_json(m));
  }
  fmt::print("expected: iterations x sum over all_reduces of 2 (n-1)/n x bytes, x {} rank(s) on "
             "interface {}; measured: its tx byte counter (headers included)\n", ranks_here, interface);
  const nlohmann::json results = {
      {"schema", "dtlab.results/1"}, {"exercise", run.name},
      {"environment", {{"hostname", train::host_name()}, {"libtorch", TORCH_VERSION},
                       {"libtorch_build", train::libtorch_build()}, {"threads", at::get_num_threads()},
                       {"world_size", run.world()}, {"interface", interface}, {"ranks_on_this_host", ranks_here},
                       {"backend", run.group->backend()}, {"launcher", run.settings.source}}},
      {"config", {{"model_name_or_path", o.model_name_or_path}, {"max_seq_length", o.max_seq_length},
                  {"bucket_cap_mb", o.bucket_cap_mb}, {"seed", o.seed}, {"max_steps", o.max_steps}}},
      {"traffic", rows}};
  io::write_json_file(fs::path(o.output_dir) / "results.json", results);
  fmt::print("results: {}\n", (fs::path(o.output_dir) / "results.json").string());
}

}  // namespace

int traffic_main(int argc, char** argv, const std::string& name, const TrafficModel& traffic) {
  return run_main(name.c_str(), [&]() -> int {
    GlueOptions o;
    std::vector<int> batch_sizes = {64, 32, 16};
    CLI::App app{"dtlab " + name + ": network traffic of data-parallel training, expected vs measured"};
    add_glue_flags(app, o, GlueMode::kDdp);
    app.add_option("--batch_sizes", batch_sizes, "Global batch sizes to measure")->delimiter(',')
        ->capture_default_str();
    if (auto stop = parse_flags(app, argc, argv)) return *stop;
    o.do_train = true;
    train::Run run = train::plan_run(name, &o.launch);
    validate(o);
    // Note [Task 4 on NCCL]: the expected bytes are the ring all_reduce's, 2 (n - 1) / n of each
    // tensor per rank, for Gloo's ring and for NCCL's. NCCL picks its algorithm per size and
    // topology (a tree across nodes, NVLS on NVSwitch machines), so this run asks it for the
    // ring (a NCCL_ALGO the user set is kept). On one host NCCL moves the bytes over NVLink, PCIe
    // or shared memory, which no network interface counts: the measured side is meaningful
    // across hosts, where NCCL's socket transport leaves by the interface the kit reads
    // (NCCL_SOCKET_IFNAME=--interface); InfiniBand bypasses the counters too.
    if (run.settings.backend == "nccl") {
      setenv("NCCL_ALGO", "Ring", /*overwrite=*/0);
      if (o.launch.interface) setenv("NCCL_SOCKET_IFNAME", o.launch.interface->c_str(), /*overwrite=*/0);
    }
    train::start_run(run, dist::init_process_group, o.threads);
    const std::string interface = traffic_interface(o, run);
    const tokenizer::BertTokenizer tokenizer = tokenizer::BertTokenizer::from_pretrained(o.model_name_or_path);
    const data::Features train_set = read_features(o, tokenizer, "train");
    if (run.lead()) {
      fmt::print("dtlab {}: {} ranks ({} on this host), interface {}, model {}, max_seq_length {}\n",
                 name, run.world(), run.group->local_world_size(), interface, o.model_name_or_path,
                 o.max_seq_length);
      fmt::print("  runtime     {}\n", train::describe_runtime());
    }
    std::vector<Measurement> measurements;
    for (int global : batch_sizes) {
      measurements.push_back(measure(o, run, train_set, global, traffic, interface));
      if (run.lead()) print_measurement(measurements.back());
    }
    if (run.lead()) write_summary(o, run, interface, measurements);
    return kExitOk;
  });
}

}  // namespace dtlab::glue
