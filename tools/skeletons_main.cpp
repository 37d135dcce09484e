// dtlab-skeletons: writes tasks/ from solutions/ (Note [Exercise regions] in core/skeleton.h),
// or with --check reports every file of tasks/ that differs from what it would write.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

#include "dtlab/core/error.h"
#include "dtlab/core/main.h"
#include "dtlab/core/skeleton.h"
#include "dtlab/io/file.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  return dtlab::run_main("dtlab-skeletons", [&]() -> int {
    std::string solutions = "solutions", tasks = "tasks";
    bool check = false;
    CLI::App app{"Generates the student skeletons in tasks/ from the reference solutions"};
    app.add_option("--solutions", solutions, "Folder of reference solutions")->capture_default_str();
    app.add_option("--tasks", tasks, "Folder of student skeletons")->capture_default_str();
    app.add_flag("--check", check, "Write nothing; exit 1 when tasks/ is out of date");
    if (auto stop = dtlab::parse_flags(app, argc, argv)) return *stop;
    int stale = 0;
    for (const dtlab::SkeletonFile& f : dtlab::plan_skeletons(solutions, tasks)) {
      const bool same = fs::exists(f.task) && dtlab::io::read_file(f.task) == f.expected;
      if (same) continue;
      if (check) {
        std::printf("out of date: %s (generated from %s)\n", f.task.c_str(), f.solution.c_str());
        ++stale;
      } else {
        dtlab::io::write_file_atomically(f.task, f.expected);
        std::printf("wrote %s\n", f.task.c_str());
      }
    }
    if (stale) {
      std::printf("%d skeleton file(s) differ from solutions/: run `make skeletons` and commit\n", stale);
      return 1;
    }
    if (check) std::printf("tasks/ matches solutions/\n");
    return dtlab::kExitOk;
  });
}
