# Configures and builds a firmware preset in a folder of the host build, with
# the host build's kiln planning the example's model.
#   cmake -DSOURCE_DIR=<repo> -DPRESET=firmware-m4 -DBINARY_DIR=<dir> -DKILN=<kiln> -DPYTHON=<python>
#         -P build_preset.cmake
foreach(step configure build)
  if(step STREQUAL "configure")
    set(command ${CMAKE_COMMAND} --preset ${PRESET} -S ${SOURCE_DIR} -B ${BINARY_DIR}
                -DKILN_HOST_KILN=${KILN} -DKILN_PYTHON=${PYTHON})
  else()
    set(command ${CMAKE_COMMAND} --build ${BINARY_DIR})
  endif()
  execute_process(COMMAND ${command} WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${PRESET}: ${step} failed (${status})")
  endif()
endforeach()
