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
# Joining with a certificate (issue 33 item 1): wire keys 20-21, admitted
# on the authority's word, refused and counted by verdict.
gn_add_test(NAME test_certjoin SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_certjoin.c
            LIBS gn_sim gn::cmocka LABELS sim)
# The revocation list while running (issue 33 item 1): wire key 22, the
# flood, members dropped and their frames refused as revoked, expiry.
gn_add_test(NAME test_crl SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_crl.c
            LIBS gn_sim gn::cmocka LABELS sim)
