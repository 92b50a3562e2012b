# The daemon's training side (node/config/options.c, evlog.c, trainer.c, daemon.c,
# main.c): option parsing and the event log as a unit test, the binary's
# error paths, training, resume and determinism as process-level tests.
gn_add_test(NAME test_cli_options
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_options.c
            LIBS gn_node gn::cmocka LABELS unit)
# test_kernel: BLIS's kernel set chosen by measurement (node/train/kernel.c):
# cached and reused, foreign cache lines ignored, overrides.
gn_add_test(NAME test_kernel
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_kernel.c
            LIBS gn_node gn::cmocka LABELS unit)
# RUN_SERIAL: its probe times children against a deadline; under qemu with
# two CPU-heavy neighbours on 2 cores every probe child failed (3 runs
# out of 3), alone or beside one it passed (docs/history/benchmarks-log.md 6.6).
set_tests_properties(test_kernel PROPERTIES RUN_SERIAL TRUE)
# test_fill: extra batches while waiting (--fill-batches) give the
# sample-weighted mean gradient; needs Fashion-MNIST (skips without it).
gn_add_test(NAME test_fill
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_fill.c
            LIBS gn_node gn::cmocka LABELS unit)
if(TARGET gossipnode)
  # Process tests: bash scripts driving the real binary.
  # test_cli_errors: each bad configuration -> one line, non-zero exit.
  add_test(NAME test_cli_errors
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_errors.sh
                   $<TARGET_FILE:gossipnode>)
  set_tests_properties(test_cli_errors PROPERTIES LABELS unit TIMEOUT 120
                       SKIP_RETURN_CODE 77)
  foreach(t test_train_resume test_train_determinism test_train_mnist)
    add_test(NAME ${t} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/${t}.sh
                               $<TARGET_FILE:gossipnode>)
    set_tests_properties(${t} PROPERTIES LABELS slow TIMEOUT 300
                         SKIP_RETURN_CODE 77)
  endforeach()
endif()
# test_notify: READY/STATUS/WATCHDOG/STOPPING datagrams, journald prefixes
# and a malformed config line, against a fake $NOTIFY_SOCKET.
find_program(GN_PYTHON3_NOTIFY NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(TARGET gossipnode AND GN_PYTHON3_NOTIFY)
  add_test(NAME test_notify
           COMMAND ${GN_PYTHON3_NOTIFY} ${CMAKE_CURRENT_SOURCE_DIR}/test_notify.py
                   $<TARGET_FILE:gossipnode>)
  set_tests_properties(test_notify PROPERTIES LABELS slow TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endif()
# test_settings_build: the cluster settings a node joins with, from its
# options (node/config/settings.c), and protocol.md's digest vector.
gn_add_test(NAME test_settings_build
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_settings_build.c
            LIBS gn_node gn::cmocka LABELS unit)
target_compile_definitions(test_settings_build PRIVATE
                           GN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# test_stall: the longest step, the slow ones and their rate-limited
# events (node/train/stall.c), in numbers, no clock.
gn_add_test(NAME test_stall
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_stall.c
            LIBS gn_node gn::cmocka LABELS unit)
# test_shuffle: how many samples a node sends per step at its pace, and a
# batch that large through the shuffle's box whole (node/train/shuffle.c).
gn_add_test(NAME test_shuffle
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_shuffle.c
            LIBS gn_node gn::cmocka LABELS unit)
