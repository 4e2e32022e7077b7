# Compiler settings shared by every target: ccache when present, warnings, and the
# RelWithDebInfo optimisation level the benchmarks assume.

find_program(COHORT_CCACHE ccache)
if(COHORT_CCACHE)
  # Paths are hashed relative to the source tree, so build trees in other folders and
  # other clones of the repository (CI's) hit the same cache entries.
  set(COHORT_LAUNCHER env "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" CCACHE_NOHASHDIR=1 "${COHORT_CCACHE}")
  set(CMAKE_C_COMPILER_LAUNCHER ${COHORT_LAUNCHER})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${COHORT_LAUNCHER})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${COHORT_LAUNCHER})
endif()

set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O2 -g1 -DNDEBUG")
add_compile_options(-Wall -Wextra -Wno-unused-parameter)

# Every target's headers are included from the repository root: "common/address.h".
include_directories(${PROJECT_SOURCE_DIR})

# COHORT_SANITIZE=ON: AddressSanitizer + UndefinedBehaviorSanitizer on every target we
# compile (gcc or clang), any finding aborts the process (-fno-sanitize-recover), so a
# test that trips one fails. Libraries from Debian (LibTorch, Gloo, gRPC) are not
# instrumented; docs/reliability.md says what this build covers and why.
if(COHORT_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

if(COHORT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "COHORT_FUZZ needs clang: -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
