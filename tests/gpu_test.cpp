// The GPU suite (ctest -L gpu; `make gpu-check` on a machine with NVIDIA GPUs): what only a GPU
// can show. NCCL's collectives against Gloo's on the same inputs; the distributed exercises at
// world 1 with NCCL against Gloo; GPT-2's pipeline with its stages on GPUs against one device.
// Built only where the kit links CUDA; on such a build without a visible GPU (CI) the program
// says why and exits 77, which ctest reports as Skipped, in its summary.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/types.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "fill_drain.h"
#include "dtlab/core/device.h"
#include "dtlab/io/json_file.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/pipeline/gpt2_layout.h"
#include "dtlab/pipeline/schedule.h"
#include "dtlab/pipeline/workers.h"
#include "dtlab/tooling/gpt2_fixtures.h"
#include "dtlab/tooling/process.h"
#include "lm_fixture_util.h"
#include "process_test_util.h"
#include "test_util.h"

namespace gpu_test {

namespace fs = std::filesystem;
using dtlab::ProcessResult;
using dtlab::run_process;

int gpus() { return dtlab::cuda_availability().devices; }

// Runs body(group) on one rank per GPU (at most 4), each a thread with its own
// ProcessGroupNCCL on its own GPU over one HashStore: NCCL allows one rank per GPU in a
// communicator.
void run_nccl_ranks(const std::function<void(dtlab::dist::Group&)>& body) {
  const int world = std::min(gpus(), 4);
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::unique_ptr<dtlab::dist::Group>> groups(world);
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank));
        dtlab::use_device(device);
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = dtlab::test::kRankTimeout;
        auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, options);
        groups[rank] = dtlab::dist::wrap_process_group(pg, rank, world, dtlab::test::kRankTimeout, "nccl");
        groups[rank]->state().device = device;
        body(*groups[rank]);
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  groups.clear();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Every collective of dist::Group on rank-dependent values; the results on the CPU, in order.
// `on` places the inputs: the group's device, or the CPU (Note [CPU tensors on NCCL]).
std::vector<torch::Tensor> every_collective(dtlab::dist::Group& g, bool inputs_on_cpu) {
  using dtlab::dist::ReduceOp;
  const torch::Device where = inputs_on_cpu ? torch::Device(torch::kCPU) : g.device();
  const auto opts = torch::TensorOptions(torch::kFloat32).device(where);
  const double r = g.rank();
  std::vector<torch::Tensor> out;
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG_BY_DIVISION, ReduceOp::MAX, ReduceOp::MIN}) {
    torch::Tensor t = torch::arange(6, opts) * (r + 1) + r;
    g.all_reduce(t, op, "all_reduce");
    out.push_back(t.cpu());
  }
  torch::Tensor b = torch::full({5}, r + 7, opts);
  g.broadcast(b, 0, "broadcast");
  out.push_back(b.cpu());
  for (const torch::Tensor& t : g.all_gather(torch::full({3}, r, opts), "all_gather")) out.push_back(t.cpu());
  std::vector<torch::Tensor> inputs;
  for (int k = 0; k < g.size(); ++k) inputs.push_back(torch::full({4}, r * 10 + k, opts));
  torch::Tensor reduced = torch::zeros({4}, opts);
  g.reduce_scatter(reduced, inputs, ReduceOp::SUM, "reduce_scatter");
  out.push_back(reduced.cpu());
  if (g.size() > 1) {  // a ring of sends: rank r to r + 1
    torch::Tensor received = torch::zeros({2}, opts);
    const int next = (g.rank() + 1) % g.size(), previous = (g.rank() + g.size() - 1) % g.size();
    if (g.rank() % 2 == 0) {
      g.send(torch::full({2}, r, opts), next, "send");
      g.recv(received, previous, "recv");
    } else {
      g.recv(received, previous, "recv");
      g.send(torch::full({2}, r, opts), next, "send");
    }
    out.push_back(received.cpu());
  }
  g.barrier("barrier");
  return out;
}

TEST(GpuNccl, EveryCollectiveGivesGlooResultsWithInputsOnTheGpuOrTheCpu) {
  const int world = std::min(gpus(), 4);
  std::map<int, std::vector<torch::Tensor>> gloo;
  std::mutex mutex;
  dtlab::test::run_ranks(world, [&](dtlab::dist::Group& g) {
    auto results = every_collective(g, true);
    std::lock_guard<std::mutex> lock(mutex);
    gloo[g.rank()] = std::move(results);
  });
  for (bool on_cpu : {false, true}) {
    run_nccl_ranks([&](dtlab::dist::Group& g) {
      const std::vector<torch::Tensor> mine = every_collective(g, on_cpu);
      ASSERT_EQ(mine.size(), gloo.at(g.rank()).size());
      for (size_t i = 0; i < mine.size(); ++i) {
        EXPECT_TRUE(torch::equal(mine[i], gloo.at(g.rank())[i]))
            << "result " << i << " of rank " << g.rank() << (on_cpu ? " (CPU inputs)" : "") << ": " << mine[i]
            << " vs Gloo's " << gloo.at(g.rank())[i];
      }
      // Every operation was recorded with the caller's bytes, as with Gloo (task 4 reads them).
      EXPECT_GT(g.log().bytes("all_reduce"), 0);
    });
  }
}

