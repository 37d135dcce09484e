# Note [LibTorch's start order]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Every program that links Debian's LibTorch 1.13 spends about 0.6 s of CPU before its first line,
# and a pass of the suites starts such a program about 770 times (docs/MEASUREMENTS.md, "LibTorch's
# start, 770 times a pass"). A quarter of a start is the loader's symbol lookups (`do_lookup_x`):
# libtorch_cpu.so.1.13 needs OpenCV and FFmpeg, and through them GDAL, Xerces, GEOS, PROJ,
# Poppler...: 285 libraries, loaded breadth first, and the loader resolves each library's symbolic
# relocations (most linked -z now, so all of them at start) by walking that order until a library
# defines the symbol. GDAL's 48,000 relocations of its own symbols each walk past the 131 libraries
# loaded before it.
#
# So the kit's programs name those libraries themselves, right after the C and C++ runtime
# (libstdc++, libm, libgcc_s, libc): loaded as before, the same files, but early in the order, where
# their own symbols are found in a few probes. The list (cmake/torch_start_order.txt) is made by
# scripts/torch_start_order.sh from the installed LibTorch: the libraries whose move saves the
# most probes, and none whose move would change what any symbol binds to but between copies of one
# C++ entity (template instances, inline functions, vtables: weak and unique symbols, one entity
# to the C++ ABI). A library that defines a function or variable another library also defines
# (the BLAS and LAPACK copies, netCDF's strlcat) keeps its place; and since a library named early
# also brings the libraries it needs earlier, the script then runs two programs under
# LD_DEBUG=bindings and names first whatever library a moved binding of another kind used to reach
# (libbsd, whose strlcat netCDF's would otherwise shadow). The build uses the list only for
# the libtorch_cpu.so whose build id it names; another LibTorch (a new Debian package, a pip
# wheel, whose start is half the price and needs none of these libraries) links as it always did,
# and configure says so.
#
# DTLAB_TORCH_START_ORDER=OFF links in LibTorch's own order (to compare: docs/MEASUREMENTS.md,
# "LibTorch's start order").
option(DTLAB_TORCH_START_ORDER "Name Debian LibTorch's costliest libraries early (Note [LibTorch's start order])" ON)

# dtlab_torch_start_order(TARGET LIBTORCH_CPU): adds the libraries, after the runtime, to the
# interface TARGET gives every program.
# Sets DTLAB_TORCH_START_ORDER_USED (ON where the list was linked) for the caller.
function(dtlab_torch_start_order target libtorch_cpu)
  set(DTLAB_TORCH_START_ORDER_USED OFF PARENT_SCOPE)
  set(list_file ${PROJECT_SOURCE_DIR}/cmake/torch_start_order.txt)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${list_file})
  if(NOT DTLAB_TORCH_START_ORDER)
    message(STATUS "dtlab: LibTorch's start order: off (DTLAB_TORCH_START_ORDER=OFF)")
    return()
  endif()
  file(STRINGS ${list_file} lines REGEX "^[^#]")
  list(POP_FRONT lines first)
  string(REGEX REPLACE "^build-id " "" wanted_id "${first}")
  execute_process(COMMAND readelf -n ${libtorch_cpu} OUTPUT_VARIABLE notes RESULT_VARIABLE failed ERROR_QUIET)
  string(REGEX MATCH "Build ID: ([0-9a-f]+)" _ "${notes}")
  set(id "${CMAKE_MATCH_1}")
  if(failed OR NOT id STREQUAL wanted_id)
    message(STATUS "dtlab: LibTorch's start order: not used: cmake/torch_start_order.txt was made for the "
                   "libtorch_cpu.so of build id ${wanted_id}, ${libtorch_cpu} has '${id}' "
                   "(scripts/torch_start_order.sh makes the list for it)")
    return()
  endif()
  # Where each library is: the loader's own answer for this libtorch_cpu.so.
  execute_process(COMMAND ldd ${libtorch_cpu} OUTPUT_VARIABLE closure RESULT_VARIABLE failed ERROR_QUIET)
  set(paths "")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "^[^ ]+" soname "${line}")
    # ldd's line "\tSONAME => PATH (address)", the name matched whole and literally.
    string(REGEX REPLACE "([][.+*?^$()|\\])" "\\\\\\1" pattern "${soname}")
    string(REGEX MATCH "(^|\n)[ \t]*${pattern} => ([^ ]+)" _ "${closure}")
    set(CMAKE_MATCH_1 "${CMAKE_MATCH_2}")
    if(failed OR NOT CMAKE_MATCH_1)
      message(FATAL_ERROR "dtlab: cmake/torch_start_order.txt names ${soname}, which ${libtorch_cpu} (build id "
                          "${id}) does not load: run scripts/torch_start_order.sh, or configure with "
                          "DTLAB_TORCH_START_ORDER=OFF")
    endif()
    list(APPEND paths "${CMAKE_MATCH_1}")
  endforeach()
  list(LENGTH paths n)
  # The runtime named first, so that its symbols (what most relocations ask for) keep their places.
  target_link_libraries(${target} INTERFACE "-Wl,--push-state,--no-as-needed" -lstdc++ -lm -lgcc_s -lc ${paths}
                        "-Wl,--pop-state")
  set(DTLAB_TORCH_START_ORDER_USED ON PARENT_SCOPE)
  message(STATUS "dtlab: LibTorch's start order: ${n} libraries named after the runtime (cmake/torch_start_order.txt)")
endfunction()
