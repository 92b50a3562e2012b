# Finds the four fixed libraries (+ zlib for gzipped IDX files, cmocka for
# tests) and exposes them as imported targets: gn::uv gn::sodium gn::msgpack
# gn::blis gn::cmocka ZLIB::ZLIB.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)

pkg_check_modules(GN_UV REQUIRED IMPORTED_TARGET libuv)
pkg_check_modules(GN_SODIUM REQUIRED IMPORTED_TARGET libsodium)
# msgpack-c is "msgpack" in Debian 12 (4.x) and "msgpack-c" upstream (6.x).
pkg_search_module(GN_MSGPACK REQUIRED IMPORTED_TARGET msgpack-c msgpack)
pkg_check_modules(GN_CMOCKA IMPORTED_TARGET cmocka)

add_library(gn::uv ALIAS PkgConfig::GN_UV)
add_library(gn::sodium ALIAS PkgConfig::GN_SODIUM)
add_library(gn::msgpack ALIAS PkgConfig::GN_MSGPACK)
if(GN_CMOCKA_FOUND)
  add_library(gn::cmocka ALIAS PkgConfig::GN_CMOCKA)
endif()

# Debian ships no pkg-config file or CMake config for BLIS.
find_path(BLIS_INCLUDE_DIR blis.h PATH_SUFFIXES blis REQUIRED)
find_library(BLIS_LIBRARY NAMES blis REQUIRED)
add_library(gn_blis INTERFACE)
target_include_directories(gn_blis SYSTEM INTERFACE ${BLIS_INCLUDE_DIR})
target_link_libraries(gn_blis INTERFACE ${BLIS_LIBRARY} Threads::Threads m)
add_library(gn::blis ALIAS gn_blis)
message(STATUS "BLIS: ${BLIS_LIBRARY} (headers ${BLIS_INCLUDE_DIR})")
