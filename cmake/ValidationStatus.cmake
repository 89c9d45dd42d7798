# Where the GPU path stands, derived from docs/validation/ when CMake configures: README.md and
# `strata devices` say it, so a GPU user learns it without reading docs/validation. The first report
# committed there (docs/validation/gpu-validate-<UTC date>.md, written by the validation) changes the line
# with no code edit: the glob below is re-checked at every build (CONFIGURE_DEPENDS).
#
#   strata_validation_status(DIR OUT_VAR)  sets OUT_VAR to the one-line status for the reports in DIR.
#
# The newest report is the last by name (the names carry the UTC date, which sorts). Its line
# "- device: ..." names the GPU it ran on and "- result: ..." what it concluded; a report without them
# still counts, with what is missing said.
#
# Script mode, for the tests: cmake -DDIR=<folder> -P cmake/ValidationStatus.cmake prints the status.

set(STRATA_NOT_VALIDATED_STATUS
  "not yet validated on a GPU: built and tested without one; see docs/validation/README.md")

function(strata_validation_status dir out_var)
  if(CMAKE_SCRIPT_MODE_FILE)
    file(GLOB reports "${dir}/gpu-validate-*.md")
  else()
    file(GLOB reports CONFIGURE_DEPENDS "${dir}/gpu-validate-*.md")
  endif()
  if(NOT reports)
    set(${out_var} "${STRATA_NOT_VALIDATED_STATUS}" PARENT_SCOPE)
    return()
  endif()
  list(SORT reports)
  list(GET reports -1 newest)
  if(NOT CMAKE_SCRIPT_MODE_FILE)
    # A report edited after configuring (a correction) reconfigures too.
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${newest}")
  endif()
  get_filename_component(name "${newest}" NAME)
  string(REGEX REPLACE "^gpu-validate-(.*)\\.md$" "\\1" date "${name}")
  file(STRINGS "${newest}" device_lines REGEX "^- device: ")
  file(STRINGS "${newest}" result_lines REGEX "^- result: ")
  set(device "a device the report does not name")
  if(device_lines)
    list(GET device_lines 0 device)
    string(REGEX REPLACE "^- device: *" "" device "${device}")
  endif()
  set(result "no result line in the report")
  if(result_lines)
    list(GET result_lines 0 result)
    string(REGEX REPLACE "^- result: *" "" result "${result}")
    string(REGEX REPLACE " *\\(see below\\)$" "" result "${result}")  # the report's own pointer
  endif()
  set(${out_var} "last run on a GPU ${date}, ${device}: ${result}; see docs/validation/${name}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT DEFINED DIR)
    message(FATAL_ERROR "usage: cmake -DDIR=<folder with gpu-validate-*.md> -P ValidationStatus.cmake")
  endif()
  strata_validation_status("${DIR}" status)
  message("${status}")
endif()
