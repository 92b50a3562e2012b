# Transport, control socket and metrics tests (nodenet). They compile the
# three modules straight from node/ into a small library so that they build
# and run even while other parts of gn_node are mid-change.
set(GN_NODENET_SRC ${PROJECT_SOURCE_DIR}/node/net/net.c
                   ${PROJECT_SOURCE_DIR}/node/net/tcpinfo.c)
foreach(f ctl.c metrics.c version.c)
  if(EXISTS ${PROJECT_SOURCE_DIR}/node/service/${f})
    list(APPEND GN_NODENET_SRC ${PROJECT_SOURCE_DIR}/node/service/${f})
  endif()
endforeach()
add_library(gn_nodenet_t STATIC ${GN_NODENET_SRC})
target_include_directories(gn_nodenet_t PUBLIC ${PROJECT_SOURCE_DIR}/node)
target_compile_definitions(gn_nodenet_t PRIVATE
                           GN_VERSION="${GN_VERSION}")
# gn_gossip for the link estimator (gossip/link.c) the transport feeds
target_link_libraries(gn_nodenet_t PUBLIC gn_base gn_gossip gn::uv gn::msgpack
                      Threads::Threads m)

if(TARGET gn::cmocka)
  foreach(t net ctl metrics)
    if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/test_${t}.c)
      gn_add_test(NAME test_${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${t}.c
                  LIBS gn_nodenet_t gn::cmocka LABELS unit TIMEOUT 120)
    endif()
  endforeach()
endif()

# Network-namespace test: two namespaces, a veth pair, iptables and tbf.
# Root only; the script exits 77 (skipped) with a message otherwise.
add_executable(net_echo ${CMAKE_CURRENT_LIST_DIR}/netns/net_echo.c)
target_link_libraries(net_echo PRIVATE gn_nodenet_t)
target_include_directories(net_echo PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
add_test(NAME netns_net
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/netns/netns_net.sh
                 $<TARGET_FILE:net_echo>)
set_tests_properties(netns_net PROPERTIES LABELS netns TIMEOUT 180
                     SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)

# The lockout Must-show of issue 11: an attacker's idle and churning
# connections against a node while two honest endpoints exchange signed
# frames; compares the rate with the normal one measured in the same run.
# RUN_SERIAL: its rate ratio should not share the two cores with -j2 peers.
if(TARGET gn::cmocka AND TARGET gn_gossip)
  gn_add_test(NAME test_net_lockout
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_net_lockout.c
              LIBS gn_nodenet_t gn_gossip gn::cmocka Threads::Threads
              LABELS unit TIMEOUT 120)
  set_tests_properties(test_net_lockout PROPERTIES RUN_SERIAL TRUE)
endif()

# Membership across a real partition {0,1}|{2} and its heal (issue 11):
# three namespaces on a bridge, a membership-only node in each. ~85 s.
if(TARGET gn_gossip)
  add_executable(swim_node ${CMAKE_CURRENT_LIST_DIR}/netns/swim_node.c)
  target_link_libraries(swim_node PRIVATE gn_nodenet_t gn_gossip)
  add_test(NAME netns_swim
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/netns/netns_swim.sh
                   $<TARGET_FILE:swim_node>)
  set_tests_properties(netns_swim PROPERTIES LABELS netns TIMEOUT 240
                       SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
endif()
