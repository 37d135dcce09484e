// pipeline and pipeline-solution: GPT-2 trained through the student's GPipe pipeline
// (dtlab/tasks/pipeline.h) on the translation data, or, with --probe, the grader's exercises of
// that pipeline (pipeline_probe.cpp).
#include <memory>

#include "dtlab/lm/run.h"
#include "dtlab/tasks/pipeline.h"

namespace dtlab::pipeline {
int run_probe(const lm::LmOptions& options);  // pipeline_probe.cpp
}

int main(int argc, char** argv) {
  namespace pp = dtlab::pipeline;
  dtlab::lm::LmExercise exercise;
  exercise.name = "pipeline";
  exercise.pipeline = dtlab::lm::PipelineParts{
      [](dtlab::model::Gpt2LMHeadModel model, const std::vector<int>& devices, int micro_batches) {
        std::shared_ptr<pp::Pipe> pipe = pp::prepare_pipeline_parallel(model, devices, micro_batches);
        return dtlab::lm::PipelinedModel{[pipe](const torch::Tensor& ids) { return pipe->forward(ids); },
                                         [pipe](const torch::Tensor& grad) { pipe->backward(grad); },
                                         [pipe] { return pipe->timeline().to_json(); }};
      },
      pp::run_probe};
  return dtlab::lm::lm_main(argc, argv, exercise);
}
