// zero and zero-solution: sharded data-parallel training of GPT-2 (lm/run.h) with the student's
// rings and ZeRO strategy (dtlab/tasks/zero.h). The kit joins the ranks and shares the data.
#include "dtlab/lm/run.h"
#include "dtlab/tasks/zero.h"

int main(int argc, char** argv) {
  dtlab::lm::LmExercise exercise;
  exercise.name = "zero";
  exercise.data_parallel = dtlab::lm::DataParallelParts{dtlab::dist::init_process_group, dtlab::lm::equal_shares,
                                                        /*average_gradients=*/nullptr};
  exercise.sharded = dtlab::lm::ShardedParts{
      [](int stage, const dtlab::shard::ShardContext& context) {
        if (stage == 1) return dtlab::zero::make_zero1(context);
        return stage == 2 ? dtlab::zero::make_zero2(context) : dtlab::zero::make_fsdp(context);
      },
      [](int stage) -> std::string {
        if (stage == 1) return "ZeRO-1: the optimiser's state sharded";
        return stage == 2 ? "ZeRO-2: the optimiser's state and the gradients sharded"
                          : "FSDP (ZeRO-3): the optimiser's state, the gradients and the parameters sharded";
      }};
  return dtlab::lm::lm_main(argc, argv, exercise);
}
