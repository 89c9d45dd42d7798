# The raw GPU baselines for scripts/gpu-validate, included from bench/CMakeLists.txt when STRATA_WITH_CUDA.
# Standalone programs: they link the CUDA libraries directly and nothing of strata's.
#  - raw_cuda_bench: cuBLAS / cuBLASLt / cuDNN called directly on the shapes gpu-validate traces; kernel
#    time from CUPTI activity records, as strata measures its gpu row (hence CUDA::cupti).
#  - raw_graph_bench: the floor for `strata compare`: the same call eager in a loop vs replayed from a CUDA
#    Graph; relu uses a copy of strata's own kernel (raw_relu_kernel.cu, compiled by nvcc: CUDA is enabled
#    project-wide by cmake/StrataCuda.cmake, for CMAKE_CUDA_ARCHITECTURES).
add_executable(raw_cuda_bench ${CMAKE_CURRENT_LIST_DIR}/raw_cuda_bench.cpp)
target_link_libraries(raw_cuda_bench PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt CUDA::cupti strata_cudnn)

add_executable(raw_graph_bench ${CMAKE_CURRENT_LIST_DIR}/raw_graph_bench.cpp ${CMAKE_CURRENT_LIST_DIR}/raw_relu_kernel.cu)
target_link_libraries(raw_graph_bench PRIVATE CUDA::cudart CUDA::cublas strata_cudnn)
