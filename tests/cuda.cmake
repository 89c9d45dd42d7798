# The CUDA layers' tests, included from tests/CMakeLists.txt when STRATA_WITH_CUDA.
#  - Host-only tests (no label) run on every machine with the toolkit, GPU or not: CUPTI record conversion
#    and the joins behind the breakdown, fed hand-built records of the real CUPTI structs; the checking
#    macros; per-device state; device selection and what strata says without a driver.
#  - GPU tests (label gpu) are programs whose main (runtime/cuda/gpu_test_main.cpp) exits 77 with the reason
#    when no usable device is present; ctest reports them as skipped. One ctest test per program: the CUPTI
#    test needs a fresh process (one CUPTI session per process), the others share one CUDA context.
# They call the CUDA layers' own functions, so they link libstrata_cuda.so (strata_cuda) directly; the loader
# then finds that copy in the process instead of loading a second one (Note [The CUDA module]).

strata_add_test(test_device_cupti device/cupti/record_conversion_test.cpp device/cupti/correlation_join_test.cpp
  device/cupti/cupti_call_test.cpp)
target_link_libraries(test_device_cupti PRIVATE strata_cuda CUDA::cupti)

strata_add_test(test_runtime_cuda runtime/cuda/runtime_host_test.cpp runtime/cuda/device_selection_test.cpp
  runtime/cuda/per_device_test.cpp)
target_link_libraries(test_runtime_cuda PRIVATE strata_cuda CUDA::cudart)

strata_add_test(test_kernels_cuda kernels/cuda/library_check_test.cpp kernels/cuda/reduction_split_test.cpp
  kernels/cuda/reduce_plan_test.cpp kernels/cuda/gemm_candidates_test.cpp kernels/cuda/pow_value_test.cpp)
target_link_libraries(test_kernels_cuda PRIVATE strata_cuda CUDA::cudart CUDA::cublas strata_cudnn)

function(strata_add_gpu_test name)
  add_executable(${name} runtime/cuda/gpu_test_main.cpp ${ARGN})
  target_link_libraries(${name} PRIVATE doctest::doctest strata_test_support strata_app nlohmann_json::nlohmann_json
    strata_cuda CUDA::cudart CUDA::cupti)
  strata_export_to_cuda_module(${name})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE STRATA_BIN="$<TARGET_FILE:strata>" STRATA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(${name} strata)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()

strata_add_gpu_test(test_kernels_cuda_gpu kernels/cuda/cuda_kernels_test.cpp kernels/cuda/inplace_reduce_gpu_test.cpp
  kernels/cuda/pointwise_gpu_test.cpp)
strata_add_gpu_test(test_runtime_cuda_gpu runtime/cuda/runtime_gpu_test.cpp)
strata_add_gpu_test(test_device_cupti_gpu device/cupti/cupti_session_gpu_test.cpp)
strata_add_gpu_test(test_trace_cuda_gpu device/cupti/trace_gpu_test.cpp)
strata_add_gpu_test(test_apps_compare_gpu apps/compare_gpu_test.cpp)
strata_add_gpu_test(test_apps_sequence_gpu apps/sequence_gpu_test.cpp)
# --algos / --algo / --time on a GPU: cuBLASLt's candidates listed, forced and timed (Note [Which cuBLASLt
# algorithm] in layers/kernels/cuda/gemm_candidates.h).
strata_add_gpu_test(test_apps_gemm_algo_gpu apps/gemm_algo_gpu_test.cpp)

# The CUDA libraries loaded on the first CUDA use, end to end (Note [The CUDA module]). Not under the
# sanitizers: their shadow memory does not fit the address-space limit these tests run strata under.
if(NOT STRATA_SANITIZE)
  strata_add_test(test_apps_cuda_module apps/cuda_module_test.cpp LABELS e2e)
  # The toolkit's stub driver library: a libcuda.so.1 for the loader to find, so that `--device auto` goes
  # on to load the module on a machine without a driver (Note [No driver, no module]).
  find_library(STRATA_CUDA_STUB_DRIVER cuda HINTS ${CUDAToolkit_LIBRARY_DIR}/stubs ${CUDAToolkit_LIBRARY_ROOT}/lib64/stubs
               NO_DEFAULT_PATH)
  if(STRATA_CUDA_STUB_DRIVER)
    target_compile_definitions(test_apps_cuda_module PRIVATE STRATA_CUDA_STUB_DRIVER="${STRATA_CUDA_STUB_DRIVER}")
  endif()
endif()

# A GPU run's Chrome trace from synthetic CUPTI records, written by strata's own writer: what the HTA test
# (tests/reports/hta_test.py, in tests/CMakeLists.txt) loads as its GPU-shaped trace on any machine.
add_executable(strata_gpu_shaped_trace device/cupti/gpu_shaped_trace.cpp)
target_link_libraries(strata_gpu_shaped_trace PRIVATE strata_app strata_cuda CUDA::cupti)
target_include_directories(strata_gpu_shaped_trace PRIVATE ${PROJECT_SOURCE_DIR})
strata_export_to_cuda_module(strata_gpu_shaped_trace)

# The compiled path's kernels as CUDA C, NVRTC and ptxas (layers/compiler/compiler_cuda.h): host-only, the
# toolkit is enough. ptxas_parse_test reads real ptxas outputs from compiler/data/ptxas.
strata_add_test(test_compiler_cuda compiler/cuda_codegen_test.cpp compiler/ptxas_parse_test.cpp
  compiler/sass_emit_test.cpp compiler/ptx_cache_test.cpp)
target_link_libraries(test_compiler_cuda PRIVATE strata_compiler_cuda)

# The generated kernels' PTX loaded by the driver and launched, against the CPU plan (label gpu).
strata_add_gpu_test(test_compiler_cuda_gpu compiler/ptx_launch_gpu_test.cpp)
target_link_libraries(test_compiler_cuda_gpu PRIVATE strata_compiler_cuda)

# The compiled path on the GPU: programs compiled on CUDA tensors (cuBLASLt epilogues, NVRTC's PTX loaded by
# the driver) against float64 and eager, and the CLI's --mode compiled --device cuda (label gpu).
strata_add_gpu_test(test_apps_compiled_gpu apps/compiled_gpu_test.cpp)
