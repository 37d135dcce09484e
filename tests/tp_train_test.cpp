// Tensor-parallel training of the kit's GPT-2 (tp/tp_step.h) on a tensor × data grid (tp/grid.h),
// on thread ranks over Gloo (dist_test_util.h), against one process training the whole model on
// the same global batches: 10 steps of AdamW (weight decay on, so its groups matter) with the
// global-norm clip active, at TP 2, TP 3 and TP 2 × DP 2, each in float32 and in float64 (Note
// [Adam amplifies rounding] says why both, with what tolerances). Every step's loss and gradient norm,
// the replicated parameters' gradients equal across each tensor group, each rank's final
// parameters against its shard of one process's, and the folder save_tensor_parallel_gpt2 writes
// read back by the kit's GPT-2 loader as one process's final model. Also the grid's groups and
// its refusal, unshard as shard_of's inverse, and a folder loaded into the shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "tp_test_util.h"
#include "dtlab/core/error.h"
#include "dtlab/io/file.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/train/optimizer.h"
#include "dtlab/train/step.h"
#include "dtlab/tp/gpt2_tp.h"
#include "dtlab/tp/grid.h"
#include "dtlab/tp/save.h"
#include "dtlab/tp/tp_step.h"
#include "test_util.h"

namespace tp_train_test {

namespace fs = std::filesystem;
using dtlab::dist::Group;
using dtlab::test::all_reduce_count;
using dtlab::tp::hf_name;
using dtlab::test::relative_difference;
using dtlab::test::run_ranks;

// ---------------------------------------------------------------------------------------------
// The model and the data.

// tp_test's GPT-2: TP 2 and 3 divide the heads (6) and the MLP (192), not the vocabulary (101).
constexpr int64_t kVocab = dtlab::test::kTpVocab, kRows = 4, kSeq = 9;
constexpr int kSteps = 10;
constexpr double kClip = 0.5;

// The global batch of a step: kRows rows of kSeq ids spread over the vocabulary (every shard's).
torch::Tensor batch_ids(int step) {
  const torch::Tensor row = torch::arange(kRows, torch::kLong).unsqueeze(1);
  const torch::Tensor col = torch::arange(kSeq, torch::kLong).unsqueeze(0);
  return (step * 31 + row * 17 + col * 7 + row * col * 3).remainder(kVocab);
}

// One target ignored in row 0 and one in row 2: DP 2's minibatches (rows 0-1, 2-3) count the
// same targets, so the mean of their mean losses is the global batch's (tp/tp_step.h).
torch::Tensor batch_labels(int step) {
  torch::Tensor l = batch_ids(step).clone();
  l[0][3] = dtlab::model::kIgnoreIndex;
  l[2][5] = dtlab::model::kIgnoreIndex;
  return l;
}

// One process's 10 steps: the kit's whole GPT-2, its loss, train::clip_gradients, make_adamw.
struct Reference {
  std::vector<double> losses, norms;
  dtlab::model::Gpt2LMHeadModel model{nullptr};
  std::map<std::string, torch::Tensor> parameters;
};

const Reference& reference(torch::ScalarType dtype) {
  static std::map<torch::ScalarType, Reference> cache;
  if (cache.count(dtype)) return cache.at(dtype);
  Reference& ref = cache[dtype];
  ref = [dtype] {
    Reference r;
    r.model = dtlab::test::small_tp_gpt2(dtype);
    auto optimizer = dtlab::train::make_adamw(*r.model, dtlab::test::decaying_adamw_options());
    for (int step = 0; step < kSteps; ++step) {
      const torch::Tensor loss = r.model->forward(batch_ids(step), {}, batch_labels(step)).loss;
      loss.backward();
      r.losses.push_back(loss.item<double>());
      std::vector<torch::Tensor> norms;
      for (const auto& p : r.model->parameters()) norms.push_back(p.grad().norm(2));
      r.norms.push_back(torch::stack(norms).norm(2).item<double>());
      dtlab::train::clip_gradients(r.model->parameters(), kClip);
      optimizer->step();
      r.model->zero_grad(/*set_to_none=*/true);
    }
    for (const auto& p : r.model->named_parameters()) r.parameters[p.key()] = p.value().detach().clone();
    return r;
  }();
  return ref;
}

TEST(Reference, ClipsEveryStep) {
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_GT(reference(torch::kFloat).norms[step], 2 * kClip) << "step " << step + 1 << ": the clip must be active";
  }
}

