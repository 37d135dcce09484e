# Helpers, one per kind of target, so that adding an exercise or a test is one line.

# Note [Unity builds]: on 2 cores the build is dominated by a floor of about 5 s per translation
# unit that includes LibTorch, even with the precompiled header (loading its 500 MB takes that
# long), so the kit's own libraries and programs compile their small files in groups: one
# translation unit per folder of common/src (one concern each), or per batch of files elsewhere.
# The sources stay small files with one job; compiler messages still name them. Student files
# (tasks/, solutions/) are never grouped: an error there must be about that file alone.
# -DDTLAB_UNITY_BUILD=OFF compiles every file alone (faster rebuilds while editing one file).
option(DTLAB_UNITY_BUILD "Compile the kit's own sources in groups (Note [Unity builds])" ON)

# dtlab_unity(target FOLDERS): one translation unit per source folder of the target.
# dtlab_unity(target BATCH n): groups of n sources.
function(dtlab_unity target mode)
  if(NOT DTLAB_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON)
  if(mode STREQUAL "FOLDERS")
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    foreach(source IN LISTS sources)
      get_filename_component(folder ${source} DIRECTORY)
      file(RELATIVE_PATH group ${source_dir} ${folder})
      string(MAKE_C_IDENTIFIER "${target}_${group}" group)
      set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES UNITY_GROUP ${group})
    endforeach()
    set_target_properties(${target} PROPERTIES UNITY_BUILD_MODE GROUP)
  else()
    set_target_properties(${target} PROPERTIES UNITY_BUILD_MODE BATCH UNITY_BUILD_BATCH_SIZE ${ARGV2})
  endif()
endfunction()

# Note [One precompiled header]: every target that includes LibTorch sees common/include/dtlab/pch.h
# first, compiled once per build folder (dtlab_common's) and reused by every other target, in every
# build folder: build/, build-pip/ and the sanitizers' (clang's header, Note [Clang for the kit] in
# cmake/DtlabCompiler.cmake, also does the headers' template instantiations once). With
# DTLAB_PRECOMPILED_HEADER=OFF the same header is included as text instead (-include): the same
# code, parsed by each unit. Clang's binary header records the build folder's absolute paths, so
# a clone in another folder reads the units that use it back from the compiler cache only if they
# were compiled there (the ASan build, measured with the header: 18 of 48 compiles from the cache
# in a fresh clone; as text, 46 of 47); a build done before in the same clone reads them all
# (Note [Compiler cache]). The budgets CI is held to are a machine whose cache is empty and the
# same clone built again (docs/MEASUREMENTS.md, "CI's budget"), and the header makes the first
# cheaper by seconds a unit and leaves the second as it was.
option(DTLAB_PRECOMPILED_HEADER "Compile LibTorch's headers once per build (Note [One precompiled header])" ON)
function(dtlab_precompiled_header target)
  if(NOT DTLAB_PRECOMPILED_HEADER)
    target_compile_options(${target} PRIVATE "SHELL:-include ${PROJECT_SOURCE_DIR}/common/include/dtlab/pch.h")
  elseif(target STREQUAL "dtlab_common")
    target_precompile_headers(dtlab_common PRIVATE ${PROJECT_SOURCE_DIR}/common/include/dtlab/pch.h)
  else()
    target_precompile_headers(${target} REUSE_FROM dtlab_common)
  endif()
endfunction()

# Note [The kit at -O2]: in an optimised build, code that includes LibTorch (dtlab_common, the
# exercises, drivers, the grader's checks, tools: every target of dtlab_target_defaults) compiles
# at -O2, as Debian builds its packages, not at the Release type's -O3; the LibTorch-free
# libraries of dtlab_no_torch_defaults (the foundation, with the kit's own hot loops: tokenizers,
# readers, the AdamW kernel; the grader's base) keep -O3, and the suites' own code -O1 (Note
# [Tests at -O1]). What -O3 adds over -O2 (more aggressive inlining, loop unrolling and versioning,
# vectorising by a costlier model) buys nothing in code whose time is in LibTorch's kernels and
# dispatcher, and costs compile time in the units that instantiate LibTorch's templates: the same
# unit compiled at -O3 and -O2 in alternating rounds, docs/MEASUREMENTS.md ("CI's budget"). No
# result changes: neither level reorders floating-point arithmetic (no -ffast-math at either), so
# a run trains to the same bytes. -O2 keeps __OPTIMIZE__ defined, so the precompiled header,
# compiled at the same level for dtlab_common, serves every target as before.
function(dtlab_kit_optimisation target)
  target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:-O2>)
