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
# One GoogleTest executable, registered with CTest (one CTest entry per binary keeps configure fast).
if(MEMFMT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
function(memfmt_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS;PROPERTIES" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE memfmt::memfmt memfmt_project_flags GTest::gtest GTest::gtest_main ${T_LIBS})
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" ${T_PROPERTIES})
  if(MEMFMT_SANITIZE)
    set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT
                 "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1" "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  endif()
endfunction()
