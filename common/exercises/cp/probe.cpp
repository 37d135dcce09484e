// cp --probe attention | ring: grading aids that call the student's attention on inputs the kit
// draws and record what it returned and what it cost, for grader/checks_cp.cpp to judge against an
// attention the grader computes itself in double. They record; the grader decides.
//
// attention (one process): block_attention and its backward at odd lengths, block sizes that do
// not divide them, offset spans and queries that see no key; merge_partials of two pieces of one
// case's keys; and the bytes block_attention holds at T = 1024 for two block sizes (the counting
// allocator, report/tensor_bytes.h). Writes OUTPUT_DIR/attention.safetensors and results.json.
//
// ring (N ranks): every rank draws the same whole q, k, v and dout, keeps its chunks (the student's
// chunks_of_rank, balanced), and runs the kit's ring attention Function forward and backward;
// once to warm up, then three times: the outputs and gradients of its positions
// (rankR.safetensors), the bytes its tensors allocated in all (the counting allocator: the volume
// of its work), its thread's CPU seconds (and the least of the three rounds), its sends' bytes,
// and how much of its forward's CPU time ran while a receive was in flight (Note [Overlap from the
// log]). Rank 0 writes results.json.
#include <fmt/format.h>
#include <time.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <chrono>
#include <functional>
#include <iterator>
#include <limits>
#include <filesystem>
#include <vector>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/cp/block_attention.h"
#include "dtlab/cp/cp_trainer.h"
#include "dtlab/cp/gpt2_cp.h"
#include "dtlab/cp/ring_attention.h"
#include "dtlab/dist/group.h"
#include "dtlab/io/json_file.h"
#include "dtlab/io/safetensors.h"
#include "dtlab/lm/loss.h"
#include "dtlab/lm/options.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/report/process_memory.h"
#include "dtlab/report/tensor_bytes.h"
#include "dtlab/tasks/cp.h"
#include "dtlab/train/optimizer.h"
#include "dtlab/train/run.h"
#include "dtlab/train/step.h"
#include "dtlab/train/train_state.h"

namespace fs = std::filesystem;