endfunction()

# Every dtlab C++ target shares these settings, and so can share the library's precompiled header.
function(dtlab_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  dtlab_kit_optimisation(${target})
  target_link_libraries(${target} PRIVATE dtlab_common)
  dtlab_precompiled_header(${target})
endfunction()

# Note [The foundation] (common/foundation.cmake): a target whose sources include no LibTorch
# header compiles without the precompiled header, with the same warnings (and the warning settings
# the kit's LibTorch target carries: GCC 12's C++20 false positives).
# Note [One standard for the foundation]: it compiles as C++17 in every build folder, the standard
# of Debian's LibTorch 1.13, where a LibTorch 2.x build compiles the rest as C++20. Its sources are
# the same in build/ and build-pip/, so with the same standard each unit preprocesses to the same
# text and a cold CI's 2.x build reads it from the compiler cache that its 1.13 build has just
# filled (ccache's preprocessor mode; `scripts/build.sh` prints each build's hits), instead of
# compiling it again: about 145 s of compiling (1.13's ninja log), the foundation, its suites and
# the grader's base.
# Objects of C++17 and C++20 link together as the libraries of any program do (libstdc++'s types
# are the same in both).
function(dtlab_no_torch_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
    $<TARGET_PROPERTY:dtlab_torch,INTERFACE_COMPILE_OPTIONS>)
  set_target_properties(${target} PROPERTIES CXX_STANDARD 17)
endfunction()

# Note [Tests at -O1]: the suites' own code (the test files, compiled into tests/*_test and the
# unit-test binaries) is compiled at -O1 in an optimised build, the kit and the exercises at -O2
# (Note [The kit at -O2]), the LibTorch-free libraries at the build type's level (-O3 in Release).
# A suite's time is in what it calls: LibTorch's kernels, the kit's library and the programs it
# starts, none of which this touches; the test bodies are
# GoogleTest's macros around those calls, which GCC spends long optimising at -O3: a unit-test
# batch compiles in 31.9 s at -O3 and 20.7 s at -O1 alone, and the suites' 29 compiles take 208 s
# of a build's wall at -O3 against 116-121 s at -O1 (docs/MEASUREMENTS.md, "CI's budget"). -O1
# keeps __OPTIMIZE__ defined as the library's precompiled header has it, so the one header still
# serves (clang refuses a header whose __OPTIMIZE__ differs, as -O0 would make it; GCC's
# -Winvalid-pch would say so). The sanitizer builds are -O1 throughout.
function(dtlab_test_optimisation target)
  target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:-O1>)
endfunction()

# The kit's own programs (grader, tools, tests, benchmarks) also link dtlab_tooling; student
# binaries never do.
function(dtlab_tool_defaults target)
  dtlab_target_defaults(${target})
  target_link_libraries(${target} PRIVATE dtlab_tooling)
endfunction()

