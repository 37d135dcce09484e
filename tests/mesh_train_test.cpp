// GPT-2 on a device mesh of data x pipeline x tensor ranks (mesh/mesh_trainer.h) with the
// reference's mesh layout and composition, pp schedule and protocol and tp operators, on thread
// ranks over Gloo
// (dist_test_util.h), against one process training the whole model on the same global batches:
// 6 steps of AdamW (weight decay on) with the global-norm clip active, 2 micro-batches. Every
// step's loss, and the final model gathered from the mesh against one process's final model, in
// float64 (where any difference in the algorithm shows at 1e-4 or more and rounding at 1e-13) and
// at one mesh in float32 (Note [Adam amplifies rounding] in tp_train_test.cpp). Meshes: data 2 x
// pipeline 2 x tensor 2 in Megatron's order and with the tensor axis slowest (the composition does
// not depend on where the ranks sit), an odd pipeline of 3 stages with tensor 2, and data 3 x
// pipeline 2. Also the reference layout against the kit's at meshes too large to run.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "tp_test_util.h"
#include "dtlab/core/error.h"
#include "dtlab/lm/loss.h"
#include "dtlab/mesh/layout.h"
#include "dtlab/mesh/mesh_trainer.h"
#include "dtlab/model/gpt2.h"
#include "dtlab/tasks/mesh.h"
#include "dtlab/train/optimizer.h"
#include "dtlab/train/step.h"
#include "dtlab/train/train_state.h"