namespace dtlab::cp {
namespace {

struct Case {
  const char* name;
  int64_t batch, heads, dim, tq, tk, block, q_start, k_start;
  bool causal;
};

// Odd lengths, blocks that do not divide them, queries after the keys (A), on the diagonal (B), no
// mask (C), and queries of which the first ten see no key at all (D: output 0, lse -inf).
constexpr Case kCases[] = {
    {"A", 2, 3, 16, 37, 53, 8, 16, 0, true},
    {"B", 1, 2, 8, 29, 29, 5, 0, 0, true},
    {"C", 1, 2, 8, 19, 31, 7, 0, 0, false},
    {"D", 1, 2, 8, 24, 40, 16, 0, 10, true},
};
constexpr int64_t kMergeCut = 20;  // case A's keys [0, 20) and [20, 53), merged
constexpr int64_t kMemoryLength = 1024;
constexpr int64_t kMemoryBlocks[] = {32, 64};

double scale_of(int64_t dim) { return 1.0 / std::sqrt(double(dim)); }

nlohmann::json attention_probe(const fs::path& out) {
  report::TensorBytes& meter = report::TensorBytes::install();  // before any tensor: it counts them all
  torch::manual_seed(20261129);
  io::TensorMap tensors;
  nlohmann::json cases = nlohmann::json::array();
  for (const Case& c : kCases) {
    const torch::Tensor q = torch::randn({c.batch, c.heads, c.tq, c.dim});
    const torch::Tensor k = torch::randn({c.batch, c.heads, c.tk, c.dim});
    const torch::Tensor v = torch::randn({c.batch, c.heads, c.tk, c.dim});
    const torch::Tensor dout = torch::randn({c.batch, c.heads, c.tq, c.dim});
    const Span span{c.q_start, c.k_start, c.causal};
    const double scale = scale_of(c.dim);
    const Partial p = block_attention(q, k, v, scale, span, c.block);
    const Gradients g = block_attention_backward(q, k, v, p.out, p.lse, dout, scale, span, c.block);
    const std::string n = c.name;
    for (const auto& [key, t] : std::vector<std::pair<std::string, torch::Tensor>>{
             {"q", q}, {"k", k}, {"v", v}, {"dout", dout}, {"out", p.out}, {"lse", p.lse},
             {"dq", g.dq}, {"dk", g.dk}, {"dv", g.dv}}) {
      tensors[n + "." + key] = t.defined() ? t.contiguous() : torch::Tensor();
    }
    cases.push_back({{"name", n}, {"block", c.block}, {"q_start", c.q_start}, {"k_start", c.k_start},
                     {"causal", c.causal}, {"scale", scale}});
  }
  // merge_partials of case A's two pieces of keys.
  {
    const Case& c = kCases[0];
    const torch::Tensor &q = tensors["A.q"], &k = tensors["A.k"], &v = tensors["A.v"];
    const double scale = scale_of(c.dim);
    const Partial first = block_attention(q, k.narrow(2, 0, kMergeCut), v.narrow(2, 0, kMergeCut), scale,
                                          {c.q_start, c.k_start, c.causal}, c.block);
    const Partial second = block_attention(q, k.narrow(2, kMergeCut, c.tk - kMergeCut),
                                           v.narrow(2, kMergeCut, c.tk - kMergeCut), scale,
                                           {c.q_start, c.k_start + kMergeCut, c.causal}, c.block);
    const Partial merged = merge_partials(first, second);
    tensors["merge.out"] = merged.out.contiguous();
    tensors["merge.lse"] = merged.lse.contiguous();
  }
  io::save_safetensors(out / "attention.safetensors", tensors);

  // The bytes held above the inputs while the forward runs (the result included) and while the
  // backward runs (its gradients included), at T = 1024, causal.
  nlohmann::json memory = nlohmann::json::array();
  for (const int64_t block : kMemoryBlocks) {
    const int64_t b = 1, h = 2, d = 32, t = kMemoryLength;
    const torch::Tensor q = torch::randn({b, h, t, d}), k = torch::randn({b, h, t, d}), v = torch::randn({b, h, t, d});
    const torch::Tensor dout = torch::randn({b, h, t, d});
    meter.reset_peak();
    int64_t base = meter.current();
    const Partial p = block_attention(q, k, v, scale_of(d), {0, 0, true}, block);
    const int64_t forward = meter.peak() - base;
    meter.reset_peak();
    base = meter.current();
    (void)block_attention_backward(q, k, v, p.out, p.lse, dout, scale_of(d), {0, 0, true}, block);
    const int64_t backward = meter.peak() - base;
    memory.push_back({{"length", t}, {"block", block}, {"batch", b}, {"heads", h}, {"dim", d},
                      {"input_bytes", q.numel() * 4}, {"forward_peak_bytes", forward},
                      {"backward_peak_bytes", backward}});
  }
  return {{"cases", cases}, {"merge", {{"case", "A"}, {"cut", kMergeCut}}}, {"memory", memory}};
}

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Note [Overlap from the log]: every async operation's record says how much CPU time the posting
// thread spent between posting it and calling wait() (CommRecord::before_wait). A ring that posts
// the next keys' receive before computing does its pieces inside that window; one that waits
// first does them after it. So the share of the forward's CPU time spent while a receive it
// posted was in flight measures the overlap: the work of every step but the last for the first,
// 0 for the second. CPU time, not wall time: on a shared machine a thread's wall time between
// two calls counts the time it was not running, which made a ring that never overlapped read
// about 20% on two of three ranks sharing 2 cores.
nlohmann::json ring_round(const torch::Tensor& q_all, const torch::Tensor& k_all, const torch::Tensor& v_all,
                          const torch::Tensor& dout_all, const SequenceSplit& split, int64_t block, dist::Group& group,
                          io::TensorMap* tensors) {
  const torch::Tensor positions = split.positions;
  const torch::Tensor q = q_all.index_select(2, positions).requires_grad_(true);
  const torch::Tensor k = k_all.index_select(2, positions).requires_grad_(true);
  const torch::Tensor v = v_all.index_select(2, positions).requires_grad_(true);
  const torch::Tensor dout = dout_all.index_select(2, positions);
  const size_t first = group.log().records().size();
  RingCounts counts;
  const report::TensorBytes* meter = report::TensorBytes::installed();
  const int64_t allocated = meter ? meter->allocated() : 0;
  double cpu = thread_cpu_seconds();
  auto wall = std::chrono::steady_clock::now();
  const torch::Tensor out = ring_attention(q, k, v, scale_of(q.size(3)), true, true, block, group, &counts);
  const double forward_cpu = thread_cpu_seconds() - cpu;
  const double forward_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  const std::vector<dist::CommRecord> records = group.log().records();
  const size_t middle = records.size();
  double in_flight = 0;
  int64_t forward_bytes = 0;
  for (size_t i = first; i < middle; ++i) {
    const dist::CommRecord& r = records[i];
    if (r.op == "recv") in_flight += std::max(0.0, r.before_wait);
    if (r.op == "send") forward_bytes += r.bytes;
  }
  cpu = thread_cpu_seconds();
  out.backward(dout);
  const double backward_cpu = thread_cpu_seconds() - cpu;
  const int64_t work_bytes = meter ? meter->allocated() - allocated : 0;
  int64_t backward_bytes = 0;
  const std::vector<dist::CommRecord> after = group.log().records();
  for (size_t i = middle; i < after.size(); ++i) {
    if (after[i].op == "send") backward_bytes += after[i].bytes;
  }
  if (tensors) {
    (*tensors)["positions"] = positions;
    (*tensors)["out"] = out.detach().contiguous();
    (*tensors)["dq"] = q.grad().contiguous();
    (*tensors)["dk"] = k.grad().contiguous();
    (*tensors)["dv"] = v.grad().contiguous();
  }
  return {{"chunks", split.chunks},
          {"forward_cpu_seconds", forward_cpu},
          {"backward_cpu_seconds", backward_cpu},
          {"forward_seconds", forward_wall},
          {"forward_in_flight_cpu_seconds", in_flight},
          {"overlap", in_flight / std::max(1e-9, forward_cpu)},
          {"allocated_bytes", work_bytes},
          {"forward_bytes_sent", forward_bytes},
          {"backward_bytes_sent", backward_bytes},
          {"reported_pieces", counts.pieces},
          {"reported_bytes_sent", counts.bytes_sent}};
}

constexpr int64_t kRingBatch = 1, kRingHeads = 4, kRingDim = 32, kRingChunk = 192, kRingBlock = 64;
constexpr int kRingRounds = 3;

nlohmann::json ring_probe(const lm::LmOptions& o, const fs::path& out) {
  report::TensorBytes::install();  // before any tensor: it counts every allocation
  train::Run run = train::plan_run("cp", &o.launch);
  train::start_run(run, dist::init_process_group, 1);
  torch::set_num_threads(1);  // the CPU seconds are the rank's one thread's
  if (!run.group) throw Error("--probe ring needs ranks (--world_size 2 or more)");
  dist::Group& group = *run.group;
  const int ranks = group.size();
  const int64_t length = 2 * ranks * kRingChunk;
  torch::manual_seed(20261129);
  const torch::Tensor q = torch::randn({kRingBatch, kRingHeads, length, kRingDim});
  const torch::Tensor k = torch::randn({kRingBatch, kRingHeads, length, kRingDim});
  const torch::Tensor v = torch::randn({kRingBatch, kRingHeads, length, kRingDim});
  const torch::Tensor dout = torch::randn({kRingBatch, kRingHeads, length, kRingDim});
  const SequenceSplit split = split_sequence(length, group.rank(), ranks, /*balanced=*/true);
  ring_round(q, k, v, dout, split, kRingBlock, group, nullptr);  // warms up
  // Note [The least of three rounds]: the CPU seconds of a rank sharing a machine grow with what
  // else runs there (caches, a sibling hyperthread), never shrink: each rank's least over the
  // measured rounds is its work's cost.
  io::TensorMap tensors;
  nlohmann::json mine;
  double least = std::numeric_limits<double>::infinity();
  for (int round = 0; round < kRingRounds; ++round) {
    nlohmann::json r = ring_round(q, k, v, dout, split, kRingBlock, group, round == 0 ? &tensors : nullptr);
    least = std::min(least, r.at("forward_cpu_seconds").get<double>() + r.at("backward_cpu_seconds").get<double>());
    if (round == 0) mine = std::move(r);
  }
  mine["least_cpu_seconds"] = least;
  mine["rounds"] = kRingRounds;
  io::save_safetensors(out / fmt::format("rank{}.safetensors", group.rank()), tensors);
  io::write_json_file(out / fmt::format("rank{}.json", group.rank()), mine);
  group.barrier("cp probe written");
  return {{"ranks", ranks}, {"rank", group.rank()}, {"length", length}, {"chunk", kRingChunk}, {"block", kRingBlock},
          {"batch", kRingBatch}, {"heads", kRingHeads}, {"dim", kRingDim}, {"seed", 20261129}};
}

// The whole attention of one process, T x T scores held (the figure's comparison): masked
// softmax(scale q kᵀ) v by autograd.
torch::Tensor naive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t t = q.size(2);
  const torch::Tensor s = torch::matmul(q, k.transpose(-2, -1)) * scale_of(q.size(3));
  const torch::Tensor hidden = torch::ones({t, t}, torch::kBool).triu(1);
  return torch::matmul(torch::softmax(s.masked_fill(hidden, -std::numeric_limits<float>::infinity()), -1), v);
}

constexpr int64_t kScalingLengths[] = {512, 1024, 2048, 4096, 8192};
constexpr int64_t kNaiveBudget = int64_t{1} << 30;      // the T x T tensors naive attention holds, at most
constexpr int64_t kNaiveStepBudget = int64_t{2} << 30;  // and the naive GPT-2 step's, every block's

// Note [The figure's whole step]: the scaling figure's training step is cp's own (the trainer of
// cp/cp_trainer.h: this rank's chunks through GPT-2 with ring attention in every block, the loss
// over its tokens, backward, the gradients summed over the ranks, AdamW) on a GPT-2 of 2 blocks of
// width 128 (4 heads of 32, the attention's shape above), a vocabulary of 256 and positions for
// the longest T, dropout off: one row of T random tokens. Beside it at one rank, the naive step:
// the kit's GPT-2 forward (its attention holds every block's T x T scores, probabilities and
// their gradients, about 4 x L x H x T^2 floats), the same loss and update, while that fits
// kNaiveStepBudget. Each length's step runs twice, the first to let the allocator and the
// kernel reach the length's sizes; the second is measured: its seconds, the counting allocator's
// peak (every tensor: the model, its gradients and AdamW's state too) and the process's peak
// resident set over that step alone (the kernel's peak reset after the heap's free pages are
// given back), so that the figure's memory is what a rank holds.
model::Gpt2Config step_config() {
  model::Gpt2Config c;
  c.vocab_size = 256;
  c.n_positions = kScalingLengths[std::size(kScalingLengths) - 1];
  c.n_embd = kRingHeads * kRingDim;
  c.n_head = kRingHeads;
  c.n_layer = 2;
  c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = 0;
  c.bos_token_id = c.eos_token_id = 0;
  return c;
}

// One measured step (Note [The figure's whole step]): `step` runs twice, the second measured.
nlohmann::json measure_step(report::TensorBytes& meter, dist::Group& group, const std::function<void()>& step) {
  step();
  group.barrier("cp step measured");  // the ranks start the measured step together
  report::give_back_free_heap();
  const bool reset = report::reset_peak_rss();
  meter.reset_peak();
  const auto wall = std::chrono::steady_clock::now();
  step();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  return {{"seconds", seconds}, {"peak_tensor_bytes", meter.peak()},
          {"peak_rss_bytes", reset ? report::read_process_memory().peak_rss_bytes : -1}};
}

// The whole step's rows, one per length, at this run's CP (the world) and layout.
nlohmann::json step_rows(const lm::LmOptions& o, report::TensorBytes& meter, dist::Group& group) {
  const model::Gpt2Config config = step_config();
  torch::manual_seed(20261129);  // every rank draws the same model
  model::Gpt2LMHeadModel model(config);
  lm::LmOptions options = o;
  options.cp = group.size();
  const std::unique_ptr<lm::GridTrainer> trainer = make_context_parallel_trainer(model, group, options);
  train::TrainState state;
  state.module = trainer->module();
  state.optimizer = train::make_adamw(*state.module, {1e-4, 0.01});
  state.scheduler = std::make_unique<train::LinearWarmupSchedule>(*state.optimizer, 0, 1000000);
  state.max_grad_norm = 1.0;
  nlohmann::json rows = nlohmann::json::array();
  int64_t step = 0;
  for (const int64_t length : kScalingLengths) {
    torch::manual_seed(length);  // the same tokens on every rank
    data::Batch batch;
    batch.input_ids = torch::randint(config.vocab_size, {1, length}, torch::kLong);
    batch.labels = torch::randint(config.vocab_size, {1, length}, torch::kLong);
    batch.label_weights = torch::ones({1, length});
    const std::vector<int64_t> examples = {0};
    nlohmann::json row = {{"length", length}};
    row["step"] = measure_step(meter, group, [&] {
      trainer->step(state, train::StepInput{++step, 1, &examples, &batch});
    });
    const int64_t scores = 4 * config.n_layer * config.n_head * length * length * 4;
    if (group.size() == 1 && scores <= kNaiveStepBudget) {
      row["naive_step"] = measure_step(meter, group, [&] {
        model->train();
        lm::weighted_token_loss(model->forward(batch.input_ids).logits, batch.labels, batch.label_weights).backward();
        train::apply_update(state);
      });
    }
    rows.push_back(row);
  }
  return rows;
}

// cp --probe scaling: for each sequence length, the ring attention's forward and backward on this
// rank's chunks (--cp_layout, --cp_block): the bytes it held at its peak above its inputs (the
// counting allocator), its wall and CPU seconds; at one rank also the naive attention, while its
// scores fit kNaiveBudget. Then the whole training step at each length (Note [The figure's whole
// step]). Each rank writes rankR.json; rank 0 results.json (bench/bench_cp.cpp).
nlohmann::json scaling_probe(const lm::LmOptions& o, const fs::path& out) {
  report::TensorBytes& meter = report::TensorBytes::install();
  train::Run run = train::plan_run("cp", &o.launch);
  train::start_run(run, dist::init_process_group, 1);
  torch::set_num_threads(1);
  if (!run.group) throw Error("--probe scaling needs ranks (--world_size 1 or more)");
  const int rank = run.group->rank(), ranks = run.group->size();
  const bool balanced = o.cp_layout == "balanced";
  nlohmann::json rows = nlohmann::json::array();
  for (const int64_t length : kScalingLengths) {
    torch::manual_seed(20261129);
    const torch::Tensor q = torch::randn({kRingBatch, kRingHeads, length, kRingDim});
    const torch::Tensor k = torch::randn({kRingBatch, kRingHeads, length, kRingDim});
    const torch::Tensor v = torch::randn({kRingBatch, kRingHeads, length, kRingDim});
    const SequenceSplit split = split_sequence(length, rank, ranks, balanced);
    const torch::Tensor ql = q.index_select(2, split.positions).requires_grad_(true);
    const torch::Tensor kl = k.index_select(2, split.positions).requires_grad_(true);
    const torch::Tensor vl = v.index_select(2, split.positions).requires_grad_(true);
    const torch::Tensor dout = torch::ones_like(ql);
    nlohmann::json row = {{"length", length}, {"chunks", split.chunks}};
    auto measure = [&](const std::string& name, const std::function<torch::Tensor()>& forward) {
      ql.mutable_grad() = torch::Tensor();
      kl.mutable_grad() = torch::Tensor();
      vl.mutable_grad() = torch::Tensor();
      meter.reset_peak();
      const int64_t base = meter.current();
      const double cpu = thread_cpu_seconds();
      const auto wall = std::chrono::steady_clock::now();
      forward().backward(dout);
      row[name] = {{"peak_bytes", meter.peak() - base},
                   {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count()},
                   {"cpu_seconds", thread_cpu_seconds() - cpu}};
    };
    const double scale = scale_of(kRingDim);
    if (ranks > 1) {
      measure("ring", [&] { return ring_attention(ql, kl, vl, scale, true, balanced, o.cp_block, *run.group); });
    } else {
      measure("blocks", [&] { return attention(ql, kl, vl, scale, {0, 0, true}, o.cp_block); });
      const int64_t scores = kRingBatch * kRingHeads * length * length * 4;
      if (3 * scores <= kNaiveBudget) measure("naive", [&] { return naive_attention(ql, kl, vl); });
    }
    rows.push_back(row);
  }
  const nlohmann::json steps = step_rows(o, meter, *run.group);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (const char* key : {"step", "naive_step"}) {
      if (steps.at(i).contains(key)) rows[i][key] = steps.at(i).at(key);
    }
  }
  io::write_json_file(out / fmt::format("rank{}.json", rank), {{"rank", rank}, {"rows", rows}});
  run.group->barrier("cp scaling written");
  const model::Gpt2Config c = step_config();
  return {{"ranks", ranks}, {"rank", rank}, {"layout", o.cp_layout}, {"block", o.cp_block}, {"batch", kRingBatch},
          {"heads", kRingHeads}, {"dim", kRingDim}, {"naive_budget_bytes", kNaiveBudget},
          {"step_model", {{"n_layer", c.n_layer}, {"n_embd", c.n_embd}, {"n_head", c.n_head},
                          {"vocab_size", c.vocab_size}, {"n_positions", c.n_positions}}},
          {"naive_step_budget_bytes", kNaiveStepBudget}};
}

}  // namespace

int run_probe(const lm::LmOptions& o) {
  if (o.output_dir.empty()) throw Error("--probe needs --output_dir (it writes OUTPUT_DIR/results.json)");
  if (o.probe != "attention" && o.probe != "ring" && o.probe != "scaling") {
    throw Error("--probe " + o.probe + ": unknown (attention, ring, scaling)");
  }
  const fs::path out = o.output_dir;
  fs::create_directories(out);
  const nlohmann::json result = o.probe == "attention" ? attention_probe(out)
                                : o.probe == "ring"    ? ring_probe(o, out)
                                                       : scaling_probe(o, out);
  if (result.value("rank", 0) == 0) {
    io::write_json_file(out / "results.json", {{"exercise", "cp"}, {"probe", o.probe}, {"result", result}});
  }
  fmt::print("probe {}: {}\n", o.probe, out.string());
  return kExitOk;
}

}  // namespace dtlab::cp
