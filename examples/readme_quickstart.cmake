# Fails unless README.md shows examples/quickstart.cpp, from its first #include to the end, verbatim
# in a ```cpp block: the README's quick start must be the program that is compiled and run.
#   cmake -DQUICKSTART=<quickstart.cpp> -DREADME=<README.md> -P readme_quickstart.cmake
file(READ "${QUICKSTART}" code)
file(READ "${README}" readme)
string(FIND "${code}" "\n#include" start)  # the first line that starts with #include
if(start EQUAL -1)
  message(FATAL_ERROR "${QUICKSTART} has no #include line")
endif()
math(EXPR start "${start} + 1")
string(SUBSTRING "${code}" ${start} -1 body)
string(FIND "${readme}" "```cpp\n${body}```\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README}'s quick start differs from ${QUICKSTART} (from its first #include on): "
                      "paste the file into the README's ```cpp block")
endif()
