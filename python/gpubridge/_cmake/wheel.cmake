# Included by CMakeLists.txt when scikit-build-core builds the wheel (SKBUILD):
# the install component "python" (pyproject.toml installs only it) puts, under
# the package folder gpubridge/:
#   lib/libgpubridge.so.0     the library, once, under its SONAME: _lib.py loads
#                             it and the drop-in's loader finds it (one copy in a process)
#   lib/libgpubridge-nccl.so  the drop-in NCCL ABI (rpath $ORIGIN)
#   bin/gpubridge-run, -perf, -info  (rpath $ORIGIN/../lib; console scripts exec them)
#   include/gpubridge/gpubridge.h, version.h, nccl/nccl.h
# and, as the wheel's data (pip puts it under the environment's prefix, as
# cmake --install does under its prefix: cmake/install.cmake):
#   share/man/man1/gpubridge-{run,perf,info}.1, share/bash-completion/completions/
#   gpubridge-{run,perf,info} (cmake/tool_docs.cmake), share/doc/gpubridge/
#   README.md, LICENSE, CHANGELOG.md, docs/*.md
set(GB_WHEEL_DIR gpubridge)
install(FILES $<TARGET_FILE:gpubridge> DESTINATION ${GB_WHEEL_DIR}/lib
  RENAME libgpubridge.so.${PROJECT_VERSION_MAJOR} COMPONENT python)
install(TARGETS gpubridge-nccl LIBRARY DESTINATION ${GB_WHEEL_DIR}/lib COMPONENT python)
if(NOT GB_BIN_TO_LIB STREQUAL "../lib")
  # The tools' rpath leads from bin to CMAKE_INSTALL_LIBDIR; in the package, to lib.
  foreach(tool run perf info)
    set_property(TARGET gpubridge-${tool} APPEND PROPERTY INSTALL_RPATH "$ORIGIN/../lib")
  endforeach()
endif()
install(TARGETS gpubridge-run gpubridge-perf gpubridge-info RUNTIME DESTINATION ${GB_WHEEL_DIR}/bin COMPONENT python)
install(FILES ${PROJECT_SOURCE_DIR}/include/gpubridge/gpubridge.h ${PROJECT_BINARY_DIR}/include/gpubridge/version.h
  DESTINATION ${GB_WHEEL_DIR}/include/gpubridge COMPONENT python)
install(FILES ${PROJECT_SOURCE_DIR}/include/gpubridge/nccl/nccl.h DESTINATION ${GB_WHEEL_DIR}/include/gpubridge/nccl
  COMPONENT python)

set(GB_WHEEL_SHARE ${SKBUILD_DATA_DIR}/share)
if(GB_TOOL_DOCS)
  install(FILES ${GB_TOOL_MAN_PAGES} DESTINATION ${GB_WHEEL_SHARE}/man/man1 COMPONENT python)
  install(FILES ${GB_TOOL_COMPLETIONS} DESTINATION ${GB_WHEEL_SHARE}/bash-completion/completions COMPONENT python)
endif()
file(GLOB GB_WHEEL_DOC_PAGES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md
  DESTINATION ${GB_WHEEL_SHARE}/doc/gpubridge COMPONENT python)
install(FILES ${GB_WHEEL_DOC_PAGES} DESTINATION ${GB_WHEEL_SHARE}/doc/gpubridge/docs COMPONENT python)
