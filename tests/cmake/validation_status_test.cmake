# The GPU path's status line (cmake/ValidationStatus.cmake) in both states, and that README.md and
# `strata devices` say what docs/validation/ says today.
#   cmake -DSOURCE_DIR=<repo> -DSTRATA=<strata binary> -DWORK=<scratch folder> -P validation_status_test.cmake
include(${SOURCE_DIR}/cmake/ValidationStatus.cmake)

function(expect_equal what actual expected)
  if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "${what}:\n  got:      ${actual}\n  expected: ${expected}")
  endif()
endfunction()

# No report: not validated, and the line says where to read more.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/none ${WORK}/two ${WORK}/bare)
file(WRITE ${WORK}/none/README.md "# GPU validation reports\n")
strata_validation_status(${WORK}/none status)
expect_equal("no report" "${status}"
  "not yet validated on a GPU: built and tested without one; see docs/validation/README.md")

# Two reports: the newest by date names its device and result; the older one is ignored.
file(WRITE ${WORK}/two/gpu-validate-2026-11-20.md "# old\n- device: NVIDIA A100-SXM4-40GB\n- result: SOME STEPS FAILED\n")
file(WRITE ${WORK}/two/gpu-validate-2026-12-01.md
  "# strata GPU validation\n- commit: `abc`\n- device: NVIDIA H100 80GB HBM3, compute capability 9.0\n- result: every step passed\n")
strata_validation_status(${WORK}/two status)
expect_equal("two reports" "${status}" "last run on a GPU 2026-12-01, NVIDIA H100 80GB HBM3, compute capability 9.0: \
every step passed; see docs/validation/gpu-validate-2026-12-01.md")

# A report without the lines still flips the status, saying what it lacks.
file(WRITE ${WORK}/bare/gpu-validate-2026-12-02.md "# hand-written\n")
strata_validation_status(${WORK}/bare status)
expect_equal("report without device/result" "${status}" "last run on a GPU 2026-12-02, a device the report does not \
name: no result line in the report; see docs/validation/gpu-validate-2026-12-02.md")

# Today's status, as README.md (near the top) and `strata devices` must print it.
strata_validation_status(${SOURCE_DIR}/docs/validation today)
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "**GPU path: ${today}**" at)
if(at EQUAL -1 OR at GREATER 2000)
  message(FATAL_ERROR "README.md must say, near the top (its first 2000 characters): **GPU path: ${today}**\n"
    "(docs/validation/ changed: update the line there)")
endif()
execute_process(COMMAND ${STRATA} devices RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
expect_equal("strata devices exit status" "${rc}" "0")
string(FIND "${out}" "gpu path: ${today}\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "strata devices must print 'gpu path: ${today}' (rebuild after docs/validation changes);\
 it printed:\n${out}${err}")
endif()
