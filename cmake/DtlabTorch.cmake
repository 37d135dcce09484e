# Note [Which LibTorch]: the one place the build chooses a LibTorch, its C++ standard and its
# backends; everything else links the target dtlab_torch and reads DTLAB_TORCH_* / DTLAB_HAVE_*.
#
# DTLAB_TORCH=system (the default): find_package(Torch): Debian 12's libtorch-dev (1.13.1, CPU,
# Gloo), or any LibTorch distribution found through CMAKE_PREFIX_PATH.
#
# DTLAB_TORCH=<folder>: the LibTorch inside a pip-installed torch 2.x: a Python venv
# (scripts/setup.sh --torch 2.15.0 makes one in .torch/venv; any venv of yours works), or the
# wheel's torch/ folder itself. Linked from the wheel's own files as imported targets made here,
# with the compile definitions read from the target file the wheel ships. find_package(Torch) is
# not used: on a CUDA wheel it demands a CUDA toolkit with nvcc (a GPU node's venv often has
# none), and its find_library/find_dependency calls prefer a system LibTorch (Debian's) to the
# wheel's own.
#   DTLAB_CUDA=AUTO (default): the CUDA half too where the wheel has one (lib/libtorch_cuda.so;
#     PyPI's Linux wheels do, the CPU wheels of download.pytorch.org do not).
#   DTLAB_CUDA=ON: the CUDA half, an error without one. OFF: the CPU half only.
# The CPU half is libtorch_cpu.so and libc10.so; nothing CUDA is needed to configure or compile
# it; at run time libtorch_cpu.so loads libcudart.so.13 and libcupti.so.13, which the venv's
# nvidia wheels provide (the library's RPATH names them) or a CUDA toolkit does (its lib64 is
# added to the programs' RPATH when one is found). The CUDA half adds libtorch_cuda.so and
# libc10_cuda.so (ProcessGroupNCCL, CUDA streams and allocator), compiled against the CUDA and
# NCCL headers of the venv's nvidia wheels (site-packages/nvidia/*/include): still no toolkit.
# Such a build runs on a machine without a GPU too: CUDA is then simply absent (the kit says so
# at once where --backend nccl or a CUDA device is asked for).
# LibTorch 2.x's headers need C++20 (2.15 stops C++17 with #error); 1.13's build as C++17.
# The targets that include no LibTorch header stay C++17 in both (Note [One standard for the
# foundation], cmake/Dtlab.cmake).
set(DTLAB_TORCH "system" CACHE STRING "LibTorch to build with: 'system' (find_package) or a venv / torch folder with torch 2.x")
include(${CMAKE_CURRENT_LIST_DIR}/DtlabTorchStartOrder.cmake)
set(DTLAB_CUDA "AUTO" CACHE STRING "With a pip torch: link its CUDA half (torch_cuda, NCCL): AUTO (where the wheel has one), ON or OFF")

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

# The wheel's halves as imported targets. Their compile definitions are the wheel's own, read from
# the target file the wheel ships (USE_DISTRIBUTED, USE_C10D_GLOO, ...; USE_C10D_NCCL for CUDA).
function(dtlab_torch_definitions text target out)
  string(REGEX MATCH "set_target_properties\\(${target} PROPERTIES[ \n]*INTERFACE_COMPILE_DEFINITIONS \"([^\"]*)\"" _ "${text}")
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

function(dtlab_torch_cpu_target torch_dir)
  set(targets "${torch_dir}/share/cmake/Caffe2/Caffe2Targets.cmake")
  file(READ "${targets}" text)
  dtlab_torch_definitions("${text}" torch_cpu definitions)
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
  set(DTLAB_TORCH_TARGETS_TEXT "${text}" PARENT_SCOPE)
  # DT_RPATH, not DT_RUNPATH: only DT_RPATH is searched for the libraries that libtorch_cpu.so
  # itself needs (libcudart.so.13, libcupti.so.13), where the fallback above matters.
  target_link_options(dtlab_torch INTERFACE -Wl,--disable-new-dtags)
