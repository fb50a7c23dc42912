# Installs the build tree to a fresh prefix, then configures, builds and runs the consumer project
# against it (MODE=package) or against the source checkout (MODE=subdirectory).
# Inputs: BUILD_DIR, SOURCE_DIR, WORK_DIR, MODE, CONSUMER_DIR, GENERATOR
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
set(args -DMEMFMT_CONSUMER_MODE=${MODE})
if(MODE STREQUAL "package")
  run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
  list(APPEND args "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix")
else()
  list(APPEND args "-DMEMFMT_SOURCE_DIR=${SOURCE_DIR}" -DMEMFMT_BUILD_TESTS=OFF -DMEMFMT_ENABLE_CUDA=OFF
       -DMEMFMT_ENABLE_CUDNN=OFF -DMEMFMT_ENABLE_ONEDNN=OFF)
endif()
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}" ${args})
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
