# Cross builds whose tests run under an emulator (cmake/toolchain-aarch64.cmake
# sets CMAKE_CROSSCOMPILING_EMULATOR to qemu-aarch64).
#
# ctest puts the emulator in front of every test whose command is one of
# our targets, but several tests start our programs by path: shell scripts,
# test_keygen and test_gossipctl (execv), the Python cluster tests. Without
# binfmt_misc (which is the host kernel's, not ours to register) the kernel
# cannot run an aarch64 file, so in such a build each program's name is a
# two-line shell wrapper that runs the real binary, NAME.<processor>, under
# the emulator (every program a test starts by path: the tools, and the
# test helpers hostile_peer, net_echo, swim_node, lab_delay). Every path
# the tests know keeps working unchanged;
# cmake/Install.cmake installs the real binary under the plain name.

if(CMAKE_CROSSCOMPILING AND CMAKE_CROSSCOMPILING_EMULATOR)
  set(GN_EMULATED ON)
else()
  set(GN_EMULATED OFF)
endif()

# One target for all wrapped programs, run at every build after they are
# linked; the script converts a program only while it is still the ELF the
# linker wrote, so a build that relinks nothing changes nothing.
function(gn_emulator_wrap)
  if(NOT GN_EMULATED)
    return()
  endif()
  list(JOIN CMAKE_CROSSCOMPILING_EMULATOR " " emu)
  set(cmds)
  set(deps)
  foreach(t ${ARGN})
    if(NOT TARGET ${t}) # optional programs (lab_delay needs libnetfilter_queue)
      continue()
    endif()
    list(APPEND deps ${t})
    list(APPEND cmds COMMAND ${CMAKE_COMMAND} -DOUT=$<TARGET_FILE:${t}>
         -DSUFFIX=${CMAKE_SYSTEM_PROCESSOR} "-DEMU=${emu}"
         -P ${PROJECT_SOURCE_DIR}/cmake/EmulatorWrapper.cmake)
  endforeach()
  add_custom_target(gn_emulator_wrappers ALL ${cmds} DEPENDS ${deps}
                    COMMENT "emulator wrappers for ${deps}" VERBATIM)
endfunction()


# Timeouts: a test's TIMEOUT is for the native build; under the emulator
# every one is multiplied by GN_EMULATOR_TIMEOUT_SCALE. set_tests_properties
# only reaches tests of its own directory (before CMake 3.28), so each
# directory with tests gets a ctest-time include (TEST_INCLUDE_FILES) that
# scales the TIMEOUTs its CTestTestfile.cmake sets after it.
set(GN_EMULATOR_TIMEOUT_SCALE 4 CACHE STRING
    "Test timeouts are multiplied by this under an emulator")
# How much slower than native the emulated programs run, told to every test
# as GN_TEST_SLOWDOWN (unset natively = 1). Tests whose work is sized in
# wall time scale with it instead of failing: test_kernel's probe budget.
# qemu-aarch64 ran 100 MLP training steps with their final evaluation 84x
# slower than native in wall time, 103x in CPU time (docs/benchmarks.md
# 6.6), which is also why the training tests are not run emulated.
set(GN_EMULATOR_SLOWDOWN 100 CACHE STRING
    "Emulated programs run this many times slower (GN_TEST_SLOWDOWN)")
function(gn_emulator_scale_timeouts dir)
  if(NOT GN_EMULATED)
    return()
  endif()
  get_property(bin DIRECTORY ${dir} PROPERTY BINARY_DIR)
  get_property(tests DIRECTORY ${dir} PROPERTY TESTS)
  if(tests)
    file(WRITE ${bin}/gn_emulator_timeouts.cmake
         "set(GN_SCALE ${GN_EMULATOR_TIMEOUT_SCALE})\n"
         "set(GN_SLOWDOWN ${GN_EMULATOR_SLOWDOWN})\n"
         "include(\"${PROJECT_SOURCE_DIR}/cmake/EmulatorTimeouts.cmake\")\n")
    set_property(DIRECTORY ${dir} APPEND PROPERTY TEST_INCLUDE_FILES
                 ${bin}/gn_emulator_timeouts.cmake)
  endif()
  get_property(subs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(s ${subs})
    gn_emulator_scale_timeouts(${s})
  endforeach()
endfunction()
