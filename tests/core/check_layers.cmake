# The headers' layers (cmake -P check_layers.cmake SOURCE_DIR): each folder of include/memfmt/ may
# include only from the folders below it, so that the graph never needs a backend, a backend never
# needs the graph or the runtime, and the runtime reads no file:
#   core (the top-level headers, detail/, format/, tensor/, strided/, interop/)
#   convert/  layers/ (layer kinds, their parameters, support queries)        over core
#   backends/ over layers/ and convert/          graph/ over layers/
#   io/ over graph/ (files)      onnx/ over io/     runtime/ over graph/ and backends/
#   session/ over runtime/ and onnx/ (the top: what a user includes); memfmt.hpp includes anything.
# Every quoted include of a header under include/memfmt/ that crosses to a folder not below its own
# is listed, and the check fails.
cmake_minimum_required(VERSION 3.20)
set(root "${CMAKE_ARGV3}/include/memfmt")
set(below_core "")
set(below_convert core)
set(below_layers core)
set(below_backends core convert layers)
set(below_graph core layers)
set(below_io core layers graph)
set(below_onnx core layers graph io)
set(below_runtime core convert layers graph backends)
set(below_session core convert layers graph backends io onnx runtime)
set(core_folders detail format tensor strided interop)

function(layer_of relative out)  # relative: a path under include/memfmt/
  string(REGEX MATCH "^[^/]+" first "${relative}")
  if(first STREQUAL relative OR first IN_LIST core_folders)
    set(${out} core PARENT_SCOPE)
  else()
    set(${out} ${first} PARENT_SCOPE)
  endif()
endfunction()

file(GLOB_RECURSE headers RELATIVE "${root}" "${root}/*.hpp" "${root}/*.cuh")
list(SORT headers)
set(violations "")
foreach(h IN LISTS headers)
  if(h STREQUAL "memfmt.hpp")
    continue()
  endif()
  layer_of("${h}" from)
  if(NOT DEFINED below_${from})
    list(APPEND violations "${h}: folder '${from}' has no place in the layers (tests/core/check_layers.cmake)")
    continue()
  endif()
  get_filename_component(dir "${root}/${h}" DIRECTORY)
  file(STRINGS "${root}/${h}" includes REGEX "^#include \"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" target "${line}")
    get_filename_component(full "${dir}/${target}" ABSOLUTE)
    file(RELATIVE_PATH rel "${root}" "${full}")
    if(rel MATCHES "^\\.\\.")
      continue()  # outside include/memfmt/
    endif()
    layer_of("${rel}" to)
    if(NOT to STREQUAL from AND NOT to IN_LIST below_${from})
      list(APPEND violations "${h} (${from}) includes ${rel} (${to})")
    endif()
  endforeach()
endforeach()
list(LENGTH headers n)
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "memfmt: includes against the layers:\n  ${text}")
endif()
message(STATUS "memfmt: the includes of ${n} headers keep to the layers")
