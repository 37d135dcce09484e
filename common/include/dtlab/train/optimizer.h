// The optimiser and learning-rate schedule of run_glue.py, for any model: AdamW without weight
// decay on biases and normalisation weights, and a linear schedule with warmup.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <memory>

namespace dtlab::train {

struct OptimizerOptions {
  double learning_rate = 5e-5;
  double weight_decay = 0.0;
  double adam_epsilon = 1e-8;
};

// Whether a parameter is exempt from weight decay: every parameter with fewer than two
// dimensions (biases, LayerNorm/RMSNorm weights and biases). For BERT this is exactly the set
// run_glue.py names ("bias", "LayerNorm.weight"; tests/schedule_test.cpp proves it), and unlike
// names it is right for GPT-2 too (ln_1.weight, ln_f.weight), as in nanoGPT and llm.c.
bool exempt_from_weight_decay(const torch::Tensor& parameter);

// torch::optim::AdamW whose step() the profiler sees as a scope of the update phase
// (report/profile.h), whoever calls it: the kit's step or a student's.
class AdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

// Two parameter groups: weight decay on every parameter but the exempt ones, none on those.
std::unique_ptr<torch::optim::AdamW> make_adamw(const torch::nn::Module& model,
                                                const OptimizerOptions& options);

// get_linear_schedule_with_warmup: the learning rate rises linearly from 0 over warmup_steps,
// then falls linearly to 0 at total_steps. Like PyTorch's LambdaLR it sets the rate for step 0 at
// construction; call step() after every optimizer.step().
class LinearWarmupSchedule {
 public:
  LinearWarmupSchedule(torch::optim::Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps);
  void step();
  double factor(int64_t step) const;  // multiplier of the base rate at `step`
  double last_lr() const;             // current rate of the first group
  int64_t steps_taken() const { return step_; }

 private:
  void apply();
  torch::optim::Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t warmup_steps_, total_steps_, step_ = 0;
};

}  // namespace dtlab::train
