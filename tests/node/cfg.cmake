# Key file and peers file (node/keys.c, node/peers.c).
gn_add_test(NAME test_keys SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_keys.c
            LIBS gn_ident gn::cmocka LABELS unit)
gn_add_test(NAME test_peers SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_peers.c
            LIBS gn_ident gn::cmocka LABELS unit)
# The service side (node/conffile.c, sdnotify.c, evlog reopen).
gn_add_test(NAME test_service SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_service.c
            LIBS gn_node gn::cmocka LABELS unit)
