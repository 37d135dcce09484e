# Note [Compiler cache]
# ~~~~~~~~~~~~~~~~~~~~~
# Most of a build here is compiling translation units that include LibTorch (a floor of seconds
# each on 2 cores, Note [Unity builds]), and CI builds the kit four times from a fresh clone
# (1.13, 2.x, ASan, and the grader's own submission builds in its tests). ccache (installed by
# scripts/setup.sh) makes a build that was done before, in this clone or in another one on the same
# machine, a matter of reading results back:
#
#  * one cache for every build folder and every clone: ccache's own folder (~/.cache/ccache unless
#    CCACHE_DIR or ccache.conf say otherwise), shared by build/, build-pip/, build-asan/ and by a
#    clone elsewhere;
#  * paths relative to the checkout (base_dir = the source folder, and the working folder left out
#    of the hash, hash_dir off): a clone in another folder compiles the same command lines and so
#    hits. CMake's unity files and its precompiled header include sources by absolute path, which
#    ccache's preprocessor mode hashes relative to base_dir. __FILE__ (every GoogleTest assertion
#    expands it) and debug information name files relative to the checkout too
#    (-ffile-prefix-map, below): until they did, every unit-test batch missed in another clone, 11
#    of 126 compiles that cost a warm build in a fresh clone about 100 s of its 158 (measured at
#    bf89aef). What still misses there is build_paths.cpp (Note [Build paths]), by design;
#  * the precompiled header: ccache caches the header itself and the units that use it, with
#    the sloppiness its manual asks for (pch_defines, time_macros; include_file_mtime/ctime for
#    files a fresh clone has just written). Clang's header (the kit's compiler, Note [Clang for
#    the kit]) names the build folder by its absolute path, so those units hit in the clone that
#    compiled them, not in a clone elsewhere (Note [One precompiled header], cmake/Dtlab.cmake);
#  * each build's hit rate: every compile appends to <build>/ccache-stats.log (stats_log), which
#    scripts/build.sh empties before a build and summarises after it.
#
# The settings travel in the environment of cmake/ccache_launcher.sh, never in the user's
# ccache.conf. DTLAB_CCACHE=OFF (a CMake option, or the environment variable of a build, read by
# the launcher at each compile) compiles without the cache; the grader's submission builds always
# do (a student's compile neither reads nor writes the instructor's cache).
# The same text in every clone, cache or none: "tests/x_test.cpp", not "/home/me/dtlab/tests/...".
add_compile_options(-ffile-prefix-map=${PROJECT_SOURCE_DIR}/=)
# Clang (the kit's compiler, Note [Clang for the kit]) writes the time of its build into a
# precompiled header and checks it where the header is used: every rebuild of the header would be
# a new input to every unit that includes it, and none would hit. ccache's manual asks for this.
add_compile_options("$<$<CXX_COMPILER_ID:Clang>:SHELL:-Xclang -fno-pch-timestamp>")

if(DEFINED ENV{DTLAB_CCACHE} AND NOT DEFINED CACHE{DTLAB_CCACHE})
  set(dtlab_ccache_default "$ENV{DTLAB_CCACHE}")
else()
  set(dtlab_ccache_default ON)
endif()
option(DTLAB_CCACHE "Compile through ccache (Note [Compiler cache])" ${dtlab_ccache_default})

if(DTLAB_CCACHE)
  find_program(DTLAB_CCACHE_PROGRAM ccache)
  if(DTLAB_CCACHE_PROGRAM)
    set(CMAKE_CXX_COMPILER_LAUNCHER
        ${PROJECT_SOURCE_DIR}/cmake/ccache_launcher.sh ${DTLAB_CCACHE_PROGRAM} ${PROJECT_SOURCE_DIR}
        ${PROJECT_BINARY_DIR}/ccache-stats.log)
    message(STATUS "dtlab: compiler cache: ${DTLAB_CCACHE_PROGRAM} (base ${PROJECT_SOURCE_DIR}; "
                   "DTLAB_CCACHE=OFF turns it off)")
  else()
    message(STATUS "dtlab: compiler cache: no ccache found, every build compiles everything "
                   "(scripts/setup.sh installs it)")
  endif()
else()
  unset(CMAKE_CXX_COMPILER_LAUNCHER)
  message(STATUS "dtlab: compiler cache: off (DTLAB_CCACHE=OFF)")
endif()