TEST(Unshard, IsTheInverseOfShardOf) {
  const dtlab::model::Gpt2LMHeadModel whole = dtlab::test::small_tp_gpt2();
  for (int tp : {1, 2, 3}) {
    for (const auto& p : whole->named_parameters()) {
      std::vector<torch::Tensor> shards;
      for (int r = 0; r < tp; ++r) shards.push_back(dtlab::tp::shard_of(p.key(), p.value(), dtlab::test::small_tp_config(), r, tp));
      EXPECT_TRUE(torch::equal(dtlab::tp::unshard(p.key(), shards, dtlab::test::small_tp_config()), p.value()))
          << p.key() << " at TP " << tp;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Training.

struct Shape {
  int tp, dp;
  torch::ScalarType dtype;
};

// Note [Adam amplifies rounding]: TP computes the same sums as one process in another order
// (a matmul split in TP parts then all-reduced), so a float32 gradient differs by a few units in
// its last place, relative to the tensor's scale. AdamW's update m / (sqrt(v) + eps) is
// normalised element by element: where an element's gradient is small against the tensor's,
// its rounding is large against ITSELF, and the update (about lr, whatever the gradient's size)
// moves by that much. After 10 steps of lr 1e-3 a few elements of float32 weights differ by
// 1e-5 to 3e-5 of the tensor's scale (measured: 2.6e-5 worst, TP 3, a c_proj weight) while the
// losses agree within 7e-7 and the norms within 2e-7. So float32 holds the parameters to 1e-4,
// and the same runs in float64 hold everything to 1e-12 (measured: 1.1e-14 worst), which no
// difference in the algorithm would survive: a gradient summed TP times, a replicated norm
// counted TP times or a parameter in the wrong weight-decay group shows at 1e-4 or more.
struct Tolerance {
  double loss, norm, parameter, loaded;
};

Tolerance tolerance(torch::ScalarType dtype) {
  // The folder is F32 whatever the model's dtype (model::save_pretrained): a float64 run's
  // loaded weights are its final weights rounded to float32.
  return dtype == torch::kDouble ? Tolerance{1e-12, 1e-12, 1e-12, 1e-6} : Tolerance{1e-5, 1e-5, 1e-4, 1e-4};
}

class Train : public ::testing::TestWithParam<Shape> {};

TEST_P(Train, EqualsOneProcessStepByStepAndSavesItsModel) {
  const int tp = GetParam().tp, dp = GetParam().dp;
  const torch::ScalarType dtype = GetParam().dtype;
  const Reference& ref = reference(dtype);
  const Tolerance tol = tolerance(dtype);
  const dtlab::model::Gpt2LMHeadModel initial = dtlab::test::small_tp_gpt2(dtype);
  const dtlab::model::Gpt2Config config = dtlab::test::small_tp_config();
  const fs::path dir = dtlab::test::fresh_temp_dir("tp_train_" + std::to_string(tp) + "x" + std::to_string(dp) +
                                                      (dtype == torch::kDouble ? "_f64" : "_f32"));

  run_ranks(tp * dp, [&](Group& world) {
    dtlab::tp::Grid grid(world, tp);
    dtlab::tp::TensorParallelGpt2 model(initial, grid.tensor());
    auto optimizer = dtlab::train::make_adamw(*model, dtlab::test::decaying_adamw_options());

    // Note [Replicated gradients need no TP sync] (tp/tp_step.h), checked at every step: the
    // replicated parameters' gradients, concatenated, gathered over the tensor group.
    int checked = 0;
    const auto replicas_agree = [&](dtlab::tp::TensorParallelGpt2Impl& m) {
      std::vector<torch::Tensor> grads;
      for (const auto& p : m.named_parameters()) {
        if (dtlab::tp::is_replicated(hf_name(p.key()))) grads.push_back(p.value().grad().reshape({-1}));
      }
      ASSERT_EQ(grads.size(), 1u + 2 * 6 + 2) << "wpe, ln_f, each block's 2 layer norms and 2 row-parallel biases";
      const std::vector<torch::Tensor> copies = grid.tensor().all_gather(torch::cat(grads), "test replicas");
      for (int r = 1; r < tp; ++r) {
        EXPECT_LT(relative_difference(copies[r], copies[0]), 1e-6) << "TP rank " << r << " against TP rank 0";
      }
      ++checked;
    };

    for (int step = 0; step < kSteps; ++step) {
      const torch::Tensor ids = dtlab::test::shard_rows(batch_ids(step), grid.dp_rank(), dp);
      const torch::Tensor labels = dtlab::test::shard_rows(batch_labels(step), grid.dp_rank(), dp);
      const dtlab::tp::TensorParallelStepResult result =
          dtlab::tp::tensor_parallel_step(*model, *optimizer, grid, ids, labels, kClip, replicas_agree);
      EXPECT_NEAR(result.global_loss, ref.losses[step], tol.loss) << "step " << step + 1;
      EXPECT_NEAR(result.grad_norm, ref.norms[step], tol.norm * ref.norms[step]) << "step " << step + 1;
    }
    EXPECT_EQ(checked, kSteps);
    // Per step: one all_reduce for the global norm over TP, one bucket over DP (none at DP 1).
    EXPECT_EQ(all_reduce_count(grid.tensor(), "tp gradient norm"), kSteps);
    EXPECT_EQ(all_reduce_count(grid.data(), "tp data-parallel gradients"), dp > 1 ? kSteps : 0);

    for (const auto& p : model->named_parameters()) {
      const std::string name = hf_name(p.key());
      const torch::Tensor expected = dtlab::tp::shard_of(name, ref.parameters.at(name), config, grid.tp_rank(), tp);
      ASSERT_EQ(p.value().sizes(), expected.sizes()) << name;
      EXPECT_LT(relative_difference(p.value(), expected), tol.parameter) << name << " on TP rank " << grid.tp_rank()
                                                                << ", DP rank " << grid.dp_rank();
    }
    dtlab::tp::save_tensor_parallel_gpt2(*model, grid, dir / "model");
  });

  // The folder reads back as one process's final model, and says what one process's save says.
  const dtlab::model::Gpt2LMHeadModel loaded = dtlab::model::gpt2_from_pretrained(dir / "model");
  for (const auto& p : loaded->named_parameters()) {
    EXPECT_LT(relative_difference(p.value(), ref.parameters.at(p.key())), tol.loaded) << p.key();
  }
  dtlab::model::save_pretrained(ref.model, dir / "one");
  EXPECT_EQ(dtlab::io::read_file(dir / "model" / "config.json"), dtlab::io::read_file(dir / "one" / "config.json"));
  EXPECT_EQ(dtlab::model::state_dict_keys(loaded), dtlab::model::state_dict_keys(ref.model));
  fs::remove_all(dir);
}

// Loading (tp/save.h): a folder read whole by the kit's loader, then cut by TensorParallelGpt2.
// One process's trained model written by save_pretrained gives each TP rank its shard of the
// weights and the one-process loss on a batch.
TEST(Load, AFolderReadWholeIsCutIntoEachRanksShards) {
  const Reference& ref = reference(torch::kFloat);
  const fs::path dir = dtlab::test::fresh_temp_dir("tp_train_load");
  dtlab::model::save_pretrained(ref.model, dir);
  dtlab::model::Gpt2LMHeadModel loaded = dtlab::model::gpt2_from_pretrained(dir);
  const double expected = loaded->forward(batch_ids(0), {}, batch_labels(0)).loss.item<double>();
  run_ranks(2, [&](Group& world) {
    dtlab::tp::Grid grid(world, 2);
    dtlab::tp::TensorParallelGpt2 model(loaded, grid.tensor());
    for (const auto& p : model->named_parameters()) {
      const std::string name = hf_name(p.key());
      EXPECT_TRUE(torch::equal(p.value(), dtlab::tp::shard_of(name, ref.parameters.at(name), dtlab::test::small_tp_config(),
                                                              grid.tp_rank(), 2)))
          << name << ": the folder holds float32, as the model does";
    }
    const double loss = model->loss(model->forward(batch_ids(0)), batch_labels(0)).item<double>();
    EXPECT_NEAR(loss, expected, 1e-5);
  });
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(TP, Train,
                         ::testing::Values(Shape{2, 1, torch::kFloat}, Shape{3, 1, torch::kFloat},
                                           Shape{2, 2, torch::kFloat}, Shape{2, 1, torch::kDouble},
                                           Shape{3, 1, torch::kDouble}, Shape{2, 2, torch::kDouble}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return "TP" + std::to_string(info.param.tp) + "xDP" + std::to_string(info.param.dp) +
                                  (info.param.dtype == torch::kDouble ? "Float64" : "Float32");
                         });

}  // namespace tp_train_test
