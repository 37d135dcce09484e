// dtlab-skeletons: writes tasks/ from solutions/ (Note [Exercise regions] in tooling/skeleton.h),
// or with --check reports every file of tasks/ that differs from what it would write. The same
// as `grader skeletons`, without the grader.
#include <CLI/CLI.hpp>

#include "dtlab/core/main.h"
#include "dtlab/tooling/skeleton.h"

int main(int argc, char** argv) {
  return dtlab::run_main("dtlab-skeletons", [&]() -> int {
    std::string solutions = "solutions", tasks = "tasks";
    bool check = false;
    CLI::App app{"Generates the student skeletons in tasks/ from the reference solutions"};
    app.add_option("--solutions", solutions, "Folder of reference solutions")->capture_default_str();
    app.add_option("--tasks", tasks, "Folder of student skeletons")->capture_default_str();
    app.add_flag("--check", check, "Write nothing; exit 1 when tasks/ is out of date");
    if (auto stop = dtlab::parse_flags(app, argc, argv)) return *stop;
    return dtlab::write_skeletons(solutions, tasks, check);
  });
}
