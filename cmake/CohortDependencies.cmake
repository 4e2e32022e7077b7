# Finds every dependency once. Targets link what they need, PRIVATE unless their public
# headers expose it. scripts/setup installs all of these from Debian packages.

find_package(absl CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(Threads REQUIRED)

if(NOT COHORT_TRAINER_ONLY)
  find_package(Protobuf REQUIRED)
  find_package(gRPC CONFIG REQUIRED)
  find_package(SQLite3 REQUIRED)
  find_program(COHORT_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
endif()

find_package(Torch REQUIRED)
find_package(Gloo CONFIG REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C)

# NCCL backend: compiled and linked whenever the CUDA toolkit and NCCL are present, even
# when LibTorch itself is CPU-only (it then simply never runs).
set(COHORT_HAVE_NCCL OFF)
if(NOT COHORT_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  find_path(COHORT_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
  find_library(COHORT_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
  if(CUDAToolkit_FOUND AND COHORT_NCCL_INCLUDE_DIR AND COHORT_NCCL_LIBRARY)
    set(COHORT_HAVE_NCCL ON)
    add_library(cohort_nccl INTERFACE)
    target_include_directories(cohort_nccl INTERFACE ${COHORT_NCCL_INCLUDE_DIR})
    target_link_libraries(cohort_nccl INTERFACE ${COHORT_NCCL_LIBRARY} CUDA::cudart)
  elseif(COHORT_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "COHORT_WITH_CUDA=ON but the CUDA toolkit or NCCL was not found "
                        "(CUDAToolkit_FOUND=${CUDAToolkit_FOUND}, nccl.h=${COHORT_NCCL_INCLUDE_DIR}, "
                        "libnccl=${COHORT_NCCL_LIBRARY})")
  endif()
endif()
message(STATUS "Cohort: NCCL backend ${COHORT_HAVE_NCCL}, LibTorch ${Torch_VERSION}, "
               "trainer only ${COHORT_TRAINER_ONLY}")
