// The kit's part of the pipeline exercise's Pipe (dtlab/tasks/pipeline.h): the partitions'
// forward and the workers. forward, backward and compute are the student's.
#include <fmt/format.h>

#include "dtlab/core/device.h"
#include "dtlab/core/error.h"
#include "dtlab/tasks/pipeline.h"

namespace dtlab::pipeline {
namespace pipe_kit {

// One worker per partition. A partition's device number is a GPU where CUDA is present (several
// partitions may share one) and names a CPU worker where it is not (Note [Devices] in
// core/device.h; Note [Threads per stage] in workers.h).
std::vector<Stage> stages_of(const std::vector<Partition>& partitions) {
  std::vector<Stage> stages;
  for (size_t j = 0; j < partitions.size(); ++j) {
    if (partitions[j].layers.empty()) throw Error(fmt::format("Pipe: partition {} holds no layer", j));
    for (const Layer& layer : partitions[j].layers) {
      if (!layer.forward) throw Error(fmt::format("Pipe: layer \"{}\" of partition {} has no forward", layer.name, j));
    }
    const Partition partition = partitions[j];
    stages.push_back({[partition](const torch::Tensor& x) { return partition.forward(x); },
                      stage_device(partition.device, cuda_availability())});
  }
  return stages;
}

}  // namespace pipe_kit

torch::Tensor Partition::forward(const torch::Tensor& x) const {
  torch::Tensor y = x;
  for (const Layer& layer : layers) y = layer.forward(y);
  return y;
}

Pipe::Pipe(std::vector<Partition> partitions, int micro_batches, StageWorkersOptions options)
    : partitions_((partitions.empty() ? throw Error("Pipe: no partitions (split_module returned none)")
                                      : std::move(partitions))),
      micro_batches_(micro_batches >= 1 ? micro_batches
                                        : throw Error(fmt::format("Pipe: {} micro-batches; at least 1", micro_batches))),
      workers_(pipe_kit::stages_of(partitions_), std::move(options)) {}

}  // namespace dtlab::pipeline