TEST(GpuNccl, AnAsyncOperationOnACpuTensorIsAnErrorNamingTheGroupsDevice) {
  run_nccl_ranks([](dtlab::dist::Group& g) {
    torch::Tensor t = torch::ones({3});
    EXPECT_THROW_WITH(g.all_reduce_async(t, "bucket"), dtlab::Error, "cuda:" + std::to_string(g.rank()));
  });
}

// ---- The exercises at world 1: --backend nccl against --backend gloo --------------------------

const fs::path& fixtures() {
  static const fs::path dir = [] {
    const fs::path d = dtlab::test::fresh_temp_dir("gpu-fixtures");
    const ProcessResult r = run_process({DTLAB_PROGRAM("dtlab-fixtures"), "--out", (d / "fx").string()}, 120);
    if (r.exit_code != 0) throw std::runtime_error(r.output);
    dtlab::tooling::Gpt2FixtureOptions g = dtlab::test::small_gpt2();
    g.n_layer = 2;
    dtlab::test::write_small_lm_fixture(d, 200, 20, 10, g);
    return d;
  }();
  return dir;
}

// Float32 on a GPU and on a CPU round differently (other summation orders, fused kernels):
// losses of the first steps agree to this relative tolerance, not bit for bit.
constexpr double kLossTolerance = 2e-3;

std::vector<double> losses_of(const std::string& binary, const std::string& backend, bool gpt2) {
  const fs::path out = fixtures() / (fs::path(binary).filename().string() + "-" + backend);
  std::vector<std::string> args = {binary, "--master_ip", "127.0.0.1", "--master_port",
                                   std::to_string(dtlab::test::free_port()), "--world_size", "1", "--local_rank", "0",
                                   "--backend", backend, "--timeout", "60", "--dropout", "0", "--no_save",
                                   "--overwrite_output_dir", "--output_dir", out.string(), "--seed", "42"};
  if (gpt2) {
    args.insert(args.end(), {"--model_name_or_path", (fixtures() / "gpt2").string(), "--data_dir",
                             (fixtures() / "translation").string(), "--max_steps", "5", "--no_eval",
                             "--global_batch_size", "8"});
  } else {
    args.insert(args.end(), {"--model_name_or_path", (fixtures() / "fx/bert-tiny").string(), "--data_dir",
                             (fixtures() / "fx/RTE").string(), "--task_name", "RTE", "--do_train",
                             "--max_seq_length", "32", "--global_batch_size", "16", "--max_steps", "5"});
  }
  const ProcessResult r = run_process(args, 300);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return {};
  EXPECT_NE(r.output.find(backend == "nccl" ? "on cuda:0" : "on cpu"), std::string::npos) << r.output;
  return dtlab::test::iteration_losses(dtlab::io::read_json_file(out / "results.json"));
}

void expect_same_losses(const std::string& binary, bool gpt2) {
  const std::vector<double> gloo = losses_of(binary, "gloo", gpt2), nccl = losses_of(binary, "nccl", gpt2);
  ASSERT_EQ(gloo.size(), nccl.size());
  ASSERT_FALSE(gloo.empty());
  for (size_t i = 0; i < gloo.size(); ++i) {
    EXPECT_NEAR(nccl[i], gloo[i], kLossTolerance * std::abs(gloo[i])) << binary << " step " << i + 1;
  }
}

TEST(GpuExercises, Task2bWithNcclGivesGloosLosses) { expect_same_losses(DTLAB_PROGRAM("task2b-solution"), false); }
TEST(GpuExercises, Task3WithNcclGivesGloosLosses) { expect_same_losses(DTLAB_PROGRAM("task3-solution"), false); }
TEST(GpuExercises, DpWithNcclGivesGloosLosses) { expect_same_losses(DTLAB_PROGRAM("dp-solution"), true); }

// ---- GPT-2's pipeline on GPUs: the logits and every gradient of one device -------------------

