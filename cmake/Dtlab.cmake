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

# dtlab_task(T): builds `T` from tasks/T and `T-solution` from solutions/T, both with the driver
# common/drivers/T_main.cpp. `make T` builds and runs the student's version.
function(dtlab_task name)
  file(GLOB student_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tasks/${name}/*.cpp)
  file(GLOB solution_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/solutions/${name}/*.cpp)
  set(driver ${PROJECT_SOURCE_DIR}/common/drivers/${name}_main.cpp)
  add_executable(${name} ${driver} ${student_sources})
  dtlab_target_defaults(${name})
  if(solution_sources)
    add_executable(${name}-solution ${driver} ${solution_sources})
    dtlab_target_defaults(${name}-solution)
  endif()
endfunction()

# dtlab_test(name LABELS l1 [l2...] [SOURCES extra.cpp...] [TIMEOUT s] [RUN_SERIAL]): tests/name.cpp as a GoogleTest binary
# whose tests ctest discovers one by one, labelled so that `ctest -L task1` selects them.
function(dtlab_test name)
  cmake_parse_arguments(T "RUN_SERIAL" "TIMEOUT" "LABELS;SOURCES" ${ARGN})
  add_executable(${name} ${name}.cpp ${T_SOURCES})
  dtlab_target_defaults(${name})
  target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    DTLAB_SOURCE_DIR="${PROJECT_SOURCE_DIR}" DTLAB_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
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
