# Data loaders, shards, batcher (nn/data.c) and checkpoints
# (nn/checkpoint.c). test_data_fashion reads the real Fashion-MNIST.
gn_add_test(NAME test_data SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_data.c
            LIBS gn_nn gn::cmocka ZLIB::ZLIB LABELS unit)
gn_add_test(NAME test_data_fashion
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_data.c
            LIBS gn_nn gn::cmocka ZLIB::ZLIB LABELS slow ARGS --fashion)
gn_add_test(NAME test_checkpoint
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_checkpoint.c
            LIBS gn_nn gn::cmocka gn::sodium LABELS unit)
# Seeded non-IID splits (nn/partition.c): --partition's schemes.
gn_add_test(NAME test_partition
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_partition.c
            LIBS gn_nn gn::cmocka LABELS unit)
# The bounded sample reservoir of --shuffle-samples (nn/reservoir.c).
gn_add_test(NAME test_reservoir
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_reservoir.c
            LIBS gn_nn gn::cmocka LABELS unit)
