# Wire format: round trips, every truncation and bit flip, reject reasons
# with their counters, replay windows, keyring, and the byte-exact test
# vectors of docs/protocol.md (read from the source tree).
gn_add_test(NAME test_wire SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_wire.c
            LIBS gn_gossip gn::cmocka LABELS unit TIMEOUT 120)
target_compile_definitions(test_wire PRIVATE
                           GN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
