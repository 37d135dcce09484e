// dp and dp-solution: data-parallel training of GPT-2 (lm/run.h) with the student's partition
// and gradient averaging (dtlab/tasks/dp.h).
#include <memory>

#include "dtlab/lm/run.h"
#include "dtlab/tasks/dp.h"

int main(int argc, char** argv) {
  namespace dp = dtlab::dp;
  dtlab::lm::LmExercise exercise;
  exercise.name = "dp";
  exercise.data_parallel = dtlab::lm::DataParallelParts{
      dp::setup,
      [](const dtlab::train::Dataset& all, const dtlab::dist::Group& group, int64_t global_batch, uint64_t seed) {
        dp::PartitionLoader loader = dp::partition_dataset(group.rank(), group.size(), all, global_batch, seed);
        std::vector<int64_t> indices = loader.partition.indices();
        return dtlab::lm::RankShare{std::make_shared<dp::Partition>(std::move(loader.partition)),
                                    std::move(indices), loader.batch_size};
      },
      dp::average_gradients};
  return dtlab::lm::lm_main(argc, argv, exercise);
}