namespace mesh_train_test {

using dtlab::dist::Group;
using dtlab::test::run_ranks;

constexpr int64_t kVocab = dtlab::test::kTpVocab, kRows = 6, kSeq = 9;
constexpr int kSteps = 6, kMicroBatches = 2;
constexpr double kClip = 0.5;

// The global batch of a step: kRows rows of kSeq ids spread over the vocabulary, labels already
// shifted, and some targets of weight 0 (unevenly over the rows: the loss is the global batch's
// mean over its target tokens, not the mean of the replicas' means).
dtlab::data::Batch global_batch(int step) {
  const torch::Tensor row = torch::arange(kRows, torch::kLong).unsqueeze(1);
  const torch::Tensor col = torch::arange(kSeq, torch::kLong).unsqueeze(0);
  dtlab::data::Batch b;
  b.input_ids = (step * 31 + row * 17 + col * 7 + row * col * 3).remainder(kVocab);
  b.labels = (step * 13 + row * 5 + col * 11 + row * col).remainder(kVocab);
  b.label_weights = torch::ones({kRows, kSeq});
  b.label_weights[0][3] = 0;
  b.label_weights[1].narrow(0, 4, 5).zero_();
  b.label_weights[4][8] = 0;
  return b;
}

dtlab::data::Batch replica_rows(const dtlab::data::Batch& b, int replica, int replicas) {
  dtlab::data::Batch r;
  r.input_ids = dtlab::test::shard_rows(b.input_ids, replica, replicas);
  r.labels = dtlab::test::shard_rows(b.labels, replica, replicas);
  r.label_weights = dtlab::test::shard_rows(b.label_weights, replica, replicas);
  return r;
}

void add_optimizer(dtlab::train::TrainState& state) {
  state.optimizer = dtlab::train::make_adamw(*state.module, dtlab::test::decaying_adamw_options());
  state.scheduler = std::make_unique<dtlab::train::LinearWarmupSchedule>(*state.optimizer, 0, 20);
  state.max_grad_norm = kClip;
}

struct Reference {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> parameters;
};

// One process's steps: the kit's whole GPT-2, the translation loss, clip, AdamW, the schedule.
const Reference& reference(torch::ScalarType dtype) {
  static std::map<torch::ScalarType, Reference> cache;
  if (cache.count(dtype)) return cache.at(dtype);
  Reference& ref = cache[dtype];
  dtlab::model::Gpt2LMHeadModel model = dtlab::test::small_tp_gpt2(dtype);
  dtlab::train::TrainState state;
  state.module = model.ptr();
  add_optimizer(state);
  for (int step = 0; step < kSteps; ++step) {
    const dtlab::data::Batch b = global_batch(step);
    const torch::Tensor loss =
        dtlab::lm::weighted_token_loss(model->forward(b.input_ids).logits, b.labels, b.label_weights);
    loss.backward();
    ref.losses.push_back(loss.item<double>());
    dtlab::train::apply_update(state);
  }
  for (const auto& p : model->named_parameters()) ref.parameters[p.key()] = p.value().detach().clone();
  return ref;
}

TEST(Reference, ClipsEveryStep) {
  // The clip must be active for a norm counted wrong to show: one process's step 1 norm.
  dtlab::model::Gpt2LMHeadModel model = dtlab::test::small_tp_gpt2();
  const dtlab::data::Batch b = global_batch(0);
  dtlab::lm::weighted_token_loss(model->forward(b.input_ids).logits, b.labels, b.label_weights).backward();
  std::vector<torch::Tensor> norms;
  for (const auto& p : model->parameters()) norms.push_back(p.grad().norm(2));
  EXPECT_GT(torch::stack(norms).norm(2).item<double>(), 2 * kClip);
}

// The reference layout (solutions/mesh/layout.cpp) against the kit's own (mesh/layout.h), at
// meshes too large to run: every rank's coordinates and every group.
TEST(Layout, TheReferenceEqualsTheKitsAtMeshesTooLargeToRun) {
  const std::vector<std::vector<int>> meshes = {{1}, {5}, {3, 2, 4}, {2, 3, 1, 2}, {4, 1, 3}, {2, 2, 2, 2, 2}};
  for (const std::vector<int>& sizes : meshes) {
    std::vector<dtlab::mesh::Axis> axes;
    for (size_t i = 0; i < sizes.size(); ++i) axes.push_back({"axis" + std::to_string(i), sizes[i]});
    const dtlab::mesh::MeshLayout kit{dtlab::mesh::MeshShape(axes)};
    for (int rank = 0; rank < kit.world(); ++rank) {
      EXPECT_EQ(dtlab::mesh::coordinates_of(rank, sizes), kit.coordinates(rank)) << "rank " << rank;
      for (size_t a = 0; a < sizes.size(); ++a) {
        EXPECT_EQ(dtlab::mesh::group_of(rank, static_cast<int>(a), sizes), kit.group(rank, axes[a].name))
            << "rank " << rank << ", axis " << a;
      }
    }
    EXPECT_EQ(dtlab::mesh::student_layout(dtlab::mesh::MeshShape(axes)).describe(), kit.describe());
  }
  EXPECT_THROW(dtlab::mesh::coordinates_of(24, {3, 2, 4}), dtlab::Error);
  EXPECT_THROW(dtlab::mesh::coordinates_of(-1, {3, 2, 4}), dtlab::Error);
  EXPECT_THROW(dtlab::mesh::group_of(0, 3, {3, 2, 4}), dtlab::Error);
}

struct Shape {
  int data, pipeline, tensor;
  torch::ScalarType dtype;
  std::vector<std::string> order;
  std::string name;
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) { return info.param.name; }
void PrintTo(const Shape& shape, std::ostream* os) { *os << shape.name; }

class Mesh : public ::testing::TestWithParam<Shape> {};

TEST_P(Mesh, EqualsOneProcessStepByStep) {
  const Shape& shape = GetParam();
  const Reference& ref = reference(shape.dtype);
  // The step's loss comes back as a float (train::StepResult): held to float's rounding. The
  // parameters, in the model's dtype: float64's rounding, or float32's (Note [Adam amplifies
  // rounding]).
  const double loss_tolerance = shape.dtype == torch::kDouble ? 1e-6 : 1e-5;
  const double parameter_tolerance = shape.dtype == torch::kDouble ? 1e-12 : 1e-4;
  run_ranks(shape.data * shape.pipeline * shape.tensor, [&](Group& world) {
    const dtlab::model::Gpt2LMHeadModel whole = dtlab::test::small_tp_gpt2(shape.dtype);  // each rank its own
    dtlab::mesh::MeshPlan plan;
    plan.data = shape.data;
    plan.pipeline = shape.pipeline;
    plan.tensor = shape.tensor;
    plan.order = shape.order;
    plan.micro_batches = kMicroBatches;
    const std::unique_ptr<dtlab::lm::GridTrainer> trainer =
        dtlab::mesh::make_mesh_trainer(plan, whole, world);
    dtlab::train::TrainState state;
    state.module = trainer->module();
    add_optimizer(state);
    for (int step = 0; step < kSteps; ++step) {
      const dtlab::data::Batch b = replica_rows(global_batch(step), trainer->replica(), trainer->replicas());
      const std::vector<int64_t> rows = {0};
      const dtlab::train::StepResult r = trainer->step(state, {step + 1, 1, &rows, &b});
      EXPECT_NEAR(r.loss, ref.losses[static_cast<size_t>(step)], loss_tolerance) << "step " << step + 1;
    }
    trainer->gather_model();
    for (const auto& p : whole->named_parameters()) {
      EXPECT_LT(dtlab::test::relative_difference(p.value(), ref.parameters.at(p.key())), parameter_tolerance)
          << p.key() << " on rank " << world.rank();
    }
  });
}

const std::vector<std::string> kTensorSlowest = {dtlab::mesh::kTensor, dtlab::mesh::kData, dtlab::mesh::kPipeline};

INSTANTIATE_TEST_SUITE_P(
    Shapes, Mesh,
    ::testing::Values(Shape{2, 2, 2, torch::kDouble, dtlab::mesh::kMegatronOrder, "D2xP2xT2_f64"},
                      Shape{2, 2, 2, torch::kFloat, dtlab::mesh::kMegatronOrder, "D2xP2xT2_f32"},
                      Shape{2, 2, 2, torch::kDouble, kTensorSlowest, "D2xP2xT2_tensor_slowest_f64"},
                      Shape{1, 3, 2, torch::kDouble, dtlab::mesh::kMegatronOrder, "D1xP3xT2_f64"},
                      Shape{3, 2, 1, torch::kDouble, dtlab::mesh::kMegatronOrder, "D3xP2xT1_f64"}),
    shape_name);

TEST(MeshPlan, RefusesSizesThatDoNotFitBeforeAnyRankWaits) {
  run_ranks(4, [](Group& world) {
    const dtlab::model::Gpt2LMHeadModel whole = dtlab::test::small_tp_gpt2();
    dtlab::mesh::MeshPlan plan;
    plan.data = 1;
    plan.pipeline = 2;
    plan.tensor = 4;  // 8 ranks, not 4
    EXPECT_THROW(dtlab::mesh::make_mesh_trainer(plan, whole, world), dtlab::Error);
    plan.pipeline = 1;
    plan.tensor = 4;  // 4 does not divide the 6 heads
    EXPECT_THROW(dtlab::mesh::make_mesh_trainer(plan, whole, world), dtlab::Error);
    plan.pipeline = 2;
    plan.tensor = 2;
    plan.layer_stages = {0, 0, 0, 0};  // stage 1 would hold none of GPT-2's 4 (embeddings, 2 blocks, head)
    EXPECT_THROW(dtlab::mesh::make_mesh_trainer(plan, whole, world), dtlab::Error);
  });
}

}  // namespace mesh_train_test
