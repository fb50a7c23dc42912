# Flags for the project's own targets (tests, benchmarks, tools, examples): strict warnings,
# optional sanitizers and -march=native. The installed library imposes none of these on users.

# Warnings as errors are the project's own check (scripts/test.sh and CI turn MEMFMT_WERROR on), not
# a user's burden: a compiler with new warnings, or GCC 12's -O3 -Warray-bounds after deep inlining,
# must not stop a user's build.
option(MEMFMT_WERROR "Treat warnings as errors in memfmt's own targets (tests, benchmarks, tools, examples, fuzzers)" OFF)
set(MEMFMT_WERROR_CXX "")                 # -Werror for the C++ of targets outside memfmt_project_flags
set(MEMFMT_WERROR_DEPRECATED "")          # deprecated cuDNN calls as errors, in the cuDNN parts' own targets
if(MEMFMT_WERROR)
  set(MEMFMT_WERROR_CXX -Werror)
  set(MEMFMT_WERROR_DEPRECATED -Werror=deprecated-declarations)
endif()

add_library(memfmt_project_flags INTERFACE)
target_compile_options(memfmt_project_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
if(MEMFMT_WERROR)
  target_compile_options(memfmt_project_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror> $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
endif()
if(MEMFMT_NATIVE)
  target_compile_options(memfmt_project_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
if(MEMFMT_SANITIZE)
  # Less UBSan's null and vptr checks: ASan reports a null dereference as a SEGV with its stack, the
  # library has few virtual calls, and checking every pointer use cost a third of this build's
  # compile time (tests/graph/test_solve.cpp at -Og: 37.7 s with them, 24.7 s without).
  target_compile_options(memfmt_project_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-sanitize=null,vptr -fno-sanitize-recover=all -fno-omit-frame-pointer>)
  target_link_options(memfmt_project_flags INTERFACE -fsanitize=address,undefined)
endif()

# memfmt_add_test(name SOURCES a.cpp ... [LIBS x y] [LABELS l] [PROPERTIES k v ...])
# One GoogleTest executable; each of its tests is its own CTest entry "<name>.<Suite>.<Test>", so a
# GTEST_SKIP shows as skipped (with the binary's own message in the log) and not as passed. The list
# of tests is read when ctest runs (PRE_TEST), so building never runs a test binary.
if(MEMFMT_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
# MEMFMT_TEST_SET=unsanitized builds and registers only the tests that a sanitizer build leaves
# out (labels onednn, cuda and large; scripts/test.sh runs every other test under the sanitizers, so
# the CPU tests are compiled once). The others stay defined, out of `all` and out of ctest.
set(MEMFMT_TEST_SET all CACHE STRING "Tests to build: all, or unsanitized (only those labelled onednn, cuda or large)")
set_property(CACHE MEMFMT_TEST_SET PROPERTY STRINGS all unsanitized)
if(NOT MEMFMT_TEST_SET MATCHES "^(all|unsanitized)$")
  message(FATAL_ERROR "memfmt: MEMFMT_TEST_SET is '${MEMFMT_TEST_SET}'; expected all or unsanitized")
endif()
# Extra C++ flags for the test executables' own files, after the build type's. scripts/test.sh
# builds the tests of its -O3 build at -O1: what must compile warning-free at -O3 is the main job's
# code (benchmarks, tools, examples, the instance libraries); the tests compile in about half the
# time and still run in a minute.
set(MEMFMT_TEST_CXX_FLAGS "" CACHE STRING "Extra C++ flags for memfmt's test executables (scripts/test.sh: -O1 in its -O3 build)")
separate_arguments(_memfmt_test_cxx_flags UNIX_COMMAND "${MEMFMT_TEST_CXX_FLAGS}")
function(memfmt_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS;PROPERTIES" ${ARGN})
  set(wanted TRUE)
  if(MEMFMT_TEST_SET STREQUAL "unsanitized")
    set(wanted FALSE)
    foreach(label IN ITEMS onednn cuda large)
      if(label IN_LIST T_LABELS)
        set(wanted TRUE)
      endif()
    endforeach()
  endif()
  # A test left out stays defined (later target_* calls still apply), out of `all` and of ctest.
  set(exclude "")
  if(NOT wanted)
    set(exclude EXCLUDE_FROM_ALL)
  endif()
  add_executable(${name} ${exclude} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE memfmt::memfmt memfmt_project_flags GTest::gtest GTest::gtest_main ${T_LIBS})
  target_compile_options(${name} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${_memfmt_test_cxx_flags}>")
  if(NOT wanted)
    return()
  endif()
  gtest_discover_tests(${name} TEST_PREFIX "${name}." EXTRA_ARGS --gtest_brief=1 DISCOVERY_MODE PRE_TEST
                       DISCOVERY_TIMEOUT 60 TEST_LIST ${name}_TESTS)
  # Properties are set by a script ctest reads after the discovered tests: gtest_discover_tests'
  # own PROPERTIES option splits list values such as LABELS "cpu;onednn".
  set(script "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS [==[${T_LABELS}]==])\n")
  if(MEMFMT_SANITIZE)
    string(APPEND script "  set_tests_properties(\${${name}_TESTS} PROPERTIES ENVIRONMENT [==[ASAN_OPTIONS=detect_leaks=1:"
                         "abort_on_error=1;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1]==])\n")
  endif()
  set(props ${T_PROPERTIES})  # single-valued properties: key value ...
  while(props)
    list(POP_FRONT props key value)
    string(APPEND script "  set_tests_properties(\${${name}_TESTS} PROPERTIES ${key} [==[${value}]==])\n")
  endwhile()
  set(file "${CMAKE_CURRENT_BINARY_DIR}/${name}_properties.cmake")
  file(WRITE "${file}" "if(${name}_TESTS)\n${script}endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${file}")
endfunction()

# memfmt_self_contained_headers(target HEADERS memfmt/a.hpp ... [LIBS x y] [OPTIONS -f...])
# Every public header compiles on its own: an object library with one translation unit per header,
# which includes it twice (so a broken include guard fails too). Headers are named as users include
# them; LIBS bring the headers of the component's dependencies.
function(memfmt_self_contained_headers target)
  cmake_parse_arguments(S "" "" "HEADERS;LIBS;OPTIONS" ${ARGN})
  set(sources "")
  foreach(h IN LISTS S_HEADERS)
    string(MAKE_C_IDENTIFIER "${h}" id)
    set(f "${CMAKE_CURRENT_BINARY_DIR}/${target}/${id}.cpp")
    file(CONFIGURE OUTPUT "${f}" CONTENT "#include <${h}>\n#include <${h}>  // and include guards work\n")
    list(APPEND sources "${f}")
  endforeach()
  add_library(${target} OBJECT ${sources})
  target_link_libraries(${target} PRIVATE memfmt::memfmt memfmt_project_flags ${S_LIBS})
  # What is checked is that each header compiles alone; its code runs in the tests. Unoptimised and
  # uninstrumented, each file compiles in a fifth less time under the sanitizer build.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O0 -g0 -fno-sanitize=all> ${S_OPTIONS})
endfunction()

# memfmt_public_headers(out_var GLOB...): the headers under include/ matching the globs, named as
# users include them (memfmt/...).
function(memfmt_public_headers out)
  set(globs "")
  foreach(g IN LISTS ARGN)
    list(APPEND globs "${PROJECT_SOURCE_DIR}/include/${g}")
  endforeach()
  file(GLOB_RECURSE found RELATIVE "${PROJECT_SOURCE_DIR}/include" CONFIGURE_DEPENDS ${globs})
  list(SORT found)
  set(${out} ${found} PARENT_SCOPE)
endfunction()
