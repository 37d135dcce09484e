# Note [Which LibTorch]: the one place the build chooses a LibTorch, its C++ standard and its
# backends; everything else links the target dtlab_torch and reads DTLAB_TORCH_* / DTLAB_HAVE_*.
#
# DTLAB_TORCH=system (the default): find_package(Torch): Debian 12's libtorch-dev (1.13.1, CPU,
# Gloo), or any LibTorch distribution found through CMAKE_PREFIX_PATH.
#
# DTLAB_TORCH=<folder>: the LibTorch inside a pip-installed torch 2.x: a Python venv
# (scripts/setup.sh --torch 2.15.0 makes one in .torch/venv; any venv of yours works), or the
# wheel's torch/ folder itself. PyPI's Linux wheels are CUDA builds. Two ways to link them:
#   DTLAB_CUDA=OFF (default): the CPU half only, libtorch_cpu.so and libc10.so, as an imported
#     target made here from the wheel's files. Nothing CUDA is needed to configure or compile; at
#     run time libtorch_cpu.so loads libcudart.so.13 and libcupti.so.13, which the venv's nvidia
#     wheels provide (the library's RPATH names them) or a CUDA toolkit does (its lib64 is added
#     to the programs' RPATH when one is found). find_package(Torch) is not used: for a CUDA
#     wheel it requires a CUDA toolkit with nvcc, and it links libtorch_cuda.so, whose cuFile,
#     cuSPARSELt and NVSHMEM dependencies a CPU machine rarely has.
#   DTLAB_CUDA=ON: find_package(Torch) on the wheel, the whole of it (torch_cuda, c10_cuda,
#     ProcessGroupNCCL): needs a CUDA toolkit at configure time.
# LibTorch 2.x's headers need C++20 (2.15 stops C++17 with #error); 1.13's build as C++17.
set(DTLAB_TORCH "system" CACHE STRING "LibTorch to build with: 'system' (find_package) or a venv / torch folder with torch 2.x")
option(DTLAB_CUDA "With a pip torch: link its CUDA half (torch_cuda, NCCL) too" OFF)

# The torch/ folder of a venv (lib/pythonX.Y/site-packages/torch) or of a wheel.
function(dtlab_torch_package_dir folder out)
  get_filename_component(folder "${folder}" ABSOLUTE BASE_DIR "${PROJECT_SOURCE_DIR}")
  if(EXISTS "${folder}/share/cmake/Torch/TorchConfig.cmake")
    set(${out} "${folder}" PARENT_SCOPE)
    return()
  endif()
  file(GLOB candidates "${folder}/lib/python3*/site-packages/torch/share/cmake/Torch/TorchConfig.cmake"
                       "${folder}/torch/share/cmake/Torch/TorchConfig.cmake")
  if(NOT candidates)
    message(FATAL_ERROR "DTLAB_TORCH=${folder}: no torch there (looked for share/cmake/Torch, "
                        "lib/python3*/site-packages/torch and torch/). Make one with "
                        "scripts/setup.sh --torch VERSION, or name a venv where torch 2.x is installed.")
  endif()
  list(GET candidates 0 config)
  get_filename_component(dir "${config}/../../../.." ABSOLUTE)
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

# The wheel's headers without the {fmt} it bundles (torch/include/fmt, 12.x): a folder of links
# to every other entry of torch/include, so that <fmt/...> finds Debian's {fmt}, the one the kit
# links (Note [LibTorch versions]). LibTorch's public headers need no {fmt} of their own.
function(dtlab_torch_include_dir torch_dir out)
  set(shadow "${PROJECT_BINARY_DIR}/torch-include")
  file(REMOVE_RECURSE "${shadow}")
  file(MAKE_DIRECTORY "${shadow}")
  file(GLOB entries RELATIVE "${torch_dir}/include" "${torch_dir}/include/*")
  foreach(entry IN LISTS entries)
    if(NOT entry STREQUAL "fmt")
      file(CREATE_LINK "${torch_dir}/include/${entry}" "${shadow}/${entry}" SYMBOLIC)
    endif()
  endforeach()
  set(${out} "${shadow}" PARENT_SCOPE)
endfunction()

