// The pp exercise's reference protocol (solutions/pp/run_stage, compiled in) on Gloo thread ranks
// with a toy stage (y = w x): for GPipe and 1F1B at 2..4 stages and 1..8 micro-batches, the
// messages it posts are ones NCCL can pair (Note [One stream per pair], dist/p2p_order.h), and the
// stage holds no more than its schedule stores (Note [Held, not only stored],
// pipeline/stage_step.h). Instructors' tree only: it compiles the reference in.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "dtlab/dist/p2p_order.h"
#include "dtlab/pipeline/stage_step.h"
#include "dtlab/tasks/pp.h"

namespace pp_protocol_test {

using dtlab::dist::CommRecord;
using dtlab::dist::Group;
using dtlab::pipeline::ScheduleKind;
using dtlab::pipeline::StageStep;
using dtlab::pp::Action;
using dtlab::pp::StageOp;
using dtlab::pp::StageSchedule;

constexpr int64_t kRows = 2, kWidth = 1024;  // 8 KiB per activation: the order matters, not the size

// What a run of every stage rank leaves: each rank's CommLog, and its stored and held peaks.
struct Ran {
  std::vector<std::vector<CommRecord>> logs;
  std::vector<int> stored, held;
};

using Protocol = void (*)(StageStep&, const StageSchedule&);

Ran run_toy_pipeline(ScheduleKind kind, int stages, int m, Protocol protocol) {
  Ran ran{std::vector<std::vector<CommRecord>>(static_cast<size_t>(stages)), std::vector<int>(stages),
          std::vector<int>(stages)};
  dtlab::test::run_ranks(stages, [&](Group& group) {
    const int s = group.rank();
    torch::Tensor w = torch::full({1}, 1.5, torch::requires_grad());
    dtlab::pipeline::StageCompute compute;
    compute.forward = [w](const torch::Tensor& x) { return x * w; };
    if (s == stages - 1) compute.loss = [](int, const torch::Tensor& y) { return y.sum(); };
    std::vector<torch::Tensor> inputs;
    std::vector<std::vector<int64_t>> shapes;
    for (int i = 0; i < m; ++i) {
      inputs.push_back(s == 0 ? torch::full({kRows, kWidth}, static_cast<float>(i)) : torch::empty({kRows, kWidth}));
      shapes.push_back({kRows, kWidth});
    }
    StageStep step({&group, s, stages, s > 0 ? s - 1 : -1, s + 1 < stages ? s + 1 : -1}, compute, inputs, shapes,
                   torch::kFloat32);
    const auto& build = kind == ScheduleKind::kGPipe ? dtlab::pp::gpipe_schedule : dtlab::pp::one_f_one_b_schedule;
    protocol(step, build(s, stages, m));
    step.check_complete();
    ran.logs[static_cast<size_t>(s)] = group.log().records();
    ran.stored[static_cast<size_t>(s)] = step.peak_stored();
    ran.held[static_cast<size_t>(s)] = step.peak_held();
  });
  return ran;
}

std::string name_of(ScheduleKind kind, int stages, int m) {
  return std::string(kind == ScheduleKind::kGPipe ? "GPipe" : "1F1B") + " on " + std::to_string(stages) +
         " stages x " + std::to_string(m) + " micro-batches";
}

TEST(ReferenceProtocol, PostsInAnOrderNcclPairsAndHoldsOnlyWhatItsScheduleStores) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    for (int stages = 2; stages <= 4; ++stages) {
      for (int m = 1; m <= 8; ++m) {
        SCOPED_TRACE(name_of(kind, stages, m));
        const Ran ran = run_toy_pipeline(kind, stages, m, dtlab::pp::run_stage);
        EXPECT_NO_THROW(dtlab::dist::check_stream_order(ran.logs));
        for (int s = 0; s < stages; ++s) {
          const int bound = kind == ScheduleKind::kGPipe ? m : std::min(stages - s, m);
          EXPECT_EQ(ran.stored[static_cast<size_t>(s)], bound) << "stage " << s;
          EXPECT_EQ(ran.held[static_cast<size_t>(s)], bound) << "stage " << s;
        }
      }
    }
  }
}

// The loop as the handout's first sentence reads, without the early receive and waiting for its
// sends at the end: right on Gloo, but in 1F1B's steady state both neighbours post their send
// first (NCCL would hang above its buffer), and stage 0 holds every activation in its sends.
void plain_loop(StageStep& step, const StageSchedule& schedule) {
  Group& group = step.group();
  std::vector<dtlab::dist::PendingWork> sends;
  for (const Action& a : schedule) {
    if (a.op == StageOp::kForward) {
      torch::Tensor input;
      if (!step.is_first()) {
        input = step.activation_buffer(a.micro);
        group.recv(input, step.previous_rank(), StageStep::activation_tag(a.micro));
      }
      const torch::Tensor out = step.forward(a.micro, input);
      if (!step.is_last()) sends.push_back(group.send_async(out, step.next_rank(), StageStep::activation_tag(a.micro)));
    } else {
      torch::Tensor grad;
      if (!step.is_last()) {
        grad = step.gradient_buffer(a.micro);
        group.recv(grad, step.next_rank(), StageStep::gradient_tag(a.micro));
      }
      const torch::Tensor back = step.backward(a.micro, grad);
      if (!step.is_first()) sends.push_back(group.send_async(back, step.previous_rank(), StageStep::gradient_tag(a.micro)));
    }
  }
  for (auto& w : sends) w.wait();
}

TEST(ReferenceProtocol, ThePlainLoopCompletesOnGlooButNcclCouldNotPairItAndItHoldsEveryActivation) {
  const Ran ran = run_toy_pipeline(ScheduleKind::k1F1B, 2, 8, plain_loop);
  try {
    dtlab::dist::check_stream_order(ran.logs);
    FAIL() << "the plain loop's order passed";
  } catch (const dtlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 0 and 1 each post a send as their operation 2 with each other "
                                         "(rank 0: send #2 (activation 1) to rank 1; rank 1: send #2 (gradient 0) "
                                         "to rank 0)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ran.stored, (std::vector<int>{2, 1}));
  EXPECT_EQ(ran.held, (std::vector<int>{8, 8}));  // stage 0 its activations, stage 1 its gradients
}

}  // namespace pp_protocol_test
