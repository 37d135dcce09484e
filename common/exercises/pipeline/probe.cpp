// pipeline --probe KIND: the grader's exercises of the student's pipeline on layers the kit makes,
// written to OUTPUT_DIR/results.json ({"exercise", "probe", "result"}) for grader/checks_pipeline.cpp
// to judge. It measures and records; the grader decides what is right.
//   schedule      clock_cycles(m, n) for every m, n in 1..8
//   split         split_module on layouts of named layers, one of which returns to a device
//   transparency  a GPT-2 (the run's model, dropout 0) through prepare_pipeline_parallel against
//                 the model itself: outputs and every gradient, batch 1/7/32 x micro-batches 1/3/4/8
//   concurrency   three stages whose forward and backward each sleep: the timeline of a step
//   errors        three stages, the middle one failing on its third micro-batch while the last
//                 still holds an uncollected result, then the same Pipe on a clean step
#include <torch/autograd.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "dtlab/core/error.h"
#include "dtlab/io/json_file.h"
#include "dtlab/lm/model.h"
#include "dtlab/lm/options.h"
#include "dtlab/pipeline/gpt2_layout.h"
#include "dtlab/tasks/pipeline.h"
#include "dtlab/tokenizer/gpt2_tokenizer.h"

namespace fs = std::filesystem;

