# Builds one firmware target and checks how its link ends.
#   cmake -DBUILD_DIR=<dir> -DTARGET=<target> -DEXPECT=refused|linked -P link_check.cmake
# refused: the build must fail, and fail at the link on a poisoned heap
# symbol (`undefined reference to `__wrap_...'`); any other failure (a
# compile error, a missing file) fails this check too, so it cannot pass
# by accident. linked: the build must succeed.
execute_process(
  COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output
  RESULT_VARIABLE status)
if(EXPECT STREQUAL "linked")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${TARGET} should link but did not:\n${output}")
  endif()
  message(STATUS "${TARGET} links")
elseif(EXPECT STREQUAL "refused")
  if(status EQUAL 0)
    message(FATAL_ERROR "${TARGET} reaches the heap and still linked: the no-heap check is broken")
  endif()
  string(REGEX MATCHALL "[^\n]*undefined reference to `__wrap_[^\n]*" poisoned "${output}")
  if(NOT poisoned)
    message(FATAL_ERROR "${TARGET} failed to build, but not on a poisoned heap symbol:\n${output}")
  endif()
  list(JOIN poisoned "\n" poisoned)
  message(STATUS "${TARGET} refused at link time, as it must be:\n${poisoned}")
else()
  message(FATAL_ERROR "EXPECT must be refused or linked, not '${EXPECT}'")
endif()
