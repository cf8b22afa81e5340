# Reads the project's version from the file VERSION (MAJOR.MINOR.PATCH) into
# GB_VERSION, before project(). The header's version code is
# MAJOR * 10000 + MINOR * 100 + PATCH (NCCL's rule), so MINOR and PATCH stay below 100.
file(READ ${CMAKE_CURRENT_LIST_DIR}/../VERSION GB_VERSION)
string(STRIP "${GB_VERSION}" GB_VERSION)
if(NOT GB_VERSION MATCHES "^([0-9]+)\\.([0-9]|[1-9][0-9])\\.([0-9]|[1-9][0-9])$")
  message(FATAL_ERROR "VERSION holds '${GB_VERSION}': write MAJOR.MINOR.PATCH with MINOR and PATCH "
                      "below 100 (the version code is MAJOR*10000 + MINOR*100 + PATCH), e.g. 0.1.0")
endif()
