# Install rules (docs/INSTALL.md): `cmake --install <build> --prefix P` puts
#   P/lib/libgpubridge.so.X.Y.Z, .so.X, .so  the library (SONAME libgpubridge.so.X)
#   P/lib/libgpubridge-nccl.so               the drop-in NCCL ABI (docs/DROP_IN.md)
#   P/include/gpubridge/gpubridge.h, version.h
#   P/include/gpubridge/nccl/nccl.h          NCCL's API as the drop-in serves it
#   P/bin/gpubridge-run, gpubridge-perf, gpubridge-info
#   P/lib/pkgconfig/gpubridge.pc             pkg-config --cflags --libs gpubridge
#   P/lib/pkgconfig/gpubridge-nccl.pc        ... gpubridge-nccl: a program written for NCCL
#   P/lib/cmake/gpubridge/                   find_package(gpubridge): gpubridge::gpubridge
#   P/share/man/man1/gpubridge-{run,perf,info}.1          man pages  } made from each
#   P/share/bash-completion/completions/gpubridge-{...}   completions } tool's --help
#   P/share/doc/gpubridge/README.md, LICENSE, CHANGELOG.md, docs/*.md  (CMAKE_INSTALL_DOCDIR)
# (lib is CMAKE_INSTALL_LIBDIR: lib64 or lib/<arch> on some systems.) Every
# file names its neighbours by relative path, so the tree can be moved.
include(CMakePackageConfigHelpers)
set(GB_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gpubridge)

install(TARGETS gpubridge EXPORT gpubridgeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development)
install(TARGETS gpubridge-nccl EXPORT gpubridgeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
install(TARGETS gpubridge-run gpubridge-perf gpubridge-info EXPORT gpubridgeTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/include/gpubridge/gpubridge.h
              ${PROJECT_BINARY_DIR}/include/gpubridge/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpubridge COMPONENT development)
install(FILES ${PROJECT_SOURCE_DIR}/include/gpubridge/nccl/nccl.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpubridge/nccl COMPONENT development)
# The tools' man pages and bash completions (cmake/tool_docs.cmake), and the
# documentation (README.md's links into docs/ hold there too).
if(GB_TOOL_DOCS)
  install(FILES ${GB_TOOL_MAN_PAGES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)
  install(FILES ${GB_TOOL_COMPLETIONS} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
    COMPONENT runtime)
endif()
file(GLOB GB_DOC_PAGES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(FILES ${GB_DOC_PAGES} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT runtime)

# CMake package: gpubridge::gpubridge (the library), gpubridge::gpubridge-nccl,
# gpubridge::gpubridge-run, -perf, -info.
install(EXPORT gpubridgeTargets NAMESPACE gpubridge:: DESTINATION ${GB_CMAKE_DIR} COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gpubridgeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/gpubridgeConfig.cmake INSTALL_DESTINATION ${GB_CMAKE_DIR})
# Before 1.0 a new minor version may change the API: only the same MAJOR.MINOR matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/gpubridgeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/gpubridgeConfig.cmake ${PROJECT_BINARY_DIR}/cmake/gpubridgeConfigVersion.cmake
  DESTINATION ${GB_CMAKE_DIR} COMPONENT development)

# pkg-config: the prefix is found from the .pc file's own place (${pcfiledir}),
# so `cmake --install --prefix` anywhere gives a working file.
file(RELATIVE_PATH GB_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" GB_PC_TO_PREFIX "${GB_PC_TO_PREFIX}")
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(GB_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(GB_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/gpubridge.pc.in ${PROJECT_BINARY_DIR}/cmake/gpubridge.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/gpubridge-nccl.pc.in ${PROJECT_BINARY_DIR}/cmake/gpubridge-nccl.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake/gpubridge.pc ${PROJECT_BINARY_DIR}/cmake/gpubridge-nccl.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)
