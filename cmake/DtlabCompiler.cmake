# Note [Clang for the kit]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# The kit compiles with clang 14 (Debian's clang-14, which scripts/setup.sh installs) wherever it
# is installed and no compiler was asked for (CMAKE_CXX_COMPILER or CXX). The reason is the one
# precompiled header every LibTorch unit reads (Note [One precompiled header], cmake/Dtlab.cmake):
#
#  * GCC reads its whole binary header into each unit (523 MB for LibTorch 1.13, 645 MB for 2.15)
#    and then instantiates, in that unit, every template the headers left pending. An empty unit
#    costs 4.3 s with 1.13's header and 5.1 s with 2.15's, before a line of the kit's own.
#  * Clang reads its header lazily, and with -fpch-instantiate-templates (CMake adds it to the
#    header's compile, PCH_INSTANTIATE_TEMPLATES) the headers' own instantiations are done once,
#    in the header (87 MB and 140 MB). An empty unit costs 0.9 s and 1.2 s.
#
# The same unit, the kit's dist/ sources (one after the other on an idle machine): 23.0 s with
# GCC 12 and 15.9 s with clang 14 on 1.13, 27.4 s and 18.9 s on 2.15; the header itself 27.6 s and
# 12.4 s, 40.1 s and 21.3 s. The whole 1.13 build from nothing (178 compiles, 2 at a time, no
# cache): 1,772 s of compiling with GCC, 950 s with clang (docs/MEASUREMENTS.md, "CI's budget").
# The suites' own batches (GoogleTest's macros at -O1, Note [Tests at -O1]) gain little; the
# kit's LibTorch units take 0.45-0.75 of GCC's time. Both compilers use the same libstdc++ and
# C++ ABI as the LibTorch they link, and neither may reorder floating-point arithmetic (no
# -ffast-math; the AdamW loop keeps -ffp-contract=off, common/CMakeLists.txt). Their programs
# agree within rounding, not to the last bit: dtlab-gpt2 on the fixture, 30 steps, one thread, the
# first 11 losses equal to the last bit and the rest within 1e-7 relative (the checks' tolerances
# are 1e-5 and wider; the reference cache is one per build folder, so never mixes the two).
#
# Where clang-14 is missing the system's compiler builds the kit as before, slower, and says so.
# A build folder keeps the compiler it was configured with: `rm -rf build` to change it.
if(NOT DEFINED CMAKE_CXX_COMPILER AND NOT DEFINED ENV{CXX})
  find_program(DTLAB_CLANGXX NAMES clang++-14)
  if(DTLAB_CLANGXX)
    set(CMAKE_CXX_COMPILER "${DTLAB_CLANGXX}" CACHE FILEPATH "The C++ compiler (Note [Clang for the kit])")
  else()
    message(STATUS "dtlab: clang++-14 not found: compiling with the system's C++ compiler, whose "
                   "precompiled header costs each LibTorch unit about 4 s more (Note [Clang for the kit], "
                   "cmake/DtlabCompiler.cmake; scripts/setup.sh installs clang-14)")
  endif()
endif()
