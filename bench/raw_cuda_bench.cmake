# The raw-library baseline for the GPU (raw_cuda_bench.cpp): cuBLAS / cuBLASLt / cuDNN called directly on
# the shapes scripts/gpu-validate traces. Include from bench/CMakeLists.txt when STRATA_WITH_CUDA.
add_executable(raw_cuda_bench ${CMAKE_CURRENT_LIST_DIR}/raw_cuda_bench.cpp)
target_link_libraries(raw_cuda_bench PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt strata_cudnn)

# The floor for `strata compare` on a GPU: the same library call eager in a loop vs replayed from a graph.
add_executable(raw_graph_bench ${CMAKE_CURRENT_LIST_DIR}/raw_graph_bench.cpp)
target_link_libraries(raw_graph_bench PRIVATE CUDA::cudart CUDA::cublas strata_cudnn)
