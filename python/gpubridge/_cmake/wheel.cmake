# Included by project() when pip builds the Python package (pyproject.toml sets
# CMAKE_PROJECT_INCLUDE): installs libgpubridge.so inside the package, under a
# plain name the package loads, without editing the project's CMakeLists.txt.
cmake_minimum_required(VERSION 3.19)
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL
  install FILES "$<TARGET_FILE:gpubridge>" DESTINATION gpubridge RENAME libgpubridge.so)
