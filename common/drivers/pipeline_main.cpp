// pipeline and pipeline-solution: GPT-2 trained through the student's GPipe pipeline
// (dtlab/tasks/pipeline.h) on the translation data, or, with --probe, the grader's exercises of
// that pipeline (common/exercises/pipeline/probe.cpp).
#include <fmt/format.h>

#include <memory>

#include "dtlab/core/error.h"
#include "dtlab/lm/run.h"
#include "dtlab/tasks/pipeline.h"

namespace dtlab::pipeline {
int run_probe(const lm::LmOptions& options);  // common/exercises/pipeline/probe.cpp

// The schedules a Pipe of `micro_batches` micro-batches over `partitions` partitions runs: the
// student's clock_cycles(m, n) for every m up to micro_batches (torch::chunk cuts a small batch
// into fewer) and its reversal for backward, checked before the first step, so that a schedule
// that cannot run is named by its tick and task rather than found as a hang or a wrong loss.
void check_pipe_schedules(int micro_batches, int partitions) {
  for (int m = 1; m <= micro_batches; ++m) {
    const Schedule forward = clock_cycles(m, partitions);
    try {
      check_schedule(forward, m, partitions, Pass::kForward);
      check_schedule(reversed(forward), m, partitions, Pass::kBackward);
    } catch (const Error& e) {
      throw Error(fmt::format("clock_cycles({}, {}) cannot drive the Pipe: {}", m, partitions, e.what()));
    }
  }
}

}  // namespace dtlab::pipeline

int main(int argc, char** argv) {
  namespace pp = dtlab::pipeline;
  dtlab::lm::LmExercise exercise;
  exercise.name = "pipeline";
  exercise.pipeline = dtlab::lm::PipelineParts{
      [](dtlab::model::Gpt2LMHeadModel model, const std::vector<int>& devices, int micro_batches) {
        std::shared_ptr<pp::Pipe> pipe = pp::prepare_pipeline_parallel(model, devices, micro_batches);
        pp::check_pipe_schedules(pipe->micro_batches(), pipe->num_partitions());
        return dtlab::lm::PipelinedModel{[pipe](const torch::Tensor& ids) { return pipe->forward(ids); },
                                         [pipe](const torch::Tensor& grad) { pipe->backward(grad); },
                                         [pipe]() -> const pp::Timeline& { return pipe->timeline(); }};
      },
      pp::run_probe};
  return dtlab::lm::lm_main(argc, argv, exercise);
}
