# learn: partner schedule, gradient merge, payload codecs (gossip/schedule.c,
# gossip/merge.c, gossip/codec.c). The codec bench is built, not registered:
# run it by hand (see docs/learning.md).
if(TARGET gn::cmocka)
  gn_add_test(NAME gossip_sched SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sched.c
              LIBS gn_gossip gn::cmocka LABELS unit)
  # the schedule's test vectors of docs/protocol.md (read from the source)
  target_compile_definitions(gossip_sched PRIVATE
                             GN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gn_add_test(NAME gossip_merge SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_merge.c
              LIBS gn_gossip gn::cmocka LABELS unit)
  gn_add_test(NAME gossip_codec SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_codec.c
              LIBS gn_gossip gn::cmocka LABELS unit)
  gn_add_test(NAME gossip_dissem
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dissem.c
              LIBS gn_gossip gn::cmocka LABELS sim)
endif()
add_executable(bench_gossip_codec ${CMAKE_CURRENT_LIST_DIR}/bench_codec.c)
target_include_directories(bench_gossip_codec PRIVATE
                           ${PROJECT_SOURCE_DIR}/tests/common)
target_link_libraries(bench_gossip_codec PRIVATE gn_gossip)
# The exchange plan's admission rule and slice helpers (gossip/plan.c).
if(TARGET gn::cmocka)
  gn_add_test(NAME gossip_plan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_plan.c
              LIBS gn_gossip gn::cmocka LABELS unit)
endif()
# robust merge decisions (gossip/robust.c)
if(TARGET gn::cmocka)
  gn_add_test(NAME gossip_robust
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_robust.c
              LIBS gn_gossip gn::cmocka LABELS unit)
endif()
# what a node sends for averaging, from the measured link (gossip/adapt.c)
if(TARGET gn::cmocka)
  gn_add_test(NAME gossip_adapt
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_adapt.c
              LIBS gn_gossip gn::cmocka LABELS unit)
endif()
# the link estimator (gossip/link.c)
if(TARGET gn::cmocka)
  gn_add_test(NAME gossip_link SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_link.c
              LIBS gn_gossip gn::cmocka LABELS unit)
endif()
# the cluster-wide stop decision (gossip/stop.c)
if(TARGET gn::cmocka)
  gn_add_test(NAME gossip_stop SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stop.c
              LIBS gn_gossip gn::cmocka LABELS unit)
endif()