# dtlab_task(T): builds `T` from tasks/T and `T-solution` from solutions/T, both with the driver
# common/drivers/T_main.cpp. `make T` builds and runs the student's version.
# Each part is compiled once, as an object library, and linked wherever it is needed: the driver
# (driver-T: T_main.cpp, which parses flags and calls one function), the kit's code that calls the
# contract's functions (kit-T: common/exercises/T/*.cpp, e.g. the pipeline's probe, tp's model and
# step; it cannot live in the library every program links, since it needs T's functions) and the reference
# (solution-T), which the suites that test the kit's code with the reference link too
# (dtlab_test's OBJECTS). The grader compiles a submission with T's own compile and link lines,
# read from build.ninja (Note [Submission commands] in grader/submission.cpp), outside this build.
#
# An exercise that uses others (exercises.txt's uses=A,B: the mesh composes pp's and tp's answers)
# also compiles the student's tasks/A/ and tasks/B/ into T, links their kit-A and kit-B, and links
# solution-A and solution-B into T-solution: each student's own answers, never another's.
function(dtlab_task name)
  file(GLOB student_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tasks/${name}/*.cpp)
  file(GLOB solution_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/solutions/${name}/*.cpp)
  file(GLOB kit_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/common/exercises/${name}/*.cpp)
  add_library(driver-${name} OBJECT ${PROJECT_SOURCE_DIR}/common/drivers/${name}_main.cpp)
  dtlab_target_defaults(driver-${name})
  set(objects $<TARGET_OBJECTS:driver-${name}> ${DTLAB_FORK_SERVER_OBJECTS})
  if(kit_sources)
    add_library(kit-${name} OBJECT ${kit_sources})
    dtlab_target_defaults(kit-${name})
    list(APPEND objects $<TARGET_OBJECTS:kit-${name}>)
  endif()
  set(used_solutions "")
  foreach(used IN LISTS DTLAB_EXERCISE_${name}_USES)
    file(GLOB used_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tasks/${used}/*.cpp)
    list(APPEND student_sources ${used_sources})
    if(TARGET kit-${used})
      list(APPEND objects $<TARGET_OBJECTS:kit-${used}>)
    endif()
    if(TARGET solution-${used})
      list(APPEND used_solutions $<TARGET_OBJECTS:solution-${used}>)
    endif()
  endforeach()
  add_executable(${name} ${objects} ${student_sources})
  dtlab_target_defaults(${name})
  if(solution_sources)
    add_library(solution-${name} OBJECT ${solution_sources})
    dtlab_target_defaults(solution-${name})
    add_executable(${name}-solution ${objects} $<TARGET_OBJECTS:solution-${name}> ${used_solutions})
    dtlab_target_defaults(${name}-solution)
  endif()
endfunction()

# A sanitized build runs several times slower (docs/SANITIZERS.md): its presets scale every test's
# timeout (DTLAB_TEST_TIMEOUT_SCALE: asan 3, tsan 6).
set(DTLAB_TEST_TIMEOUT_SCALE 1 CACHE STRING "Multiplies every test's timeout (the sanitizer presets raise it)")

# dtlab_test(name LABELS l1 [l2...] [SOURCES extra.cpp...] [OBJECTS lib...] [TIMEOUT s] [COST s] [RUN_SERIAL] [WHOLE] [NO_TORCH]
#            [WAITING test...]):
# tests/name.cpp as a GoogleTest binary whose tests ctest discovers one by one, labelled so that
# `ctest -L task1` selects them. OBJECTS: object libraries linked in (solution-T, kit-T of
# dtlab_task), compiled once for the exercise and every suite that needs them.
# NO_TORCH: the suite's sources include no LibTorch header (it starts the kit's programs and reads
# what they write), so they compile without the precompiled header (Note [The foundation]), and
# it links the foundation's tooling alone, so that LibTorch is not on its link line either: every
# one of its ctest entries is a process of its own, and a process that loads LibTorch spends
# about 0.6 s of CPU in LibTorch's start-up before its first line (`task2a --help`, on 1.13 and
# on 2.15 with its CUDA half alike), which the grader's mutant suite alone, a hundred entries,
# paid on each LibTorch. (A NO_TORCH suite that calls into the kit links dtlab_common itself.)
# WHOLE: the suite is one ctest test (one process) instead of one per GoogleTest case: for unit
# suites whose cases take milliseconds, where starting LibTorch for each case (~0.7 s) would
# be most of ctest's time. Their output still names every case.
# WAITING: the ctest names of this suite's entries that spend most of their time waiting for a
# timeout (Note [Tests that wait], tests/CMakeLists.txt); every other entry takes one core.
function(dtlab_test name)
  cmake_parse_arguments(T "RUN_SERIAL;WHOLE;NO_TORCH" "TIMEOUT;COST" "LABELS;SOURCES;OBJECTS;WAITING" ${ARGN})
  list(APPEND T_LABELS ${DTLAB_TEST_EXTRA_LABELS})  # e.g. solutions (tests/CMakeLists.txt)
  list(TRANSFORM T_OBJECTS REPLACE "^(.+)$" "$<TARGET_OBJECTS:\\1>")
  add_executable(${name} ${name}.cpp ${T_SOURCES} ${T_OBJECTS})
  if(T_NO_TORCH)
    dtlab_no_torch_defaults(${name})
    target_link_libraries(${name} PRIVATE dtlab_foundation_tooling dtlab_build_paths)
  else()
    dtlab_tool_defaults(${name})
  endif()
  target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main)
  dtlab_test_optimisation(${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  math(EXPR T_TIMEOUT "${T_TIMEOUT} * ${DTLAB_TEST_TIMEOUT_SCALE}")
  # Note [A reference run made once] (grader/reference_cache.h): the gradings of a build's suites
  # make each of the kit's reference runs once, not once per grading.
  set(cache_env "DTLAB_REFERENCE_CACHE=${PROJECT_BINARY_DIR}/reference-cache")
  if(T_WHOLE)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}" ENVIRONMENT "${cache_env}")
    if(T_COST)
      set_tests_properties(${name} PROPERTIES COST ${T_COST})
    endif()
    return()
  endif()
  gtest_discover_tests(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} DISCOVERY_TIMEOUT 60)
  # Labels are set after discovery: passed through gtest_discover_tests, a list of labels is
  # split into property name/value pairs and all but the first are lost.
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake"
    "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${T_LABELS}\" ENVIRONMENT \"${cache_env}\")\nendif()\n")
  # Note [Tests that wait] (tests/CMakeLists.txt): each entry takes a core, but those WAITING.
  set(cores "if(${name}_TESTS)\n  set(${name}_CORES \${${name}_TESTS})\n")
  foreach(waiting IN LISTS T_WAITING)
    # A parameterised case's ctest name goes on with "  # GetParam() = ...": matched as a prefix.
    string(REPLACE "." "[.]" pattern "^${waiting}( |$)")
    string(APPEND cores "  set(matched \${${name}_TESTS})\n"
                        "  list(FILTER matched INCLUDE REGEX \"${pattern}\")\n"
                        "  if(NOT matched)\n"
                        "    message(WARNING \"${name}: WAITING names ${waiting}, which is not one of its tests\")\n"
                        "  endif()\n"
                        "  list(FILTER ${name}_CORES EXCLUDE REGEX \"${pattern}\")\n")
  endforeach()
  string(APPEND cores "  if(${name}_CORES)\n"
                      "    set_tests_properties(\${${name}_CORES} PROPERTIES RESOURCE_GROUPS \"cores:1\")\n"
                      "  endif()\nendif()\n")
  file(APPEND "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake" "${cores}")
  # COST: Note [Test order] (tests/CMakeLists.txt).
  if(T_COST)
    file(APPEND "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake"
      "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES COST ${T_COST})\nendif()\n")
  endif()
  if(T_RUN_SERIAL)  # for tests that read machine-wide counters (loopback traffic)
    file(APPEND "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake"
      "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES RUN_SERIAL TRUE)\nendif()\n")
  endif()
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES
               "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
endfunction()

# Unit suites: tests/NAME.cpp files whose cases take milliseconds. They are compiled into ONE
# binary, tests/unit_tests (Note [Unity builds]: each test binary costs a compile floor and a
# link), or, for suites that need no tensor, into tests/foundation_tests, which links the
# LibTorch-free foundation alone and compiles without LibTorch's headers (Note [The foundation],
# common/foundation.cmake). Each file stays its own ctest entry with its own labels: the entry
# runs its binary with a --gtest_filter of the GoogleTest suites that file defines (TEST, TEST_F,
# and TEST_P under any instantiation prefix), in one process (starting LibTorch once, not once
# per case). A suite name defined in two files is a configure error, so that no case runs under
# two entries.
#
# dtlab_unit_suite(NAME LABELS l1 [l2...] [TIMEOUT s] [FOUNDATION] [WAITING]) declares one; FOUNDATION puts
# it in foundation_tests; WAITING: its cases mostly wait for timeouts (Note [Tests that wait]).
# dtlab_unit_tests() builds both binaries from every suite declared before it.
function(dtlab_unit_suite name)
  cmake_parse_arguments(T "FOUNDATION;WAITING" "TIMEOUT" "LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  math(EXPR T_TIMEOUT "${T_TIMEOUT} * ${DTLAB_TEST_TIMEOUT_SCALE}")
  set(binary unit_tests)
  if(T_FOUNDATION)
    set(binary foundation_tests)
  endif()
  set(file ${CMAKE_CURRENT_SOURCE_DIR}/${name}.cpp)
  # The filter is read from the file at configure time: editing the file reconfigures, or a
  # suite added to it would run under no entry (unit_tests_selection would say so).
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  file(STRINGS ${file} lines REGEX "^TEST(_F|_P)?\\(")
  set(suites "")
  set(parameterized "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^TEST(_F|_P)?\\( *([A-Za-z0-9_]+).*" "\\2" suite "${line}")
    list(APPEND suites ${suite})
    if(line MATCHES "^TEST_P")
      list(APPEND parameterized ${suite})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES suites)
  if(NOT suites)
    message(FATAL_ERROR "${file}: no TEST, TEST_F or TEST_P at the start of a line")
  endif()
  get_property(owners GLOBAL PROPERTY DTLAB_UNIT_SUITE_OWNERS)
  set(filter "")
  foreach(suite IN LISTS suites)
    foreach(owner IN LISTS owners)
      if(owner MATCHES "^${suite}=(.*)$")
        message(FATAL_ERROR "GoogleTest suite ${suite} is defined in ${CMAKE_MATCH_1}.cpp and ${name}.cpp: "
                            "rename one, each unit suite's ctest entry selects its file's suites by name")
      endif()
    endforeach()
    set_property(GLOBAL APPEND PROPERTY DTLAB_UNIT_SUITE_OWNERS "${suite}=${name}")
    if(suite IN_LIST parameterized)  # INSTANTIATE_TEST_SUITE_P(Prefix, ...) names Prefix/Suite.Case/n
      string(APPEND filter "*/${suite}.*:")
    else()
      string(APPEND filter "${suite}.*:")
    endif()
  endforeach()
  string(REGEX REPLACE ":$" "" filter "${filter}")
  set_property(GLOBAL APPEND PROPERTY DTLAB_UNIT_SOURCES_${binary} ${file})
  set_property(GLOBAL APPEND_STRING PROPERTY DTLAB_UNIT_FILTER_${binary} "${filter}:")
  add_test(NAME ${name} COMMAND ${binary} --gtest_filter=${filter})
  # "unit": every entry of the two binaries, the suites CI runs under the sanitizers (`make asan-unit`).
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "unit;${T_LABELS}")
  if(T_WAITING)
    set_property(GLOBAL APPEND PROPERTY DTLAB_WAITING_TESTS ${name})
  endif()
