# Multi-process cluster tests (label slow): real gossipnode processes on
# 127.0.0.1 with ephemeral ports, one Fashion-MNIST shard each.
if(TARGET gossipnode AND TARGET gossip-keygen)
  foreach(s three churn join hup stop shuffle)
    add_test(NAME test_cluster_${s}
             COMMAND /usr/bin/python3
                     ${CMAKE_CURRENT_SOURCE_DIR}/test_cluster_run.py
                     $<TARGET_FILE:gossipnode> $<TARGET_FILE:gossip-keygen>
                     ${s})
    set_tests_properties(test_cluster_${s} PROPERTIES LABELS slow
                         TIMEOUT 400 SKIP_RETURN_CODE 77 RUN_SERIAL ON)
  endforeach()
endif()
# A finished node stays a member with --after-train serve, also restarted
# on its finished checkpoint; nodes bound to 0.0.0.0 tell their
# peers-file address, not the wildcard; a node joins with only a
# certificate, the authority's key and a seed address, and is dropped by
# every member once its serial is revoked; a node far behind takes a
# peer's state; a node is a member while its data loads; nodes average
# less often as their CPU needs with --adapt cpu; a node held to a CPU
# quota sends its shuffled samples at its partners' pace (need gossipctl).
if(TARGET gossipnode AND TARGET gossip-keygen AND TARGET gossipctl)
  foreach(s serve wildcard finished settings cert revoke far joinfirst cpu
          paced)
    add_test(NAME test_cluster_${s}
             COMMAND /usr/bin/python3
                     ${CMAKE_CURRENT_SOURCE_DIR}/test_cluster_run.py
                     $<TARGET_FILE:gossipnode> $<TARGET_FILE:gossip-keygen>
                     ${s} $<TARGET_FILE:gossipctl>)
    set_tests_properties(test_cluster_${s} PROPERTIES LABELS slow
                         TIMEOUT 400 SKIP_RETURN_CODE 77 RUN_SERIAL ON)
  endforeach()
endif()