endfunction()

# The CUDA half: libtorch_cuda.so and libc10_cuda.so. Loading libtorch_cuda.so is what registers
# CUDA with LibTorch, and it costs every process that loads it, GPU or not: so only the kit's
# libdtlab_cuda_half.so links it (--no-as-needed, as the wheel's own torch_cuda_library does,
# through dtlab_torch_cuda_half), and a program loads that where a GPU driver is (Note [The CUDA
# half where a GPU is], common/include/dtlab/core/cuda_half.h). Its compile definitions
# (USE_C10D_NCCL) are every target's, as the headers are. The headers of CUDA and NCCL come from
# the venv's nvidia wheels, which the wheel's libraries also load at run time (their RPATH names
# those folders).
function(dtlab_torch_cuda_headers torch_dir out)
  get_filename_component(site_packages "${torch_dir}/.." ABSOLUTE)
  file(GLOB includes LIST_DIRECTORIES true "${site_packages}/nvidia/*/include")
  set(${out} "" PARENT_SCOPE)
  foreach(dir IN LISTS includes)
    if(EXISTS "${dir}/cuda_runtime_api.h")
      set(${out} "${includes}" PARENT_SCOPE)
    endif()
  endforeach()
endfunction()

# cuda_runtime.h includes "crt/host_config.h", nvcc's part of CUDA, which CUDA 13's wheels leave
# out (seen on a GPU machine with torch 2.11+cu130: "crt/host_config.h: No such file"; the build
# here had found one in /usr/local/include, where the system toolkit put it). A CUDA toolkit's
# include folder supplies it, searched after the wheel's so that the wheel's own headers win.
# `out`: "" where the compiler finds it already, the folder to add, or NOTFOUND.
function(dtlab_cuda_crt_include cuda_includes out)
  foreach(dir IN LISTS cuda_includes ITEMS /usr/include /usr/local/include)
    if(EXISTS "${dir}/crt/host_config.h")
      set(${out} "" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(candidates "")
  foreach(var CUDA_HOME CUDA_PATH CUDAToolkit_ROOT)
    if(DEFINED ENV{${var}})
      list(APPEND candidates "$ENV{${var}}/include")
    endif()
  endforeach()
  list(APPEND candidates /usr/local/cuda/include /usr/local/cuda/targets/x86_64-linux/include)
  foreach(dir IN LISTS candidates)
    if(EXISTS "${dir}/crt/host_config.h")
      set(${out} "${dir}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} NOTFOUND PARENT_SCOPE)
endfunction()

function(dtlab_torch_cuda_target torch_dir targets_text cuda_includes)
  dtlab_torch_definitions("${targets_text}" torch_cuda definitions)
  get_filename_component(site_packages "${torch_dir}/.." ABSOLUTE)
  add_library(dtlab_torch_cuda SHARED IMPORTED GLOBAL)
  set_target_properties(dtlab_torch_cuda PROPERTIES IMPORTED_LOCATION "${torch_dir}/lib/libtorch_cuda.so"
    INTERFACE_COMPILE_DEFINITIONS "${definitions}")
  add_library(dtlab_c10_cuda SHARED IMPORTED GLOBAL)
  set_target_properties(dtlab_c10_cuda PROPERTIES IMPORTED_LOCATION "${torch_dir}/lib/libc10_cuda.so")
  target_include_directories(dtlab_torch SYSTEM INTERFACE ${cuda_includes})
  target_compile_definitions(dtlab_torch INTERFACE ${definitions})
  add_library(dtlab_torch_cuda_half INTERFACE)
  target_link_libraries(dtlab_torch_cuda_half INTERFACE dtlab_torch "-Wl,--no-as-needed" dtlab_torch_cuda dtlab_c10_cuda
                        "-Wl,--as-needed")
  # The linker looks for libtorch_cuda.so's own needs (libnccl, libcudnn, libcufile, ...) to
  # check the link; -rpath-link names the folders where the wheel's RPATH finds them at run time.
  file(GLOB cuda_libs LIST_DIRECTORIES true "${site_packages}/nvidia/*/lib")
  list(JOIN cuda_libs ":" rpath_link)
  target_link_options(dtlab_torch_cuda_half INTERFACE "-Wl,-rpath-link,${torch_dir}/lib:${rpath_link}")
endfunction()

# Finds the LibTorch, defines dtlab_torch and sets, for the caller: DTLAB_TORCH_VERSION,
# DTLAB_TORCH_DIR, DTLAB_HAVE_GLOO, DTLAB_HAVE_NCCL, DTLAB_HAVE_CUDA, CMAKE_CXX_STANDARD.
macro(dtlab_find_torch)
  add_library(dtlab_torch INTERFACE)
  set(DTLAB_TORCH_RPATH "")
  if(DTLAB_TORCH STREQUAL "system")
    find_package(Torch REQUIRED)
    target_link_libraries(dtlab_torch INTERFACE ${TORCH_LIBRARIES})
    # Note [LibTorch's start order] (cmake/DtlabTorchStartOrder.cmake).
    get_target_property(_torch_cpu_file torch_cpu IMPORTED_LOCATION_RELWITHDEBINFO)
    if(NOT _torch_cpu_file)
      get_target_property(_torch_cpu_file torch_cpu LOCATION)
    endif()
    dtlab_torch_start_order(dtlab_torch "${_torch_cpu_file}")
    set(DTLAB_TORCH_CPU_FILE "${_torch_cpu_file}")
    set(DTLAB_TORCH_VERSION "${Torch_VERSION}")
    set(DTLAB_TORCH_DIR "${TORCH_INSTALL_PREFIX}")
    set(DTLAB_TORCH_KIND "found by find_package")
  else()
    dtlab_torch_package_dir("${DTLAB_TORCH}" DTLAB_TORCH_DIR)
    include("${DTLAB_TORCH_DIR}/share/cmake/Torch/TorchConfigVersion.cmake")
    set(DTLAB_TORCH_VERSION "${PACKAGE_VERSION}")
    dtlab_torch_cpu_target("${DTLAB_TORCH_DIR}")
    set(DTLAB_TORCH_KIND "pip wheel, CPU half")
    if(NOT DTLAB_CUDA MATCHES "^(AUTO|ON|OFF)$")
      message(FATAL_ERROR "DTLAB_CUDA=${DTLAB_CUDA}: use AUTO, ON or OFF")
    endif()
    set(_no_cuda_why "")
    if(NOT EXISTS "${DTLAB_TORCH_DIR}/lib/libtorch_cuda.so")
      set(_no_cuda_why "a CPU-only torch (no lib/libtorch_cuda.so)")
    else()
      dtlab_torch_cuda_headers("${DTLAB_TORCH_DIR}" _cuda_includes)
      if(NOT _cuda_includes)
        set(_no_cuda_why "a CUDA wheel without its nvidia packages beside it (no nvidia/*/include/"
                         "cuda_runtime_api.h: installed with --no-deps, or an unpacked wheel)")
      else()
        dtlab_cuda_crt_include("${_cuda_includes}" _crt_include)
        if(_crt_include STREQUAL "NOTFOUND")
          set(_no_cuda_why "a CUDA wheel whose headers lack crt/host_config.h, and no CUDA toolkit "
                           "has it (CUDA_HOME, /usr/local/cuda/include): install the CUDA toolkit's headers")
        elseif(_crt_include)
          list(APPEND _cuda_includes "${_crt_include}")
          message(STATUS "dtlab: crt/host_config.h from the CUDA toolkit in ${_crt_include}")
        endif()
      endif()
    endif()
    if(DTLAB_CUDA STREQUAL "OFF")
      set(_no_cuda_why "DTLAB_CUDA=OFF")
    elseif(DTLAB_CUDA STREQUAL "ON" AND _no_cuda_why)
      message(FATAL_ERROR "DTLAB_CUDA=ON: ${DTLAB_TORCH_DIR} is ${_no_cuda_why}. Install torch with its "
                          "dependencies (pip install torch), or configure with DTLAB_CUDA=AUTO or OFF")
    endif()
    if(_no_cuda_why)
      message(STATUS "dtlab: the CPU half of this torch only: ${_no_cuda_why}")
    else()
      dtlab_torch_cuda_target("${DTLAB_TORCH_DIR}" "${DTLAB_TORCH_TARGETS_TEXT}" "${_cuda_includes}")
      set(DTLAB_TORCH_KIND "pip wheel, CPU and CUDA")
    endif()
  endif()
  if(DTLAB_TORCH_VERSION VERSION_LESS 2.0)
    set(CMAKE_CXX_STANDARD 17)
  else()
    set(CMAKE_CXX_STANDARD 20)
  endif()
  # The backends: the compile definitions that every target linking dtlab_torch receives.
  set(_defs "")
  foreach(t torch torch_cpu torch_cuda dtlab_torch_cpu dtlab_torch_cuda)
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
  if(TARGET torch_cuda OR TARGET c10_cuda OR TARGET dtlab_torch_cuda)
    set(DTLAB_HAVE_CUDA yes)
    # find_package's torch target links its CUDA half into every program: libdtlab_cuda_half.so
    # links the same and is loaded everywhere (it then only brings the NCCL group's maker).
    if(NOT TARGET dtlab_torch_cuda_half)
      add_library(dtlab_torch_cuda_half INTERFACE)
      target_link_libraries(dtlab_torch_cuda_half INTERFACE dtlab_torch)
      set(DTLAB_CUDA_HALF_EVERYWHERE 1)
    endif()
  endif()
  if(DTLAB_TORCH_RPATH)
    set(CMAKE_BUILD_RPATH "${DTLAB_TORCH_RPATH}")
  endif()
  # GCC 12 under C++20 (std::string constexpr) warns -Wstringop-overflow, -Warray-bounds and
  # -Wrestrict ("pointer overflow between offset [2, ...]", "accessing 9223372036854775810 or
  # more bytes") inside basic_string::_M_replace and char_traits' memcpy for
  # `"literal" + std::string(...)`, with bounds no code can reach: false positives of its inliner
  # (GCC bugs 105329, 105651), which move with the unity batches (seen on 2.11 and 2.15 builds).
  # Off for that pair only; GCC 13 and C++17 builds keep them.
  if(CMAKE_CXX_STANDARD EQUAL 20 AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(dtlab_torch INTERFACE -Wno-stringop-overflow -Wno-array-bounds -Wno-restrict)
  endif()
  # What the kit prints and records (results.json's provenance) about the LibTorch it runs on.
  # DTLAB_HAVE_CUDA: what the build linked (a test checks that CUDA is then registered at run time).
  if(DTLAB_HAVE_CUDA)
    set(_have_cuda 1)
  else()
    set(_have_cuda 0)
  endif()
  target_compile_definitions(dtlab_torch INTERFACE
    "DTLAB_TORCH_DESCRIPTION=\"LibTorch ${DTLAB_TORCH_VERSION} (${DTLAB_TORCH_KIND}), C++${CMAKE_CXX_STANDARD}\""
    "DTLAB_HAVE_CUDA=${_have_cuda}")
  message(STATUS "dtlab: LibTorch ${DTLAB_TORCH_VERSION} (${DTLAB_TORCH_KIND}) from ${DTLAB_TORCH_DIR}")
  message(STATUS "dtlab: C++${CMAKE_CXX_STANDARD}; c10d backends: gloo=${DTLAB_HAVE_GLOO} nccl=${DTLAB_HAVE_NCCL}; cuda=${DTLAB_HAVE_CUDA}")
endmacro()
