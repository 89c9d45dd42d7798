# CUDA tests: see tests/CMakeLists.txt
