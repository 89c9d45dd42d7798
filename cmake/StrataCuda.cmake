# Decides whether the CUDA layers are built. See docs/build.md.
# AUTO builds them whenever the toolkit (nvcc + libraries) is found, GPU or not: the CUDA code must
# always compile and link where the toolkit exists, and detect a missing driver at run time.
set(STRATA_WITH_CUDA OFF)
if(NOT STRATA_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND CUDAToolkit_VERSION VERSION_LESS 13.0)
    # The CUPTI layer reads CUDA 13's records and callback ids (CUpti_ActivityKernel10, __cudaLaunchKernel).
    set(_strata_cuda_missing "a CUDA 13 toolkit (found ${CUDAToolkit_VERSION})")
  elseif(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    find_library(STRATA_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ENV CUDNN_ROOT PATH_SUFFIXES lib lib64)
    find_path(STRATA_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_ROOT PATH_SUFFIXES include)
    if(STRATA_CUDNN_LIBRARY AND STRATA_CUDNN_INCLUDE AND TARGET CUDA::cupti AND TARGET CUDA::cublasLt)
      set(STRATA_WITH_CUDA ON)
    else()
      set(_strata_cuda_missing "cuDNN (${STRATA_CUDNN_LIBRARY}) or CUPTI/cuBLASLt")
    endif()
  else()
    set(_strata_cuda_missing "nvcc or the CUDA toolkit")
  endif()
  if(NOT STRATA_WITH_CUDA AND STRATA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "STRATA_CUDA=ON but ${_strata_cuda_missing} was not found")
  endif()
endif()

if(STRATA_WITH_CUDA)
  # The architectures CUDA 13 supports that users have, real code for each plus PTX for the newest
  # so that future GPUs can JIT it.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 100-real 120-real 120-virtual)
  endif()
  # The shared runtime everywhere: libcudart_static would put a second runtime into every program that
  # links the kernels, next to the shared one the runtime layer, cuBLAS and CUPTI see.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  # CMake 3.25 (Debian 12) knows nvcc's flags only up to C++17; nvcc 12+ takes -std=c++20, which lib's
  # headers need (defaulted comparisons, [[likely]]).
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  add_library(strata_cudnn INTERFACE)
  target_link_libraries(strata_cudnn INTERFACE ${STRATA_CUDNN_LIBRARY})
  target_include_directories(strata_cudnn INTERFACE ${STRATA_CUDNN_INCLUDE})
  message(STATUS "strata: CUDA layers ON (toolkit ${CUDAToolkit_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")
else()
  if(_strata_cuda_missing)
    message(STATUS "strata: CUDA layers OFF (STRATA_CUDA=${STRATA_CUDA}: no ${_strata_cuda_missing})")
  else()
    message(STATUS "strata: CUDA layers OFF (STRATA_CUDA=${STRATA_CUDA})")
  endif()
endif()

# strata_export_to_cuda_module(TARGET): TARGET, an executable or the Python extension, may load
# libstrata_cuda.so, whose references to lib, the CPU-side layers, reports and measure resolve against it
# (Note [The CUDA module] in measure/devices/cuda_module.h). So it exports its symbols (-rdynamic), and it
# holds every object of those libraries, not only the ones it calls itself. Also for the test and benchmark
# programs: they load the module too. No program's own code is in the list (apps/strata's strata_app):
# nothing loaded refers to it, and the extension does not link it. Nothing to do in a build without the
# CUDA layers or the program's Python module.
function(strata_export_to_cuda_module target)
  # The Python module (libstrata_python.so, Note [The Python module]) resolves strata's symbols against
  # the executable in the same way.
  if(NOT STRATA_WITH_CUDA AND NOT TARGET strata_python_embed)
    return()
  endif()
  set_target_properties(${target} PROPERTIES ENABLE_EXPORTS ON)
  set(archives "")
  foreach(lib strata_lib strata_dispatch strata_ops strata_kernels_cpu strata_reference strata_binding strata_frontend
              strata_reports strata_measure strata_compiler)
    string(APPEND archives ",$<TARGET_FILE:${lib}>")
  endforeach()
  target_link_options(${target} PRIVATE "LINKER:--whole-archive${archives},--no-whole-archive")
  if(STRATA_WITH_CUDA)
    add_dependencies(${target} strata_cuda strata_ptx)
  endif()
  if(TARGET strata_python_embed)
    add_dependencies(${target} strata_python_embed)
  endif()
endfunction()
