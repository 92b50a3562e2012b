# Membership (SWIM + Lifeguard) on the simulated network, and the facade's
# wire checks. Deterministic, virtual time; the seed is printed (GN_SEED).
# The 300-simulated-second loss scenario is its own ctest entry.
gn_add_test(NAME test_swim SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_swim.c
            LIBS gn_sim gn::cmocka LABELS sim TIMEOUT 300
            ARGS skip test_loss_no_false_dead)
gn_add_test(NAME test_swim_loss SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_swim.c
            LIBS gn_sim gn::cmocka LABELS sim TIMEOUT 300
            ARGS only test_loss_no_false_dead)
# Cluster settings agreed at join (gossip/settings.h): refused both ways.
gn_add_test(NAME test_settings SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_settings.c
            LIBS gn_sim gn::cmocka LABELS sim)
