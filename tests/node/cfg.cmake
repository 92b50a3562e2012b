# The service side (node/config/conffile.c, sdnotify.c, evlog reopen).
gn_add_test(NAME test_service SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_service.c
            LIBS gn_node gn::cmocka LABELS unit)