endfunction()

# Note [Tests that wait] (tests/CMakeLists.txt): every test of this directory added by add_test
# (the unit entries, WHOLE suites, scripts) takes one core, but those a unit suite declared WAITING.
# Called once, after the directory's last test.
function(dtlab_tests_take_a_core)
  get_property(tests DIRECTORY PROPERTY TESTS)
  get_property(waiting GLOBAL PROPERTY DTLAB_WAITING_TESTS)
  foreach(t IN LISTS tests)
    if(NOT t IN_LIST waiting)
      set_tests_properties(${t} PROPERTIES RESOURCE_GROUPS "cores:1")
    endif()
  endforeach()
endfunction()

# A case that no entry selects (a TEST not at the start of its line) would never run: the entry
# BINARY_selection lists the binary's cases outside every entry's filter and fails if there is one.
function(dtlab_unit_selection_test binary)
  get_property(all GLOBAL PROPERTY DTLAB_UNIT_FILTER_${binary})
  add_test(NAME ${binary}_selection
           COMMAND ${CMAKE_COMMAND} -DBINARY=$<TARGET_FILE:${binary}> "-DFILTER=${all}"
                   -P ${PROJECT_SOURCE_DIR}/cmake/check_unit_selection.cmake)
  set_tests_properties(${binary}_selection PROPERTIES TIMEOUT 60 LABELS unit)
