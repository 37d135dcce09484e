// The GPT-2 translation driver, see lm/run.h: one readable path from flags to results.json.
#include "dtlab/lm/run.h"

#include <CLI/CLI.hpp>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <set>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/dist/broadcast_state.h"
#include "dtlab/data/sampler.h"
#include "dtlab/dist/netdev.h"
#include "dtlab/io/json_file.h"
#include "dtlab/lm/dataset.h"
#include "dtlab/lm/evaluate.h"
#include "dtlab/lm/loss.h"
#include "dtlab/lm/model.h"
#include "dtlab/shard/sharded_trainer.h"
#include "dtlab/mesh/device_mesh.h"
#include "dtlab/model/flops.h"
#include "dtlab/report/process_memory.h"
#include "dtlab/report/tensor_bytes.h"
#include "dtlab/pipeline/gpt2_layout.h"
#include "dtlab/pipeline/stage_schedule.h"
#include "dtlab/pipeline/timeline.h"
#include "dtlab/pipeline/workers.h"
#include "dtlab/report/results.h"
#include "dtlab/train/loop.h"
#include "dtlab/train/rank_dump.h"
#include "dtlab/train/train_order.h"
#include "dtlab/train/runtime.h"

namespace fs = std::filesystem;

namespace dtlab::lm {
namespace {

// readers: the ranks that read different rows (every rank, or the pipelines of stage ranks).
nlohmann::json options_json(const LmOptions& o, int64_t per_rank_batch, int readers) {
  return {{"model_name_or_path", o.model_name_or_path},
          {"model_config", o.model_config},
          {"n_layer", o.n_layer ? nlohmann::json(*o.n_layer) : nlohmann::json()},
          {"tokenizer_dir", tokenizer_folder(o)},
          {"data_dir", o.data_dir},
          {"output_dir", o.output_dir},
          {"per_rank_train_batch_size", per_rank_batch},
          {"global_train_batch_size", per_rank_batch * readers},
          {"max_length", o.max_length},
          {"learning_rate", o.learning_rate},
          {"weight_decay", o.weight_decay},
          {"warmup_steps", o.warmup_steps},
          {"max_grad_norm", o.max_grad_norm},
          {"num_epochs", o.num_epochs},
          {"max_steps", o.max_steps},
          {"seed", o.seed},
          {"dropout", o.dropout ? nlohmann::json(*o.dropout) : nlohmann::json()},
          {"eval_batch_size", o.eval_batch_size},
          {"bleu_examples", o.bleu_examples},
          {"max_new_tokens", o.max_new_tokens}};
}

// The global batch is split evenly over the ranks: it stays fixed as ranks are added.
int64_t batch_per_rank(const LmOptions& o, int world) {
  if (!o.global_batch_size) return o.per_device_batch_size;
  if (*o.global_batch_size % world != 0) {
    throw Error("--global_batch_size " + std::to_string(*o.global_batch_size) +
                " is not divisible by the world size " + std::to_string(world));
  }
  return *o.global_batch_size / world;
}

// The three splits: training and validation rows tokenised once; the test pairs BLEU translates.
struct LmData {
  data::LmExamples train, validation;
  std::vector<data::TranslationPair> test;
};

LmData read_data(const LmOptions& o, const tokenizer::Gpt2Tokenizer& tokenizer, const LmTokenIds& ids) {
  LmData d;
  d.train = encode_pairs(data::read_translation_split(o.data_dir, "train"), tokenizer, ids, o.max_length);
  if (o.no_eval) return d;
  d.validation = encode_pairs(data::read_translation_split(o.data_dir, "validation"), tokenizer, ids,
                              o.max_length);
  if (o.bleu_examples != 0) {
    d.test = data::read_translation_split(o.data_dir, "test");
    if (o.bleu_examples > 0 && o.bleu_examples < static_cast<int64_t>(d.test.size())) {
      d.test.resize(static_cast<size_t>(o.bleu_examples));
    }
  }
  return d;
}

// The grid an exercise splits the model or the sequence over (tp, cp, mesh), or whose trainer is
// its own (precision: a data-parallel grid of one axis), or null.
const GridParts* split_over_grid(const LmExercise& ex) {
  if (ex.tensor_parallel) return &*ex.tensor_parallel;
  if (ex.context_parallel) return &*ex.context_parallel;
  if (ex.mesh) return &*ex.mesh;
  if (ex.precision) return &*ex.precision;
  return nullptr;
}

// FSDP from a checkpoint: each rank reads its own pieces (shard/sharded_trainer.h).
bool fsdp_reads_pieces(const LmOptions& o, const LmExercise& ex) {
  return ex.sharded && o.zero_stage == 3 && o.model_config.empty();
}

// The model on every rank and how its gradients travel. A data-parallel run starts every rank
// from rank 0's weights (the kit's part: ranks that drew different ones would never agree).
// data: the mesh's data group (data-parallel exercises), else null.
std::unique_ptr<train::GradientSync> build_model(const LmOptions& o, const LmExercise& ex,
                                                 train::Run& run, dist::Group* data,
                                                 const tokenizer::Gpt2Tokenizer& tokenizer,
                                                 const LmTokenIds& ids, LmTrainState& state,
                                                 model::LoadReport& report) {
  // Note [Reading only what a rank keeps]: an FSDP rank reads its pieces of the checkpoint itself
  // (ShardedTrainer), never the whole.
  state.model = load_model(o, tokenizer, ids, &report, fsdp_reads_pieces(o, ex) ? Weights::kLater : Weights::kWhole);
  state.module = state.model.ptr();
  state.module->to(run.device);  // the pipeline places its stages itself (pipeline::place_layers)
  // Data parallel: the loss of each rank is its share of the union's (Note [Data-parallel loss]).
  state.loss = translation_loss(state.model, data);
  std::unique_ptr<train::GradientSync> sync = train::no_sync();
  // Stages as ranks and tensor parallelism: each rank keeps its part of rank 0's model.
  if ((ex.stage_ranks || split_over_grid(ex)) && run.group) dist::broadcast_module_state(*state.module, *run.group);
  if (ex.data_parallel) {
    // Sharded ranks drew or read alike and prove it for a few bytes (ShardedTrainer's
    // check_same_start): a broadcast would hold a flat copy of the whole model on every rank.
    if (!ex.sharded) dist::broadcast_module_state(*state.module, *data);
    sync = train::sync_after_backward(ex.data_parallel->average_gradients, *state.module, *data,
                                      "average_gradients");
  }
  torch::manual_seed(o.seed);  // dropout draws the same on every rank
  return sync;
}

// What this rank reads: a data-parallel exercise's share, read in order; with --train_order
// that order of the whole set; otherwise the whole set, shuffled afresh every epoch.
struct Reading {
  RankShare share;
  bool shuffle = false;
};

// Every rank must take the same number of steps in an epoch: a rank with one more would wait at
// its last all_reduce for ranks that have moved on. One all_reduce before the first step makes
// uneven shares an error that names the ranks instead of a hang.
void check_equal_steps(train::Run& run, const RankShare& share) {
  const int world = run.world();
  torch::Tensor t = torch::zeros({2, world}, torch::kFloat64);
  t[0][run.rank()] = static_cast<double>(share.data->size());
  t[1][run.rank()] = static_cast<double>(share.batch_size);
  run.group->all_reduce(t, dist::ReduceOp::SUM, "partition sizes");
  std::string ranks;
  std::set<int64_t> steps;
  for (int r = 0; r < world; ++r) {
    const auto size = static_cast<int64_t>(t[0][r].item<double>());
    const auto batch = static_cast<int64_t>(t[1][r].item<double>());
    const int64_t n = batch > 0 ? (size + batch - 1) / batch : -1;
    steps.insert(n);
    ranks += fmt::format("{}rank {}: {} examples, {} per step: {} steps", r ? "; " : "", r, size, batch, n);
  }
  if (steps.size() > 1 || *steps.begin() <= 0) {
    throw Error(fmt::format("the ranks' partitions give different numbers of steps per epoch (or none): a rank "
                            "with more steps would wait for ever at an all_reduce the others never call. "
                            "partition_dataset must give every rank an equal part (fraction 1 / world size) "
                            "and batch_size / world_size examples per step. {}", ranks));
  }
}

Reading rank_reading(const LmOptions& o, const LmExercise& ex, train::Run& run, dist::Group* data,
                     const train::Dataset& all) {
  if (ex.data_parallel) {
    const int64_t global = batch_per_rank(o, run.world()) * run.world();
    RankShare share = ex.data_parallel->partition(all, *data, global, o.seed);
    if (!share.data) throw Error(ex.name + ": the partition holds no data set (a bug of the driver)");
    if (static_cast<int64_t>(share.indices.size()) != share.data->size()) {
      throw Error(fmt::format("rank {}: the partition holds {} indices but its size() is {}: a partition has as "
                              "many examples as indices", run.rank(), share.indices.size(), share.data->size()));
    }
    check_equal_steps(run, share);
    return {std::move(share), false};
  }
  if (!o.train_order.empty()) {
    std::vector<int64_t> order = train::read_train_order(o.train_order, all.size());
    auto view = std::make_shared<train::OrderedExamples>(all, order);
    return {{std::move(view), std::move(order), o.per_device_batch_size}, false};
  }
  std::vector<int64_t> identity(static_cast<size_t>(all.size()));
  std::iota(identity.begin(), identity.end(), 0);
  // Not owned: `all` outlives the reading.
  std::shared_ptr<const train::Dataset> whole(&all, [](const train::Dataset*) {});
  return {{std::move(whole), std::move(identity), o.per_device_batch_size}, true};
}

void add_optimizer(train::TrainState& state, const LmOptions& o, int64_t total_steps) {
  state.max_grad_norm = o.max_grad_norm;
  state.optimizer = train::make_adamw(*state.module, {o.learning_rate, o.weight_decay});
  state.scheduler = std::make_unique<train::LinearWarmupSchedule>(*state.optimizer, o.warmup_steps, total_steps);
}

void print_samples(const std::vector<Translation>& translations, int samples) {
  for (size_t i = 0; i < translations.size() && static_cast<int>(i) < samples; ++i) {
    fmt::print("sample {}: source     {}\n          reference  {}\n          translated {}\n", i + 1,
               translations[i].source, translations[i].reference, translations[i].hypothesis);
  }
  std::fflush(stdout);
}

// readers: the ranks whose minibatches differ (every rank; with stages as ranks, the pipelines,
// whose stage ranks read the same rows; with tensor parallelism, the data-parallel replicas);
// reader: what one of them is called ("rank", "pipeline", "replica").
void print_banner(const LmOptions& o, const train::Run& run, const LmTrainState& state,
                  const train::LoopPlan& plan, const tokenizer::Gpt2Tokenizer& tokenizer,
                  const LmData& d, int64_t rank_examples, const std::string& load_notice, int readers,
                  const std::string& reader) {
  const bool shared_rows = reader != "rank";
  const model::Gpt2Config& c = state.model->config();
  fmt::print("dtlab {}\n", run.name);
  fmt::print("  model       {} (L{} H{} A{}, vocab {}, positions {}, {:.2f}M parameters)\n",
             o.model_config.empty() ? o.model_name_or_path : o.model_config + " (random weights)",
             c.n_layer, c.n_embd, c.n_head, c.vocab_size, c.n_positions,
             count_parameters(*state.model) / 1e6);
  fmt::print("  tokenizer   {} ({} tokens)\n", tokenizer_folder(o), tokenizer.vocab_size());
  fmt::print("  data        {}: {} train pairs ({} rows cut at max_length {}); {}\n", o.data_dir, d.train.size(),
             d.train.truncated, o.max_length,
             o.no_eval ? std::string("no evaluation (--no_eval)")
                       : fmt::format("{} validation pairs, BLEU on {} test pairs", d.validation.size(), d.test.size()));
  fmt::print("  training    batch {} x {} {}{} = {}, {} epochs, {} steps, AdamW lr {:g} wd {:g}, "
             "warmup {}, clip {:g}, dropout {}\n",
             plan.batch_per_rank, readers, reader, readers == 1 ? "" : "s",
             plan.batch_per_rank * readers, plan.epochs, plan.total_steps, o.learning_rate, o.weight_decay,
             o.warmup_steps, o.max_grad_norm, o.dropout ? fmt::format("{:g}", *o.dropout) : "from the config");
  if (run.group) {
    fmt::print("  ranks       {}\n", run.describe_ranks());
    if (shared_rows) {
      fmt::print("  partition   each {}'s ranks read the same rows: 1/{} of the {} training pairs, shuffled "
                 "every epoch\n", reader, readers, d.train.size());
    } else {
      fmt::print("  partition   rank 0 reads {} of the {} training pairs, in the same order every epoch\n",
                 rank_examples, d.train.size());
    }
  }
  fmt::print("  runtime     {}\n", train::describe_runtime());
  std::fputs(load_notice.c_str(), stdout);
  std::fflush(stdout);
}

// "pipeline   2 stages x 4 micro-batches: stage 0 = embeddings .. block 1, stage 1 = block 2 .. head"
void print_pipeline(const std::vector<int>& devices, int micro_batches) {
  const int stages = devices.empty() ? 0 : devices.back() + 1;
  const auto name = [&](size_t layer) {
    return pipeline::gpt2_layer_name(static_cast<int64_t>(layer), static_cast<int64_t>(devices.size()));
  };
  std::string layout;
  for (size_t first = 0; first < devices.size();) {
    size_t last = first;
    while (last + 1 < devices.size() && devices[last + 1] == devices[first]) ++last;
    layout += fmt::format("{}stage {} = {}{}", first ? ", " : "", devices[first], name(first),
                          last > first ? " .. " + name(last) : "");
    first = last + 1;
  }
  fmt::print("  pipeline    {} stages x {} micro-batch{}: {}; each stage a thread with {} intra-op thread(s)\n", stages,
             micro_batches, micro_batches == 1 ? " (model parallel)" : "es", layout,
             pipeline::default_threads_per_stage(stages));
  std::fflush(stdout);
}

// "stages      2 x 1f1b, 4 micro-batches, 2 pipelines (data parallel): stage 0 = ranks 0, 2: embeddings .. block 1; ..."
void print_stage_grid(const pipeline::StageGrid& g) {
  std::string layout;
  const auto layers = static_cast<int64_t>(g.layer_stages.size());
  for (int s = 0; s < g.stages; ++s) {
    int64_t first = -1, last = -1;
    for (int64_t l = 0; l < layers; ++l) {
      if (g.layer_stages[static_cast<size_t>(l)] != s) continue;
      if (first < 0) first = l;
      last = l;
    }
    std::vector<int> ranks;
    for (int p = 0; p < g.pipelines; ++p) ranks.push_back(g.rank_of(p, s));
    layout += fmt::format("{}stage {} = rank{} {}: {}{}", s ? "; " : "", s, ranks.size() > 1 ? "s" : "",
                          fmt::join(ranks, ", "), pipeline::gpt2_layer_name(first, layers),
                          last > first ? " .. " + pipeline::gpt2_layer_name(last, layers) : "");
  }
  fmt::print("  stages      {} stage ranks x {} micro-batch{}, schedule {}, {} pipeline{}{}: {}\n", g.stages,
             g.micro_batches, g.micro_batches == 1 ? "" : "es", pipeline::schedule_kind_name(g.schedule), g.pipelines,
             g.pipelines == 1 ? "" : "s", g.pipelines > 1 ? " (data parallel)" : "", layout);
  fmt::print("  mesh        {}\n", g.layout.describe());
  std::fflush(stdout);
}

// "throughput: 10210 tokens/s, 58.5 ms/step (7 steps, the first discarded); pipeline bubble 0.35
// (GPipe's (n-1)/(m+n-1) = 0.20)": the line `make pipeline` puts side by side.
void print_throughput(const nlohmann::json& results, int micro_batches) {
  std::string line = report::throughput_line(results);
  if (line.empty()) return;
  if (results.contains("pipeline")) {
    const auto& p = results.at("pipeline");
    const int n = p.value("stages", 1);
    line += fmt::format("; {} stages x {} micro-batches: bubble {:.2f} (GPipe's (n-1)/(m+n-1) = {:.2f})", n,
                        micro_batches, p.value("mean_bubble_fraction", 0.0),
                        pipeline::ideal_bubble_fraction(micro_batches, n));
  }
  fmt::print("{}\n", line);
  if (results.contains("sharding")) {
    // What sharding saved and what it cost on the wire (rank 0's; Note [Bytes of a sharded step]).
    const auto& z = results.at("sharding");
    const double mb = 1e-6, whole = z.value("whole_bytes", 0.0);
    fmt::print("sharding: {} at {} ranks, rank 0 held at most {:.2f} MB of gradient and {:.2f} MB of parameters "
               "(the model is {:.2f} MB), {:.2f} MB of AdamW state; sent {:.2f} MB a step ({:.2f} predicted: {} x "
               "(N-1)/N of the model)\n",
               z.value("strategy", std::string()), z.value("world_size", 1), mb * z.value("peak_gradient_bytes", 0.0),
               mb * z.value("peak_parameter_bytes", 0.0), mb * whole, mb * z.value("optimizer_state_bytes", 0.0),
               mb * z.value("bytes_sent_per_step", 0.0), mb * z.value("predicted_bytes_sent_per_step", 0.0),
               z.value("stage", 1) == 3 ? 3 : 2);
  }
  if (results.contains("context_parallel")) {
    // What the ring sent (Note [Bytes of a context-parallel step] in cp/cp_trainer.h) and held.
    const auto& c = results.at("context_parallel");
    const auto& sent = c.at("ring_bytes_sent_per_step");
    const auto& peaks = c.at("step_peak_tensor_bytes");
    fmt::print("context parallel: CP {} x DP {} ({}), rank 0 sent {:.2f} MB a step over its context group ({:.2f} "
               "predicted: (3N - 2) x 8 x B x 2c x C x L) and held at most {:.2f} MB of tensors in a step\n",
               c.value("cp", 1), c.value("dp", 1), c.value("layout", std::string()),
               1e-6 * (sent.empty() ? 0.0 : sent.at(0).get<double>()), 1e-6 * c.value("predicted_ring_bytes_per_step", 0.0),
               1e-6 * (peaks.empty() ? 0.0 : peaks.at(0).get<double>()));
  }
  if (results.contains("tensor_parallel")) {
    // What the split saved and what it cost (Note [Bytes of a tensor-parallel step] in tp/tp_trainer.h).
    const auto& t = results.at("tensor_parallel");
    const double mb = 1e-6;
    const auto& held = t.at("parameter_bytes");
    fmt::print("tensor parallel: TP {} x DP {}, rank 0 held {:.2f} MB of parameters (the model is {:.2f} MB); its "
               "tensor group all-reduced {:.2f} MB a step ({:.2f} predicted: (4L + 2) x B x T x H floats + the loss's "
               "3 x B x T), its data group {:.2f} MB\n",
               t.value("tp", 1), t.value("dp", 1), mb * (held.empty() ? 0.0 : held.at(0).get<double>()),
               mb * t.value("whole_bytes", 0.0), mb * t.value("tp_bytes_per_step", 0.0),
               mb * t.value("predicted_tp_bytes_per_step", 0.0), mb * t.value("dp_bytes_per_step", 0.0));
  }
}

}  // namespace

RankShare equal_shares(const train::Dataset& all, const dist::Group& group, int64_t global_batch, uint64_t seed) {
  const int world = group.size();
  const int64_t part = all.size() / world;
  const std::vector<int64_t> order = data::shuffled_indices(all.size(), seed);
  std::vector<int64_t> mine(order.begin() + group.rank() * part, order.begin() + (group.rank() + 1) * part);
  auto view = std::make_shared<train::OrderedExamples>(all, mine);
  return {std::move(view), std::move(mine), std::max<int64_t>(1, global_batch / world)};
}

int run_lm(const LmOptions& o, const LmExercise& ex) {
  // Every run measures the tensors it holds from the start (results.json's "memory" beside the
  // resident set; the zero exercise's memory, tp's largest tensor, the precision exercise's blocks).
  report::TensorBytes::install();
  // Who this process is. Flags are checked before any rank waits for another.
  const bool ranks = ex.data_parallel || ex.stage_ranks || split_over_grid(ex);
  train::Run run = train::plan_run(ex.name, ranks ? &o.launch : nullptr);
  validate(o);
  if (run.settings.rank == 0 && fs::is_directory(o.output_dir) && !fs::is_empty(o.output_dir) &&
      !o.overwrite_output_dir) {
    throw Error("--output_dir " + o.output_dir + " already exists and is not empty: use "
                "--overwrite_output_dir to overwrite it");
  }
  train::SetupFunction setup = ex.data_parallel ? ex.data_parallel->setup : nullptr;
  if (ex.stage_ranks || split_over_grid(ex)) setup = dist::init_process_group;  // the kit joins the ranks
  train::start_run(run, setup, o.threads);
  // The data-parallel exercises' mesh: one data axis, the world (mesh/device_mesh.h); tp's and pp's
  // are their grids'.
  std::optional<mesh::DeviceMesh> data_mesh;
  if (ex.data_parallel && run.group) data_mesh.emplace(*run.group, mesh::MeshShape({{mesh::kData, run.world()}}));

  // Tokenizer and data, tokenised once; then the model and how its gradients travel.
  const tokenizer::Gpt2Tokenizer tokenizer = load_tokenizer(o);
  const LmTokenIds ids = lm_token_ids(tokenizer, tokenizer_folder(o));
  const LmData d = read_data(o, tokenizer, ids);
  LmTrainState state;
  model::LoadReport load_report;
  run.after_startup = report::read_process_memory();  // Note [Memory a rank holds]: the data read, no model yet
  const std::unique_ptr<train::GradientSync> sync =
      build_model(o, ex, run, data_mesh ? &data_mesh->group(mesh::kData) : nullptr, tokenizer, ids, state, load_report);

  const LmDataset all(d.train);
  const Reading reading = rank_reading(o, ex, run, data_mesh ? &data_mesh->group(mesh::kData) : nullptr, all);
  const RankShare& share = reading.share;
  // Stages as ranks: every stage of a pipeline reads the same rows; the pipelines share the data
  // set as data-parallel ranks do (the sampler's shards).
  std::optional<pipeline::StageGrid> grid;
  if (ex.stage_ranks) {
    grid = pipeline::plan_stage_grid(run.world(), run.rank(), o.stages, o.micro_batches,
                                     pipeline::parse_schedule_kind(o.schedule),
                                     pipeline::gpt2_layer_devices(state.model, o.stages, o.balance));
    grid->action_sleep = std::chrono::milliseconds(o.stage_sleep_ms);
  }
  // Tensor and context parallelism: the model or the sequence split over a grid (tp/tp_trainer.h,
  // cp/cp_trainer.h); the replicas read as pipelines do, each replica's ranks the same rows.
  std::unique_ptr<GridTrainer> split;
  if (const GridParts* parts = split_over_grid(ex)) split = parts->make(state.model, *run.group, o);
  const int replicas = grid ? grid->pipelines : split ? split->replicas() : 1;
  // The ranks whose minibatches differ: the global batch is batch_per_rank times this.
  const int readers = grid || split ? replicas : run.world();
  train::LoopPlan plan;
  plan.batch_per_rank = grid || split ? batch_per_rank(o, replicas) : share.batch_size;
  plan.sampler = {share.data->size(), replicas, grid ? grid->pipeline : split ? split->replica() : 0, reading.shuffle,
                  o.seed};
  train::plan_steps(plan, share.data->size(), replicas, o.num_epochs, o.max_steps);
  // A pipeline's stage ranks, a replica's TP ranks, read the same rows.
  plan.ranks_per_batch = grid ? grid->stages : split ? split->ranks_per_replica() : 1;
  plan.evaluate = !o.no_eval;
  plan.log_first_steps = o.log_first_steps;
  plan.progress_seconds = o.progress_seconds;
  if (o.profile) plan.profile_dir = o.output_dir;
  if (split) state.module = split->module();  // the optimiser steps this rank's parts
  add_optimizer(state, o, plan.total_steps);
  if (split) {
    if (auto sharded_optimizer = split->make_optimizer({o.learning_rate, o.weight_decay})) {
      state.optimizer = std::move(sharded_optimizer);  // the mesh's ZeRO-1: this rank's piece
      state.scheduler = std::make_unique<train::LinearWarmupSchedule>(*state.optimizer, o.warmup_steps, plan.total_steps);
    }
  }
  // Sharded (zero): the units, AdamW on this rank's pieces, the student's strategy (shard/sharded_trainer.h).
  std::unique_ptr<shard::ShardedTrainer> sharded;
  if (ex.sharded) {
    sharded = std::make_unique<shard::ShardedTrainer>(state.model, data_mesh->group(mesh::kData), o.zero_stage,
                                               ex.sharded->make_strategy,
                                               fsdp_reads_pieces(o, ex) ? fs::path(o.model_name_or_path) : fs::path());
    state.optimizer = sharded->make_optimizer({o.learning_rate, o.weight_decay});
    state.forward_reading = [&sharded] { return sharded->gather_finding(); };
    state.scheduler = std::make_unique<train::LinearWarmupSchedule>(*state.optimizer, o.warmup_steps, plan.total_steps);
  }
  const EvalInputs eval{state.model, &tokenizer, ids, &d.validation, &d.test, o.eval_batch_size,
                        TranslateOptions{o.eval_batch_size, o.max_length, o.max_new_tokens}};
  std::unique_ptr<pipeline::StageRankTrainer> stage_trainer;
  if (grid) {
    // The interface whose counters measure the stage ranks' traffic (Note [Bytes of a stage rank]).
    const std::string interface =
        run.world() > 1 ? dist::interface_towards(run.settings.master_addr, run.settings.master_port,
                                                  run.settings.interface)
                        : "";
    stage_trainer =
        std::make_unique<pipeline::StageRankTrainer>(*ex.stage_ranks, *grid, state.model, *run.group, interface);
  }
  state.evaluate = [&] {
    if (stage_trainer) stage_trainer->gather_model();  // each rank trained only its stage
    if (split) split->gather_model();                  // each rank trained only its slices
    if (sharded) sharded->gather_whole();  // FSDP: evaluated whole
    std::vector<Translation> translations;
    const train::EvalResult r = evaluate_translation(eval, run.group.get(), &translations);
    if (sharded) sharded->release_whole();
    if (split) split->release_model();
    if (run.lead()) print_samples(translations, o.samples);
    return r;
  };

  nlohmann::json config = options_json(o, plan.batch_per_rank, readers);
  config["train_pairs"] = d.train.size();
  config["pairs_per_rank"] = share.data->size();  // rank 0's part (data parallel), else the whole set
  report::Results results(ex.name, std::move(config), run.environment());
  const fs::path results_path = fs::path(o.output_dir) / "results.json";
  if (run.lead()) {
    const std::string notice = o.model_config.empty() ? load_report.describe(o.model_name_or_path) : "";
    print_banner(o, run, state, plan, tokenizer, d, share.data->size(), notice, readers,
                 grid ? "pipeline" : split ? "replica" : "rank");
    if (data_mesh) {
      fmt::print("  mesh        {}\n", data_mesh->layout().describe());
    }
  }
  // The pipeline exercise: the same model, its forward and backward run by the student's Pipe.
  std::optional<PipelinedModel> pipelined;
  PipelineStats pipeline_stats;
  nlohmann::json pipeline_config;
  if (ex.pipeline && o.stages > 1) {
    const std::vector<int> devices = pipeline::gpt2_layer_devices(state.model, o.stages, o.balance);
    pipeline::place_layers(state.model, devices);  // each layer on its GPU, where CUDA is present
    pipelined = ex.pipeline->prepare(state.model, devices, o.micro_batches);
    pipeline_config = {{"stages", o.stages}, {"micro_batches", o.micro_batches}, {"layer_devices", devices}};
    if (run.lead()) print_pipeline(devices, o.micro_batches);
  }
  train::StepFunction step = pipelined ? pipeline_step(*pipelined, pipeline_stats) : train::kit_step(*sync);
  if (sharded) step = sharded->step();
  if (stage_trainer) {
    step = pipeline::stage_rank_step(*stage_trainer);
    if (run.lead()) print_stage_grid(*grid);
  }
  if (split) {
    step = [&split](train::TrainState& s, const train::StepInput& input) { return split->step(s, input); };
    if (run.lead()) fmt::print("{}\n", split->describe());
  }
  if (!o.dump_dir.empty()) {
    if (pipelined) throw Error("--dump_dir is for the exercises with ranks, not with --stages > 1 in one process");
    std::vector<int64_t> epoch1 = data::shard_indices(plan.sampler, 0);
    for (int64_t& row : epoch1) row = share.indices.at(static_cast<size_t>(row));
    train::RankDumpPlan dump{o.dump_dir, 1, run.rank(), run.world(), plan.batch_per_rank * readers, std::move(epoch1),
                             share.indices};
    if (sharded) {
      step = sharded->step(std::move(dump));  // the gradient assembled from the pieces
    } else if (stage_trainer) {
      stage_trainer->dump_at(std::move(dump));  // each stage rank: its stage's gradients
    } else if (split) {
      split->dump_at(std::move(dump));  // each rank: its slices' gradients
    } else {
      step = train::step_with_rank_dumps(*sync, std::move(dump));
    }
  }
  train::train_loop(run, state, *share.data, plan, step,
                    [](train::TrainState& s, int) { return s.evaluate(); }, results, results_path);
  if (pipelined) {
    nlohmann::json section = pipeline_stats.summary();
    section.update(pipeline_config);
    results.set_section("pipeline", section);
  }
  if (stage_trainer) {
    stage_trainer->gather_model();  // rank 0 saves the whole model
    results.set_section("pp", stage_trainer->summary());
  }
  if (split) {
    split->gather_model();  // rank 0 saves the whole model
    results.set_section(split->section(), split->summary());
  }
  if (sharded) {
    // What this rank holds (rank 0's, in its results.json).
    results.set_section("sharding", sharded->summary(*state.optimizer, ex.sharded->describe(o.zero_stage)));
    if (!o.no_save) sharded->gather_whole();  // every rank takes part; rank 0 saves the whole model
  }
  // Every rank's resident memory (a collective, after the summaries read the logs).
  results.set_section("memory", train::memory_section(run));
  // Model FLOPs utilisation against the ranks' measured peak (a collective).
  const model::Gpt2Config model_config = state.model->config();
  results.set_section("compute", train::compute_section(run, [&model_config](double sequence) {
    return model::gpt2_training_flops_per_token(model_config, sequence);
  }, results.to_json().at("timing")));
  if (run.lead()) {
    results.save(results_path);
    print_throughput(results.to_json(), o.micro_batches);
    fmt::print("{}\n", train::memory_line(results.to_json().at("memory")));
    if (const std::string line = train::compute_line(results.to_json().at("compute")); !line.empty()) {
      fmt::print("{}\n", line);
    }
    if (!o.no_save) save_model_folder(state.model, tokenizer_folder(o), o.output_dir);
    fmt::print("results: {}\n", results_path.string());
  }
  return kExitOk;
}

int lm_main(int argc, char** argv, const LmExercise& exercise) {
  // Note [Keeping freed memory]: not where the lesson is the memory a rank frees (zero's units,
  // tp's slices), whose resident set must show what it gives back.
  const bool keep_memory = !exercise.sharded && !split_over_grid(exercise);
  return run_main(exercise.name.c_str(), [&]() -> int {
    LmOptions options;
    CLI::App app{"dtlab " + exercise.name + ": train GPT-2 to translate German->English as a "
                 "language model, evaluated by loss, perplexity and BLEU"};
    add_lm_flags(app, options, exercise.data_parallel || exercise.stage_ranks || split_over_grid(exercise));
    if (exercise.pipeline) add_pipeline_flags(app, options);
    if (exercise.stage_ranks) add_stage_rank_flags(app, options);
    if (exercise.sharded) {
      app.add_option("--zero_stage", options.zero_stage,
                     "What is sharded: 1 the optimiser's state (ZeRO-1), 2 and the gradients (ZeRO-2), 3 and the "
                     "parameters (FSDP); 0 nothing, the kit's replicated baseline they are measured against")
          ->check(CLI::IsMember({0, 1, 2, 3}));
    }
    if (exercise.tensor_parallel) {
      app.add_option("--tp", options.tp,
                     "Ranks of one tensor-parallel group (each holds 1/TP of every large weight); the world size must "
                     "be a multiple: TP x DP, the DP groups data parallel");
    }
    if (exercise.context_parallel) add_context_parallel_flags(app, options);
    if (exercise.mesh) add_mesh_flags(app, options);
    if (exercise.precision) add_precision_flags(app, options);
    if (exercise.probe) {
      app.add_option("--probe", options.probe, "Grading aid: run the named probe of the exercise instead of training");
    }
    if (auto stop = parse_flags(app, argc, argv)) return *stop;
    validate_counts(options);  // the probes too read them
    // A probe takes --threads as a training run does (train::make_run sets it there). Without
    // this the grader's `--threads 1` was lost on every probe: LibTorch's default team (all the
    // cores) forked on each kernel, and its idle OpenMP threads spun beside the other runs (the
    // pipeline's transparency probe: 1.3 CPUs busy on 2.15; on 1.13 3.1 s of wall, 1.0 s after).
    if (!options.probe.empty() && options.threads > 0) train::configure_threads(options.threads);
    if (exercise.pipeline && !options.probe.empty()) return exercise.pipeline->probe(options);
    if (exercise.stage_ranks && !options.probe.empty()) return exercise.stage_ranks->probe(options);
    if (exercise.probe && !options.probe.empty()) return exercise.probe(options);
    return run_lm(options, exercise);
  }, keep_memory);
}

}  // namespace dtlab::lm
