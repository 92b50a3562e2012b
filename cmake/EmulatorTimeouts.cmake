# Run by ctest (TEST_INCLUDE_FILES, cmake/Emulator.cmake) at the top of a
# directory's CTestTestfile.cmake, before its tests are declared; GN_SCALE
# is the factor. It wraps set_tests_properties so that every TIMEOUT set
# after it is multiplied (the original stays reachable with a leading _),
# and each such test gets GN_TEST_SLOWDOWN=GN_SLOWDOWN in its environment.
# Commands are global in ctest: wrap only once (a second wrap would make
# _set_tests_properties the first wrapper, calling itself).
if(COMMAND _gn_timeouts_wrapped)
  return()
endif()
function(_gn_timeouts_wrapped)
endfunction()
macro(set_tests_properties)
  set(_gn_args ${ARGN})
  list(FIND _gn_args TIMEOUT _gn_i)
  if(_gn_i GREATER -1)
    math(EXPR _gn_j "${_gn_i} + 1")
    list(GET _gn_args ${_gn_j} _gn_to)
    math(EXPR _gn_to "${_gn_to} * ${GN_SCALE}")
    list(REMOVE_AT _gn_args ${_gn_j})
    list(INSERT _gn_args ${_gn_j} ${_gn_to})
    # and tell the test how much slower its programs run (GN_TEST_SLOWDOWN:
    # probe budgets and step counts scale with it, see Emulator.cmake)
    list(FIND _gn_args ENVIRONMENT _gn_e)
    if(_gn_e GREATER -1)
      math(EXPR _gn_e "${_gn_e} + 1")
      list(GET _gn_args ${_gn_e} _gn_env)
      list(REMOVE_AT _gn_args ${_gn_e})
      list(INSERT _gn_args ${_gn_e} "${_gn_env}\;GN_TEST_SLOWDOWN=${GN_SLOWDOWN}")
    else()
      # right after PROPERTIES, not at the end: the generated call ends
      # with _BACKTRACE_TRIPLES, whose value is a list that ${ARGN} splits
      # into elements (empty ones dropped), so a pair appended after it
      # was misaligned whenever that count was even, and the test never
      # saw the variable (test_cluster_*, test_train_*: CI ran
      # test_cluster_stop emulated with its native bound)
      list(FIND _gn_args PROPERTIES _gn_p)
      math(EXPR _gn_p "${_gn_p} + 1")
      list(INSERT _gn_args ${_gn_p} ENVIRONMENT "GN_TEST_SLOWDOWN=${GN_SLOWDOWN}")
    endif()
  endif()
  _set_tests_properties(${_gn_args})
endmacro()
