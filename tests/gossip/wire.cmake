# Wire format: round trips, every truncation and bit flip, reject reasons
# with their counters, replay windows, keyring, and the byte-exact test
# vectors of docs/protocol.md (read from the source tree).
gn_add_test(NAME test_wire SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_wire.c
            LIBS gn_gossip gn::cmocka LABELS unit TIMEOUT 120)
target_compile_definitions(test_wire PRIVATE
                           GN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# the keyring's seams (gossip/keyring_private.h, private to gossip/)
target_include_directories(test_wire PRIVATE ${PROJECT_SOURCE_DIR}/gossip)
# Signed vs MAC'd bulk frames, encode + decode (docs/protocol.md 2.2.1):
# built, not registered (a benchmark never fails on timing). Run
#   build/tests/gossip/bench_gossip_wire [reps] [payload_bytes] [seed]
add_executable(bench_gossip_wire ${CMAKE_CURRENT_LIST_DIR}/bench_wire.c)
target_link_libraries(bench_gossip_wire PRIVATE gn_gossip gn::sodium)
target_include_directories(bench_gossip_wire PRIVATE
                           ${PROJECT_SOURCE_DIR}/tests/common)
# The cluster authority's certificates and revocation lists (gossip/cert.h):
# every verdict, the clock policy's edges, the merge rule, and the vectors
# of docs/protocol.md section 12 (read from the source tree).
gn_add_test(NAME test_cert SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cert.c
            LIBS gn_gossip gn::cmocka LABELS unit)
target_compile_definitions(test_cert PRIVATE
                           GN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
