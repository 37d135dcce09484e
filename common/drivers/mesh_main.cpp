// mesh and mesh-solution: GPT-2 on a device mesh of data x pipeline x tensor ranks (lm/run.h,
// mesh/mesh_trainer.h): the student's pp schedules and protocol between the stages, their tp
// operators in every block, their mesh layout and composition (dtlab/tasks/mesh.h); and the
// grading aid --probe layout (common/exercises/mesh/probe.cpp).
#include "dtlab/lm/run.h"
#include "dtlab/mesh/mesh_trainer.h"

int main(int argc, char** argv) {
  dtlab::lm::LmExercise exercise;
  exercise.name = "mesh";
  exercise.mesh = dtlab::lm::GridParts{dtlab::mesh::make_mesh_grid_trainer};
  exercise.probe = dtlab::mesh::run_probe;
  return dtlab::lm::lm_main(argc, argv, exercise);
}
