# nn core tests: GEMM wrapper vs a naive oracle, every layer's backward vs
# finite differences, models (spec, determinism, learning), optimizers.
# The tests also include the internal nn/layers.h (kernels, PRNG).
foreach(t gemm layers model optim)
  set(src ${CMAKE_CURRENT_LIST_DIR}/test_${t}.c)
  if(EXISTS ${src})
    gn_add_test(NAME nn_${t} SOURCES ${src} LIBS gn_nn gn::cmocka m
                LABELS unit TIMEOUT 300)
    target_include_directories(nn_${t} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../../nn)
  endif()
endforeach()
# Model health's absolute criteria (nn/health.h), in virtual time.
gn_add_test(NAME nn_health SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_health.c
            LIBS gn_nn gn::cmocka m)