# The CPU half of a wheel as an imported target. Its compile definitions are the wheel's own,
# read from the target file the wheel ships (USE_DISTRIBUTED, USE_C10D_GLOO, ...).
function(dtlab_torch_cpu_target torch_dir)
  set(targets "${torch_dir}/share/cmake/Caffe2/Caffe2Targets.cmake")
  file(READ "${targets}" text)
  string(REGEX MATCH "set_target_properties\\(torch_cpu PROPERTIES[ \n]*INTERFACE_COMPILE_DEFINITIONS \"([^\"]*)\"" _ "${text}")
  set(definitions "${CMAKE_MATCH_1}")
  if(NOT definitions)
    message(FATAL_ERROR "${targets}: found no compile definitions for torch_cpu")
  endif()
  add_library(dtlab_torch_cpu SHARED IMPORTED GLOBAL)
  set_target_properties(dtlab_torch_cpu PROPERTIES IMPORTED_LOCATION "${torch_dir}/lib/libtorch_cpu.so"
    INTERFACE_COMPILE_DEFINITIONS "${definitions}")
  add_library(dtlab_c10 SHARED IMPORTED GLOBAL)
  set_target_properties(dtlab_c10 PROPERTIES IMPORTED_LOCATION "${torch_dir}/lib/libc10.so")
  dtlab_torch_include_dir("${torch_dir}" include_dir)
  target_include_directories(dtlab_torch SYSTEM INTERFACE "${include_dir}"
                                                          "${include_dir}/torch/csrc/api/include")
  target_link_libraries(dtlab_torch INTERFACE dtlab_torch_cpu dtlab_c10)
  # libtorch_cpu.so's own RPATH finds the venv's nvidia wheels; a CUDA toolkit's runtime is the
  # fallback for a wheel installed without them (pip install --no-deps).
  find_library(DTLAB_CUDART libcudart.so.13 PATHS /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
  find_library(DTLAB_CUPTI libcupti.so.13 PATHS /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64)
  set(rpath "${torch_dir}/lib")
  foreach(lib DTLAB_CUDART DTLAB_CUPTI)
    if(${lib})
      get_filename_component(d "${${lib}}" DIRECTORY)
      list(APPEND rpath "${d}")
    endif()
  endforeach()
  set(DTLAB_TORCH_RPATH "${rpath}" PARENT_SCOPE)
  # DT_RPATH, not DT_RUNPATH: only DT_RPATH is searched for the libraries that libtorch_cpu.so
  # itself needs (libcudart.so.13, libcupti.so.13), where the fallback above matters.
  target_link_options(dtlab_torch INTERFACE -Wl,--disable-new-dtags)
endfunction()

# Finds the LibTorch, defines dtlab_torch and sets, for the caller: DTLAB_TORCH_VERSION,
# DTLAB_TORCH_DIR, DTLAB_HAVE_GLOO, DTLAB_HAVE_NCCL, DTLAB_HAVE_CUDA, CMAKE_CXX_STANDARD.
macro(dtlab_find_torch)
  add_library(dtlab_torch INTERFACE)
  set(DTLAB_TORCH_RPATH "")
  if(DTLAB_TORCH STREQUAL "system")
    find_package(Torch REQUIRED)
    target_link_libraries(dtlab_torch INTERFACE ${TORCH_LIBRARIES})
    set(DTLAB_TORCH_VERSION "${Torch_VERSION}")
    set(DTLAB_TORCH_DIR "${TORCH_INSTALL_PREFIX}")
    set(DTLAB_TORCH_KIND "found by find_package")
  else()
    dtlab_torch_package_dir("${DTLAB_TORCH}" DTLAB_TORCH_DIR)
    include("${DTLAB_TORCH_DIR}/share/cmake/Torch/TorchConfigVersion.cmake")
    set(DTLAB_TORCH_VERSION "${PACKAGE_VERSION}")
    if(DTLAB_CUDA)
      set(Torch_DIR "${DTLAB_TORCH_DIR}/share/cmake/Torch")
      find_package(Torch REQUIRED CONFIG)
      target_link_libraries(dtlab_torch INTERFACE ${TORCH_LIBRARIES})
      set(DTLAB_TORCH_KIND "pip wheel, CPU and CUDA")
      set(DTLAB_TORCH_RPATH "${DTLAB_TORCH_DIR}/lib")
    else()
      dtlab_torch_cpu_target("${DTLAB_TORCH_DIR}")
      set(DTLAB_TORCH_KIND "pip wheel, CPU half")
    endif()
  endif()
  if(DTLAB_TORCH_VERSION VERSION_LESS 2.0)
    set(CMAKE_CXX_STANDARD 17)
  else()
    set(CMAKE_CXX_STANDARD 20)
  endif()
  # The backends: the compile definitions that every target linking dtlab_torch receives.
  set(_defs "")
  foreach(t torch torch_cpu torch_cuda dtlab_torch_cpu)
    if(TARGET ${t})
      get_target_property(d ${t} INTERFACE_COMPILE_DEFINITIONS)
      if(d)
        list(APPEND _defs ${d})
      endif()
    endif()
  endforeach()
  set(DTLAB_HAVE_GLOO no)
  set(DTLAB_HAVE_NCCL no)
  set(DTLAB_HAVE_CUDA no)
  if("USE_C10D_GLOO" IN_LIST _defs)
    set(DTLAB_HAVE_GLOO yes)
  endif()
  if("USE_C10D_NCCL" IN_LIST _defs)
    set(DTLAB_HAVE_NCCL yes)
  endif()
  if(TARGET torch_cuda OR TARGET c10_cuda)
    set(DTLAB_HAVE_CUDA yes)
  endif()
  if(DTLAB_TORCH_RPATH)
    set(CMAKE_BUILD_RPATH "${DTLAB_TORCH_RPATH}")
  endif()
  # GCC 12 under C++20 (std::string constexpr) warns -Wstringop-overflow inside
  # basic_string::_M_replace for `"literal" + std::string(...)`, with a bound no code can reach:
  # a false positive of its inliner, which moves with the unity batches. Off for that pair only.
  if(CMAKE_CXX_STANDARD EQUAL 20 AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(dtlab_torch INTERFACE -Wno-stringop-overflow)
  endif()
  # What the kit prints and records (results.json's provenance) about the LibTorch it runs on.
  target_compile_definitions(dtlab_torch INTERFACE
    "DTLAB_TORCH_DESCRIPTION=\"LibTorch ${DTLAB_TORCH_VERSION} (${DTLAB_TORCH_KIND}), C++${CMAKE_CXX_STANDARD}\"")
  message(STATUS "dtlab: LibTorch ${DTLAB_TORCH_VERSION} (${DTLAB_TORCH_KIND}) from ${DTLAB_TORCH_DIR}")
  message(STATUS "dtlab: C++${CMAKE_CXX_STANDARD}; c10d backends: gloo=${DTLAB_HAVE_GLOO} nccl=${DTLAB_HAVE_NCCL}; cuda=${DTLAB_HAVE_CUDA}")
endmacro()
