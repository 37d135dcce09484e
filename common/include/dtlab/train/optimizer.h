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

// torch::optim::AdamW with its update in one pass (Note [AdamW in one pass]), whose step() the
// profiler sees as a scope of the update phase (report/profile.h), whoever calls it: the kit's
// step or a student's.
//
// Note [AdamW in one pass]: LibTorch's AdamW::step runs nine operators over each parameter
// (p.mul_, exp_avg.mul_ and add_, exp_avg_sq.mul_ and addcmul_, sqrt, a division, add_,
// p.addcdiv_), two of them into new tensors: about 22 reads and writes of the parameter's size,
// where the update needs 7 (read p, g, m, v; write p, m, v). Where the model's computation is
// small against its size (the emulated cluster's 37M-parameter BERT on 16 tokens a rank, or any
// short sequence) that pass is a large part of a step. step() here does the same arithmetic
// element by element in one loop (train/adamw_kernel.cpp, shared among LibTorch's threads by
// at::parallel_for): the same operations in the same order on the same float constants, so it
// differs from LibTorch's only where LibTorch's vectorised add fuses a multiply and an add into
// one rounding (a few units in the last place; tests/adamw_test.cpp holds the two within 1e-6,
// relative, over 40 steps). The loop itself never fuses: adamw_kernel.cpp is compiled with
// -ffp-contract=off, which matters where the target has FMA (aarch64), and a test holds it to
// one rounding per operation, to the bit. Its state is torch::optim::AdamW's own (step, exp_avg, exp_avg_sq
// under the same keys), so save/load and state() are unchanged. When a parameter, its gradient
// or its moments are not contiguous float tensors on the CPU, or a group asks for amsgrad, or
// under `--plain` (model/ops.h), the whole step is LibTorch's own.
class AdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  bool loop_applies() const;  // every parameter suits the one-pass loop (the Note)
};

// Two parameter groups: weight decay on every parameter but the exempt ones, none on those.
// The bytes of an optimiser's state: AdamW's moments (and max_exp_avg_sq with amsgrad) of every
// parameter it has stepped; 0 before its first step, which allocates them.
int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer);

std::unique_ptr<torch::optim::AdamW> make_adamw(const torch::nn::Module& model,
                                                const OptimizerOptions& options);
// The same two groups of given tensors (shard/shard_optimizer.h: the pieces of parameters).
std::unique_ptr<torch::optim::AdamW> make_adamw(std::vector<torch::Tensor> decay, std::vector<torch::Tensor> no_decay,
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
