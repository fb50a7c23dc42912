// memfmt - ask what PyTorch 1.13 would do with a strided tensor (see cli.cpp for the commands).
#include <iostream>

#include "cli.hpp"

int main(int argc, char** argv) { return memfmt_cli::run(argc, argv, std::cout, std::cerr); }
