// Where this checkout, its build folder and the kit's programs are: Note [Build paths].
#pragma once

// Note [Build paths]
// ~~~~~~~~~~~~~~~~~~
// The tests and the grader need absolute paths: the source folder (fixtures, golden data,
// solutions), the build folder and the programs they start. They are defined in one small file that
// the configure writes (build_paths.cpp in the build folder, cmake/Dtlab.cmake's
// dtlab_write_build_paths) and compiles apart, never as -D flags: a flag with the clone's path
// makes every compile of a clone differ from another clone's, and the compiler cache (Note
// [Compiler cache]) could not serve a fresh clone the LibTorch-heavy test and grader sources. A
// program's path that the build does not have (a student release builds no *-solution) is empty.
namespace dtlab::build_paths {
extern const char* const source_dir;              // the checkout that was configured
extern const char* const binary_dir;              // its build folder
extern const char* const sandbox_library_dirs;    // LibTorch's folders a sandboxed run mounts (':')
// A program of the build by its CMake target name ("grader", "task2b-solution", "pp-mutants"),
// or nullptr for a name it does not know.
const char* program(const char* target);
}  // namespace dtlab::build_paths

#define DTLAB_SOURCE_DIR ::dtlab::build_paths::source_dir
#define DTLAB_BINARY_DIR ::dtlab::build_paths::binary_dir
#define DTLAB_BUILD_DIR ::dtlab::build_paths::binary_dir
// The path of a program of this build by its target name: DTLAB_PROGRAM("task2b-solution").
#define DTLAB_PROGRAM(target) ::dtlab::build_paths::program(target)
