# Helpers, one per kind of target, so that adding an exercise or a test is one line.

# Prints which LibTorch was found and which c10d backends it was built with.
function(dtlab_report_torch)
  set(defs "")
  foreach(t torch torch_cpu torch_cuda)
    if(TARGET ${t})
      get_target_property(d ${t} INTERFACE_COMPILE_DEFINITIONS)
      if(d)
        list(APPEND defs ${d})
      endif()
    endif()
  endforeach()
  set(gloo no)
  set(nccl no)
  if("USE_C10D_GLOO" IN_LIST defs)
    set(gloo yes)
  endif()
  if("USE_C10D_NCCL" IN_LIST defs)
    set(nccl yes)
  endif()
  set(DTLAB_HAVE_GLOO ${gloo} PARENT_SCOPE)
  set(DTLAB_HAVE_NCCL ${nccl} PARENT_SCOPE)
  message(STATUS "dtlab: LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")
  message(STATUS "dtlab: c10d backends: gloo=${gloo} nccl=${nccl}")
endfunction()

# Every dtlab C++ target shares these settings, and so can share the library's precompiled header.
function(dtlab_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  target_link_libraries(${target} PRIVATE dtlab_common)
  target_precompile_headers(${target} REUSE_FROM dtlab_common)
endfunction()

# The kit's own programs (grader, tools, tests, benchmarks) also link dtlab_tooling; student
# binaries never do.
function(dtlab_tool_defaults target)
  dtlab_target_defaults(${target})
  target_link_libraries(${target} PRIVATE dtlab_tooling)
endfunction()

# dtlab_task(T): builds `T` from tasks/T and `T-solution` from solutions/T, both with the driver
# common/drivers/T_main.cpp. `make T` builds and runs the student's version.
# The driver is compiled once (the object library driver-T) and linked into each of them.
function(dtlab_task name)
  file(GLOB student_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tasks/${name}/*.cpp)
  file(GLOB solution_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/solutions/${name}/*.cpp)
  add_library(driver-${name} OBJECT ${PROJECT_SOURCE_DIR}/common/drivers/${name}_main.cpp)
  dtlab_target_defaults(driver-${name})
  set(driver $<TARGET_OBJECTS:driver-${name}>)
  add_executable(${name} ${driver} ${student_sources})
  dtlab_target_defaults(${name})
  if(solution_sources)
    add_executable(${name}-solution ${driver} ${solution_sources})
    dtlab_target_defaults(${name}-solution)
  endif()
  # A submission to grade (grader check --submission DIR sets DTLAB_SUBMISSION_DIR): its files
  # with the same driver, built as submission-T into build/submission/T.
  if(DTLAB_SUBMISSION_DIR AND IS_DIRECTORY ${DTLAB_SUBMISSION_DIR}/${name})
    file(GLOB submission_sources CONFIGURE_DEPENDS ${DTLAB_SUBMISSION_DIR}/${name}/*.cpp)
    add_executable(submission-${name} EXCLUDE_FROM_ALL ${driver} ${submission_sources})
    dtlab_target_defaults(submission-${name})
    set_target_properties(submission-${name} PROPERTIES OUTPUT_NAME ${name}
                          RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/submission)
  endif()
endfunction()

# dtlab_test(name LABELS l1 [l2...] [SOURCES extra.cpp...] [TIMEOUT s] [RUN_SERIAL] [WHOLE]): tests/name.cpp as a GoogleTest binary
# whose tests ctest discovers one by one, labelled so that `ctest -L task1` selects them.
# WHOLE: the suite is one ctest test (one process) instead of one per GoogleTest case: for unit
# suites whose cases take milliseconds, where starting LibTorch for each case (~0.7 s) would
# be most of ctest's time. Their output still names every case.
function(dtlab_test name)
  cmake_parse_arguments(T "RUN_SERIAL;WHOLE" "TIMEOUT" "LABELS;SOURCES" ${ARGN})
  add_executable(${name} ${name}.cpp ${T_SOURCES})
  dtlab_tool_defaults(${name})
  target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    DTLAB_SOURCE_DIR="${PROJECT_SOURCE_DIR}" DTLAB_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(T_WHOLE)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
    return()
  endif()
  gtest_discover_tests(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} DISCOVERY_TIMEOUT 60)
  # Labels are set after discovery: passed through gtest_discover_tests, a list of labels is
  # split into property name/value pairs and all but the first are lost.
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake"
    "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${T_LABELS}\")\nendif()\n")
  if(T_RUN_SERIAL)  # for tests that read machine-wide counters (loopback traffic)
    file(APPEND "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake"
      "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES RUN_SERIAL TRUE)\nendif()\n")
  endif()
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES
               "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
endfunction()
