# Cross-build for 64-bit Arm (Raspberry Pi 3/4/5 with a 64-bit OS) on a
# Debian amd64 host, against Debian's arm64 multiarch packages:
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install gcc-aarch64-linux-gnu qemu-user \
#     libuv1-dev:arm64 libsodium-dev:arm64 libmsgpack-dev:arm64 \
#     libblis-dev:arm64 libblis-serial-dev:arm64 libcmocka-dev:arm64 \
#     zlib1g-dev:arm64
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake
# Libraries and headers are the multiarch ones (/usr/lib/aarch64-linux-gnu,
# /usr/include/aarch64-linux-gnu), which Debian's cross gcc searches by
# itself, so no sysroot. Tests run under plain qemu-aarch64: the binaries'
# loader /lib/ld-linux-aarch64.so.1 then comes from libc6:arm64, the same
# glibc as the libraries beside it. (`qemu-aarch64 -L /usr/aarch64-linux-gnu`
# pairs the cross toolchain's older loader with those libraries, and every
# threaded program hangs.)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config: only the arm64 .pc files (the host's would name amd64 paths).
set(ENV{PKG_CONFIG_LIBDIR}
    "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# Every test whose command is one of our targets runs through this; scripts
# find it in GN_EMULATOR (tests/CMakeLists.txt).
find_program(GN_QEMU_AARCH64 qemu-aarch64)
if(GN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${GN_QEMU_AARCH64})
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