endfunction()

function(dtlab_unit_tests)
  get_property(sources GLOBAL PROPERTY DTLAB_UNIT_SOURCES_unit_tests)
  add_executable(unit_tests ${sources})
  dtlab_tool_defaults(unit_tests)
  dtlab_unity(unit_tests BATCH 4)
  dtlab_test_optimisation(unit_tests)
  target_link_libraries(unit_tests PRIVATE GTest::gtest GTest::gtest_main)
  dtlab_unit_selection_test(unit_tests)

  # Note [The foundation]: no LibTorch on the compile or the link line, no precompiled header.
  get_property(sources GLOBAL PROPERTY DTLAB_UNIT_SOURCES_foundation_tests)
  add_executable(foundation_tests ${sources})
  dtlab_no_torch_defaults(foundation_tests)
  target_link_libraries(foundation_tests PRIVATE dtlab_foundation_tooling dtlab_build_paths GTest::gtest
                        GTest::gtest_main)
  # Every object of the foundation linked in, used or not: a foundation file that calls into
  # dtlab_common (which a suite happens not to reach) fails this link on every build, not only
  # where some other symbol of its unit is pulled in (glue's flags once did, on one LibTorch).
  target_link_options(foundation_tests PRIVATE
    "LINKER:--whole-archive,$<TARGET_FILE:dtlab_foundation>,$<TARGET_FILE:dtlab_foundation_tooling>,--no-whole-archive")
  dtlab_unity(foundation_tests BATCH 4)
  dtlab_test_optimisation(foundation_tests)
  dtlab_unit_selection_test(foundation_tests)
