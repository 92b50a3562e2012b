# Key file and peers file (node/keys.c, node/peers.c).
gn_add_test(NAME test_keys SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_keys.c
            LIBS gn_ident gn::cmocka LABELS unit)
gn_add_test(NAME test_peers SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_peers.c
            LIBS gn_ident gn::cmocka LABELS unit)