void expect_pipeline_transparent(const std::vector<int>& stage_gpus) {
  using dtlab::pipeline::Stage;
  using dtlab::pipeline::StageWorkers;
  dtlab::model::Gpt2Config config;
  config.vocab_size = 40;
  config.n_positions = 16;
  config.n_embd = 32;
  config.n_layer = 3;
  config.n_head = 4;
  dtlab::model::Gpt2Overrides::dropout(0.0).apply(config);
  torch::manual_seed(5);
  dtlab::model::Gpt2LMHeadModel model(config);
  model->eval();
  const torch::Tensor ids = torch::randint(0, 40, {6, 12}, torch::kInt64);
  model->to(torch::Device(torch::kCUDA, 0));
  const torch::Tensor expected_logits = model->forward(ids.cuda()).logits.cpu();
  dtlab::model::lm_loss(model->forward(ids.cuda()).logits, ids.cuda()).backward();
  std::map<std::string, torch::Tensor> expected_grads;
  for (const auto& p : model->named_parameters()) {
    expected_grads[p.key()] = p.value().grad().cpu();
    p.value().mutable_grad() = torch::Tensor();
  }
  // Layers to stages: one stage per entry of stage_gpus, consecutive layers.
  const int64_t layers = model->num_stages();
  const int stages = static_cast<int>(stage_gpus.size());
  std::vector<int> devices;
  for (int64_t l = 0; l < layers; ++l) devices.push_back(stage_gpus[static_cast<size_t>(l * stages / layers)]);
  dtlab::pipeline::place_layers(model, devices);
  std::vector<Stage> pipe;
  for (int s = 0; s < stages; ++s) {
    std::vector<int64_t> mine;
    for (int64_t l = 0; l < layers; ++l) {
      if (l * stages / layers == s) mine.push_back(l);
    }
    pipe.push_back({[model, mine](const torch::Tensor& x) mutable {
                      torch::Tensor h = x;
                      for (int64_t l : mine) h = model->forward_stage(l, h);
                      return h;
                    },
                    dtlab::stage_device(stage_gpus[static_cast<size_t>(s)], dtlab::cuda_availability())});
  }
  StageWorkers workers(std::move(pipe));
  // GPipe's clock cycles (schedule.h), forward then backward, micro-batches overlapping.
  using dtlab::pipeline::Pass;
  using dtlab::pipeline::Task;
  const int m = 3;
  std::vector<std::vector<torch::Tensor>> act(m, std::vector<torch::Tensor>(stages + 1));
  const std::vector<torch::Tensor> chunks = ids.chunk(m);
  for (int i = 0; i < m; ++i) act[i][0] = chunks[static_cast<size_t>(i)];
  for (const auto& tick : dtlab::test::fill_drain(m, stages)) {
    for (const Task& t : tick) workers.submit(t, Pass::kForward, act[t.micro][t.stage]);
    for (const Task& t : tick) act[t.micro][t.stage + 1] = workers.collect(t.stage);
  }
  std::vector<torch::Tensor> outs;
  for (int i = 0; i < m; ++i) outs.push_back(act[i][stages]);
  const torch::Tensor logits = torch::cat(outs);
  EXPECT_TRUE(torch::allclose(logits.cpu(), expected_logits, 1e-4, 1e-5));
  const torch::Tensor leaf = logits.detach().requires_grad_();
  dtlab::model::lm_loss(leaf, ids.to(leaf.device())).backward();
  std::vector<std::vector<torch::Tensor>> grad(m, std::vector<torch::Tensor>(stages + 1));
  const std::vector<torch::Tensor> grads = leaf.grad().chunk(m);
  for (int i = 0; i < m; ++i) grad[i][stages] = grads[static_cast<size_t>(i)];
  for (const auto& tick : dtlab::pipeline::reversed(dtlab::test::fill_drain(m, stages))) {
    for (const Task& t : tick) workers.submit(t, Pass::kBackward, grad[t.micro][t.stage + 1]);
    for (const Task& t : tick) grad[t.micro][t.stage] = workers.collect(t.stage);
  }
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_TRUE(torch::allclose(p.value().grad().cpu(), expected_grads[p.key()], 1e-3, 1e-5)) << p.key();
  }
  EXPECT_EQ(model->transformer->wte->weight.device(), torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(stage_gpus.front())))
      << "the tied weight stays with the embeddings";
}

TEST(GpuPipeline, EveryStageOnCuda0GivesTheLogitsAndGradientsOfOneDevice) { expect_pipeline_transparent({0, 0, 0}); }

TEST(GpuPipeline, OneStagePerGpuGivesTheLogitsAndGradientsOfOneDevice) {
  if (gpus() < 2) GTEST_SKIP() << "one GPU: the stages share cuda:0 in the test above";
  std::vector<int> stage_gpus;
  for (int g = 0; g < std::min(gpus(), 4); ++g) stage_gpus.push_back(g);
  expect_pipeline_transparent(stage_gpus);
}

}  // namespace gpu_test

int main(int argc, char** argv) {
  const std::string why = dtlab::why_no_cuda(dtlab::cuda_availability());
  if (!why.empty()) {
    std::printf("gpu_test: skipped: %s. The GPU suite runs under `make gpu-check` on a machine with NVIDIA GPUs.\n",
                why.c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
