# Flags for the project's own targets (tests, benchmarks, tools, examples): strict warnings,
# optional sanitizers and -march=native. The installed library imposes none of these on users.

add_library(memfmt_project_flags INTERFACE)
target_compile_options(memfmt_project_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra -Werror=all-warnings>)
if(MEMFMT_NATIVE)
  target_compile_options(memfmt_project_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
if(MEMFMT_SANITIZE)
  target_compile_options(memfmt_project_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer>)
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
function(memfmt_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS;PROPERTIES" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE memfmt::memfmt memfmt_project_flags GTest::gtest GTest::gtest_main ${T_LIBS})
  gtest_discover_tests(${name} TEST_PREFIX "${name}." EXTRA_ARGS --gtest_brief=1 DISCOVERY_MODE PRE_TEST
                       DISCOVERY_TIMEOUT 60 TEST_LIST ${name}_TESTS)
  # Properties are set by a script ctest reads after the discovered tests: gtest_discover_tests'
  # own PROPERTIES option splits list values such as LABELS "cpu;dnnl".
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
