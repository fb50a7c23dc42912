# The CLI's command sources (everything but main.cpp): the memfmt_cli_commands library and the
# fuzz_cli target compile the same list.
set(MEMFMT_CLI_COMMAND_SOURCES
    "${CMAKE_CURRENT_LIST_DIR}/cli.cpp"
    "${CMAKE_CURRENT_LIST_DIR}/model_file.cpp"
    "${CMAKE_CURRENT_LIST_DIR}/plan_command.cpp"
    "${CMAKE_CURRENT_LIST_DIR}/run_command.cpp")