namespace dtlab::pipeline {
namespace probe {

constexpr int kMaxShape = 8;                        // schedules of m, n in 1..8
constexpr auto kSleep = std::chrono::milliseconds(40);  // per sleeping task
constexpr int kSleepStages = 3, kSleepMicroBatches = 4;

nlohmann::json schedule() {
  nlohmann::json out = nlohmann::json::array();
  for (int m = 1; m <= kMaxShape; ++m) {
    for (int n = 1; n <= kMaxShape; ++n) {
      nlohmann::json ticks = nlohmann::json::array();
      for (const auto& tick : clock_cycles(m, n)) {
        nlohmann::json t = nlohmann::json::array();
        for (const Task& task : tick) t.push_back({task.micro, task.stage});
        ticks.push_back(t);
      }
      out.push_back({{"m", m}, {"n", n}, {"ticks", ticks}});
    }
  }
  return out;
}

nlohmann::json split() {
  const std::vector<std::vector<int>> layouts = {{0, 0, 1, 1}, {0, 1, 2}, {0, 0, 1, 1, 0}, {3}, {1, 1, 0, 0, 0},
                                                 {0, 1, 0, 1}};
  nlohmann::json out = nlohmann::json::array();
  for (const auto& devices : layouts) {
    std::vector<Layer> layers;
    for (size_t l = 0; l < devices.size(); ++l) {
      layers.push_back({fmt::format("L{}", l), [](const torch::Tensor& x) { return x; }, devices[l]});
    }
    nlohmann::json parts = nlohmann::json::array();
    for (const Partition& p : split_module(layers)) {
      nlohmann::json names = nlohmann::json::array();
      for (const Layer& l : p.layers) names.push_back(l.name);
      parts.push_back({{"device", p.device}, {"layers", names}});
    }
    out.push_back({{"devices", devices}, {"partitions", parts}});
  }
  return out;
}

// Every gradient set to none, so that a parameter no backward reaches stays without one (LibTorch
// 1.13's zero_grad() fills zeros, and a gradient of zeros cannot be told from a missing one).
void set_gradients_to_none(const model::Gpt2LMHeadModel& model) {
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
}

// Every parameter's gradient, cloned, by name (undefined where there is none).
std::map<std::string, torch::Tensor> gradients(const model::Gpt2LMHeadModel& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : model->named_parameters()) {
    out[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor();
  }
  return out;
}

nlohmann::json transparency(const lm::LmOptions& o) {
  lm::LmOptions with_no_dropout = o;
  with_no_dropout.dropout = 0.0;
  const tokenizer::Gpt2Tokenizer tokenizer = lm::load_tokenizer(o);
  const lm::LmTokenIds ids = lm::lm_token_ids(tokenizer, lm::tokenizer_folder(o));
  model::Gpt2LMHeadModel model = lm::load_model(with_no_dropout, tokenizer, ids, nullptr);
  model->train();
  const int stages = std::min<int>(3, static_cast<int>(model->num_stages()));
  const std::vector<int> devices = gpt2_layer_devices(model, stages);
  nlohmann::json cases = nlohmann::json::array();
  for (int64_t batch : {1, 7, 32}) {
    for (int micro : {1, 3, 4, 8}) {
      torch::manual_seed(batch * 100 + micro);
      const torch::Tensor input = torch::randint(model->config().vocab_size, {batch, 12}, torch::kInt64);
      set_gradients_to_none(model);
      const torch::Tensor want = model->forward(input).logits;
      const torch::Tensor weight = torch::randn_like(want);  // the loss sum(logits * weight)
      (want * weight).sum().backward();
      const auto want_grads = gradients(model);
      set_gradients_to_none(model);
      std::unique_ptr<Pipe> pipe = prepare_pipeline_parallel(model, devices, micro);
      const torch::Tensor got = pipe->forward(input);
      pipe->backward(weight);
      const auto got_grads = gradients(model);
      nlohmann::json c = {{"batch", batch}, {"micro_batches", micro}, {"stages", stages},
                          {"partitions", pipe->num_partitions()}};
      if (!got.defined() || got.sizes() != want.sizes()) {
        c["output_shape"] = got.defined() ? got.sizes().vec() : std::vector<int64_t>{};
        c["want_shape"] = want.sizes().vec();
      } else {
        c["output_max_abs_diff"] = (got - want.detach()).abs().max().item<double>();
      }
      double worst = 0;
      std::string worst_name;
      std::vector<std::string> missing;
      for (const auto& [name, g] : want_grads) {
        const torch::Tensor& h = got_grads.at(name);
        if (!g.defined()) continue;  // the model's own backward gives it none either
        if (!h.defined()) {
          missing.push_back(name);
          continue;
        }
        const double scale = std::max(g.abs().max().item<double>(), 1e-12);
        const double d = (h - g).abs().max().item<double>() / scale;
        if (d >= worst) {
          worst = d;
          worst_name = name;
        }
      }
      c["gradient_max_relative_diff"] = worst;
      c["gradient_worst"] = worst_name;
      c["gradients_missing"] = missing;
      cases.push_back(c);
    }
  }
  return cases;
}

// x -> 2x, sleeping kSleep in forward and in backward: a stage whose time is known exactly, so
// that overlap can be seen in the timeline and measured on the wall clock.
struct SleepDouble : torch::autograd::Function<SleepDouble> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) {
    std::this_thread::sleep_for(kSleep);
    return x * 2;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    std::this_thread::sleep_for(kSleep);
    return {grads[0] * 2};
  }
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<Layer> sleeping_layers() {
  std::vector<Layer> layers;
  for (int s = 0; s < kSleepStages; ++s) {
    layers.push_back({"sleep " + std::to_string(s), [](const torch::Tensor& x) { return SleepDouble::apply(x); }, s});
  }
  return layers;
}

nlohmann::json concurrency() {
  Pipe pipe(split_module(sleeping_layers()), kSleepMicroBatches);
  const torch::Tensor input = torch::ones({kSleepMicroBatches * 2, 4});
  auto start = std::chrono::steady_clock::now();
  const torch::Tensor out = pipe.forward(input);
  const double forward_seconds = seconds_since(start);
  start = std::chrono::steady_clock::now();
  pipe.backward(torch::ones_like(out));
  const double backward_seconds = seconds_since(start);
  return {{"sleep_seconds", std::chrono::duration<double>(kSleep).count()},
          {"micro_batches", kSleepMicroBatches},
          {"stages", kSleepStages},
          {"partitions", pipe.num_partitions()},
          {"forward_seconds", forward_seconds},
          {"backward_seconds", backward_seconds},
          {"output_max_abs_diff", (out - input * std::pow(2.0, kSleepStages)).abs().max().item<double>()},
          {"timeline", pipe.timeline().to_json()}};
}

// Three stages: when stage 1 fails on micro-batch 2 (tick 3: (3, 0), (2, 1), (1, 2)), stage 2's
// task of that tick is submitted and never collected, so a Pipe that does not clear() its workers
// between steps takes that stale result for the next step's.
nlohmann::json errors() {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto failing = std::make_shared<std::atomic<bool>>(true);
  std::vector<Layer> layers = {
      {"double", [](const torch::Tensor& x) { return x * 2; }, 0},
      {"fails on its third micro-batch",
       [calls, failing](const torch::Tensor& x) {
         if (++*calls == 3 && *failing) throw Error("probe: this stage fails on its third micro-batch");
         return x + 1;
       },
       1},
      {"triple", [](const torch::Tensor& x) { return x * 3; }, 2}};
  Pipe pipe(split_module(layers), 4);
  const torch::Tensor input = torch::arange(8, torch::kFloat32).reshape({8, 1});
  nlohmann::json out;
  const auto start = std::chrono::steady_clock::now();
  try {
    torch::NoGradGuard no_grad;
    pipe.forward(input);
    out["rethrown"] = false;
  } catch (const std::exception& e) {
    out["rethrown"] = true;
    out["message"] = e.what();
  }
  out["seconds_to_error"] = seconds_since(start);
  failing->store(false);
  try {
    torch::NoGradGuard no_grad;
    const torch::Tensor again = pipe.forward(input);
    out["recovered"] = again.sizes() == input.sizes() && torch::equal(again, (input * 2 + 1) * 3);
  } catch (const std::exception& e) {
    out["recovered"] = false;
    out["recovery_error"] = e.what();
  }
  return out;
}

}  // namespace probe

int run_probe(const lm::LmOptions& o) {
  if (o.output_dir.empty()) throw Error("--probe needs --output_dir (it writes OUTPUT_DIR/results.json)");
  nlohmann::json result;
  if (o.probe == "schedule") result = probe::schedule();
  else if (o.probe == "split") result = probe::split();
  else if (o.probe == "transparency") result = probe::transparency(o);
  else if (o.probe == "concurrency") result = probe::concurrency();
  else if (o.probe == "errors") result = probe::errors();
  else throw Error("--probe " + o.probe + ": unknown (schedule, split, transparency, concurrency, errors)");
  fs::create_directories(o.output_dir);
  io::write_json_file(fs::path(o.output_dir) / "results.json",
                      {{"exercise", "pipeline"}, {"probe", o.probe}, {"result", result}});
  fmt::print("probe {}: {}\n", o.probe, (fs::path(o.output_dir) / "results.json").string());
  return kExitOk;
}

}  // namespace dtlab::pipeline
