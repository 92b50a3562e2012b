# gn_add_test(NAME <name> SOURCES <src...> LIBS <lib...>
#             [LABELS <label...>] [TIMEOUT <seconds>] [ARGS <arg...>])
#
# One executable per test file, registered with ctest. Labels in use:
#   unit     fast, deterministic, run under ASan/UBSan too
#   sim      simulated-network tests (deterministic, virtual time)
#   slow     real training on Fashion-MNIST or multi-process; not under ASan
#   netns    needs root and network namespaces (skips with a message otherwise)
function(gn_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS})
  target_include_directories(${T_NAME} PRIVATE
                             ${PROJECT_SOURCE_DIR}/tests/common)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}"
                       TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77)
endfunction()
