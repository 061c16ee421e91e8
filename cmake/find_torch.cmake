# SPDX-License-Identifier: MIT
# Finds the PyTorch of the Python interpreter the build uses.
#
# Defines the target mdfuser::torch (libtorch with ATen and c10d, plus the
# C10D_GLOO / C10D_NCCL definitions matching the build) and
# mdfuser::torch_python (libtorch_python, for the binding).

find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)

execute_process(
  COMMAND ${Python_EXECUTABLE} -c
    "import torch, torch.distributed as d; print(torch.utils.cmake_prefix_path); print(int(d.is_gloo_available())); print(int(d.is_nccl_available())); print(int(torch.version.cuda is not None))"
  OUTPUT_VARIABLE _torch_info
  RESULT_VARIABLE _torch_result
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_result EQUAL 0)
  message(FATAL_ERROR
    "mdfuser needs PyTorch for ${Python_EXECUTABLE}; run scripts/setup.sh, "
    "or configure with -DMDFUSER_BUILD_RUNTIME=OFF for the compiler stages only")
endif()
string(REPLACE "\n" ";" _torch_info "${_torch_info}")
list(GET _torch_info 0 _torch_prefix)
list(GET _torch_info 1 MDFUSER_TORCH_HAS_GLOO)
list(GET _torch_info 2 MDFUSER_TORCH_HAS_NCCL)
list(GET _torch_info 3 MDFUSER_TORCH_HAS_CUDA)
list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")

# The headers of the NCCL that torch loads (the nvidia-nccl wheel), if any:
# c10d's NCCL classes change layout with the NCCL version.
execute_process(
  COMMAND ${Python_EXECUTABLE} -c
    "import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], 'include'))"
  OUTPUT_VARIABLE MDFUSER_NCCL_INCLUDE_DIR
  RESULT_VARIABLE _nccl_result
  OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET)

if(MDFUSER_TORCH_HAS_CUDA)
  # torch's CMake config enables the CUDA language: nvcc's host compiler must
  # be the C++ compiler of the rest of mdfuser (nvcc otherwise takes the
  # first g++ on the PATH, whose libstdc++ headers may not match the
  # libstdc++ the process loads; code mixing the two crashes in iostreams).
  # The CUDAHOSTCXX environment variable, which CMake's detection of nvcc
  # prefers, is overridden too; CMake also links what nvcc's host compiler
  # links (its libstdc++ among them) into every target with CUDA objects.
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH
      "nvcc's host compiler: the C++ compiler of the rest of mdfuser")
  endif()
  set(ENV{CUDAHOSTCXX} "${CMAKE_CUDA_HOST_COMPILER}")
  # torch's CMake config asks for the architecture list itself; Hopper by
  # default, overridable from the environment.
  if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(ENV{TORCH_CUDA_ARCH_LIST} "9.0a")
  endif()
  # CUDA >= 12.9 ships NVTX3 only; torch's config still asks for nvToolsExt.
  find_package(CUDAToolkit REQUIRED)
  if(TARGET CUDA::nvtx3 AND NOT TARGET CUDA::nvToolsExt)
    add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
    target_link_libraries(CUDA::nvToolsExt INTERFACE CUDA::nvtx3)
  endif()
endif()

find_package(Torch REQUIRED)

add_library(mdfuser_torch INTERFACE)
target_link_libraries(mdfuser_torch INTERFACE ${TORCH_LIBRARIES})
target_compile_options(mdfuser_torch INTERFACE ${TORCH_CXX_FLAGS})
# The torch wheel does not ship Gloo's headers, which ProcessGroupGloo.hpp
# includes. mdfuser only names Gloo types through pointers, so any Gloo
# headers that compile will do: Debian's libgloo-dev, or a copy of them in
# MDFUSER_GLOO_INCLUDE_DIR.
find_path(MDFUSER_GLOO_INCLUDE_DIR gloo/algorithm.h)
if(MDFUSER_TORCH_HAS_GLOO AND MDFUSER_GLOO_INCLUDE_DIR)
  target_compile_definitions(mdfuser_torch INTERFACE USE_C10D_GLOO)
  target_include_directories(mdfuser_torch SYSTEM INTERFACE "${MDFUSER_GLOO_INCLUDE_DIR}")
elseif(MDFUSER_TORCH_HAS_GLOO)
  message(WARNING "mdfuser: Gloo headers not found (apt-get install libgloo-dev, "
    "or set MDFUSER_GLOO_INCLUDE_DIR); CPU tensors cannot be communicated")
  set(MDFUSER_TORCH_HAS_GLOO 0)
endif()
if(MDFUSER_TORCH_HAS_CUDA)
  # The CUDA communication backend (runtime/cuda_backend.cpp).
  target_compile_definitions(mdfuser_torch INTERFACE MDFUSER_HAS_CUDA)
endif()
if(MDFUSER_TORCH_HAS_NCCL)
  target_compile_definitions(mdfuser_torch INTERFACE USE_C10D_NCCL)
  if(_nccl_result EQUAL 0 AND EXISTS "${MDFUSER_NCCL_INCLUDE_DIR}/nccl.h")
    # Before the CUDA toolkit's, which may ship another NCCL version.
    target_include_directories(mdfuser_torch SYSTEM BEFORE INTERFACE "${MDFUSER_NCCL_INCLUDE_DIR}")
  endif()
endif()
add_library(mdfuser::torch ALIAS mdfuser_torch)

add_library(mdfuser_torch_python INTERFACE)
target_link_libraries(mdfuser_torch_python INTERFACE
  mdfuser_torch "${TORCH_INSTALL_PREFIX}/lib/libtorch_python.so")
add_library(mdfuser::torch_python ALIAS mdfuser_torch_python)

message(STATUS "mdfuser: torch ${Torch_VERSION} from ${_torch_prefix}; "
  "Gloo=${MDFUSER_TORCH_HAS_GLOO} NCCL=${MDFUSER_TORCH_HAS_NCCL} CUDA=${MDFUSER_TORCH_HAS_CUDA}")