endfunction()

# dtlab_write_build_paths(): Note [Build paths] (common/include/dtlab/tooling/build_paths.h). Writes
# build_paths.cpp, compiled into dtlab_build_paths: this checkout's source and build folders, the
# folders a sandboxed run mounts (DTLAB_SANDBOX_LIBRARY_DIRS) and the path of every program the
# build defines, by target name. Called once, after every target is defined.
function(dtlab_write_build_paths)
  set(programs "")
  foreach(dir IN ITEMS ${PROJECT_SOURCE_DIR} ${ARGN})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
      get_target_property(type ${t} TYPE)
      if(type STREQUAL "EXECUTABLE")
        string(APPEND programs "    {\"${t}\", \"$<TARGET_FILE:${t}>\"},\n")
      endif()
    endforeach()
  endforeach()
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/build_paths.cpp CONTENT
"// Written by the configure (dtlab_write_build_paths, cmake/Dtlab.cmake): Note [Build paths].
#include \"dtlab/tooling/build_paths.h\"

#include <cstring>
#include <stdexcept>
#include <string>

namespace dtlab::build_paths {
const char* const source_dir = \"${PROJECT_SOURCE_DIR}\";
const char* const binary_dir = \"${PROJECT_BINARY_DIR}\";
const char* const sandbox_library_dirs = \"${DTLAB_SANDBOX_LIBRARY_DIRS}\";

namespace {
struct Program {
  const char* target;
  const char* path;
};
const Program kPrograms[] = {
${programs}};
}  // namespace

const char* program(const char* target) {
  for (const Program& p : kPrograms) {
    if (std::strcmp(p.target, target) == 0) return p.path;
  }
  throw std::invalid_argument(std::string(\"this build (\") + binary_dir + \") defines no program '\" + target +
                              \"' (Note [Build paths], dtlab/tooling/build_paths.h)\");
}
}  // namespace dtlab::build_paths
")
endfunction()
