# The tools' man pages and bash completions, made at build time from what
# each tool's --help prints by gpubridge-helpdoc (tools/helpdoc, built here,
# never installed), so neither can drift from the tool:
#   <build>/share/man/man1/gpubridge-{run,perf,info}.1
#   <build>/share/bash-completion/completions/gpubridge-{run,perf,info}
# cmake/install.cmake installs them (share/man/man1,
# share/bash-completion/completions), and so does the wheel
# (python/gpubridge/_cmake/wheel.cmake). Cross-compiled tools cannot run
# here: then GB_TOOL_DOCS is OFF and neither is made.
# GB_TOOL_MAN_PAGES, GB_TOOL_COMPLETIONS: the files, for the install rules.
set(GB_TOOL_DOCS ON)
if(CMAKE_CROSSCOMPILING AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
  message(STATUS "gpubridge: cross-compiling, so no man pages or bash completions (they run the tools)")
  set(GB_TOOL_DOCS OFF)
  return()
endif()

# The NAME line of each man page (no ";"); the rest is the tool's --help.
set(GB_TOOL_SUMMARY_run "start N local ranks of a program, each with its rank's launcher variables")
set(GB_TOOL_SUMMARY_perf "measure gpubridge's collectives as nccl-tests does")
set(GB_TOOL_SUMMARY_info "show gpubridge's version, device and parameters, and read flight-recorder dumps")

file(GLOB GB_HELPDOC_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tools/helpdoc/*.c)
add_executable(gpubridge-helpdoc ${GB_HELPDOC_SOURCES})

set(GB_MAN_BUILD_DIR ${PROJECT_BINARY_DIR}/share/man/man1)
set(GB_COMPLETION_BUILD_DIR ${PROJECT_BINARY_DIR}/share/bash-completion/completions)
file(MAKE_DIRECTORY ${GB_MAN_BUILD_DIR} ${GB_COMPLETION_BUILD_DIR})
set(GB_TOOL_MAN_PAGES)
set(GB_TOOL_COMPLETIONS)
foreach(tool run perf info)
  set(others)
  foreach(other run perf info)
    if(NOT other STREQUAL tool)
      list(APPEND others gpubridge-${other})
    endif()
  endforeach()
  string(REPLACE ";" " " others "${others}")
  set(man ${GB_MAN_BUILD_DIR}/gpubridge-${tool}.1)
  set(completion ${GB_COMPLETION_BUILD_DIR}/gpubridge-${tool})
  add_custom_command(OUTPUT ${man} ${completion}
    COMMAND gpubridge-helpdoc --tool $<TARGET_FILE:gpubridge-${tool}> --name gpubridge-${tool}
            --summary "${GB_TOOL_SUMMARY_${tool}}" --see-also "${others}"
            --license ${PROJECT_SOURCE_DIR}/LICENSE --man ${man} --completion ${completion}
    DEPENDS gpubridge-helpdoc gpubridge-${tool} ${PROJECT_SOURCE_DIR}/LICENSE
    COMMENT "Man page and bash completion of gpubridge-${tool}, from its --help"
    VERBATIM)
  list(APPEND GB_TOOL_MAN_PAGES ${man})
  list(APPEND GB_TOOL_COMPLETIONS ${completion})
endforeach()
add_custom_target(gpubridge-tool-docs ALL DEPENDS ${GB_TOOL_MAN_PAGES} ${GB_TOOL_COMPLETIONS})
