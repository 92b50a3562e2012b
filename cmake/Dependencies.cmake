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

# Debian ships no pkg-config file or CMake config for BLIS, and installs
# each threading build in its own directory (blis-serial, blis-pthread,
# blis-openmp) with "libblis.so"/"blis.h" following update-alternatives,
# which any later package install may flip.  So we name the build we want.
# serial is the default: at batch 100 one BLIS thread is as fast as the
# threaded builds at 1 thread, and 2 BLIS threads on a busy 2-core host
# collapsed to 1-10% of that speed (spinning barriers; docs/nn.md has the
# numbers).  --threads N (nn_threads_set) splits a batch across N threads
# of our own, each calling this serial BLIS.  "system" takes whatever
# the alternatives point to.  A missing variant falls back to "system".
set(GN_BLIS_VARIANT "serial" CACHE STRING
    "BLIS threading build: serial, pthread, openmp or system")
set_property(CACHE GN_BLIS_VARIANT PROPERTY STRINGS serial pthread openmp
             system)
set(_gn_blis_arch ${CMAKE_LIBRARY_ARCHITECTURE})
if(NOT GN_BLIS_VARIANT STREQUAL "system")
  find_library(GN_BLIS_LIBRARY_${GN_BLIS_VARIANT} NAMES blis NO_DEFAULT_PATH
               PATHS /usr/lib/${_gn_blis_arch}/blis-${GN_BLIS_VARIANT})
  find_path(GN_BLIS_INCLUDE_${GN_BLIS_VARIANT} blis.h NO_DEFAULT_PATH
            PATHS /usr/include/${_gn_blis_arch}/blis-${GN_BLIS_VARIANT})
  if(GN_BLIS_LIBRARY_${GN_BLIS_VARIANT} AND GN_BLIS_INCLUDE_${GN_BLIS_VARIANT})
    set(BLIS_LIBRARY ${GN_BLIS_LIBRARY_${GN_BLIS_VARIANT}})
    set(BLIS_INCLUDE_DIR ${GN_BLIS_INCLUDE_${GN_BLIS_VARIANT}})
  else()
    message(WARNING "BLIS variant '${GN_BLIS_VARIANT}' not installed "
                    "(libblis-${GN_BLIS_VARIANT}-dev); using the system one")
  endif()
endif()
find_path(BLIS_INCLUDE_DIR blis.h PATH_SUFFIXES blis REQUIRED)
find_library(BLIS_LIBRARY NAMES blis REQUIRED)
add_library(gn_blis INTERFACE)
target_include_directories(gn_blis SYSTEM INTERFACE ${BLIS_INCLUDE_DIR})
# The variant's directory is not a default search path, so CMake records it
# in the binaries' RUNPATH: the loader finds that build's libblis.so.4, not
# the alternatives' one.  (Installed binaries need INSTALL_RPATH likewise.)
target_link_libraries(gn_blis INTERFACE ${BLIS_LIBRARY} Threads::Threads m)
add_library(gn::blis ALIAS gn_blis)
message(STATUS "BLIS: ${BLIS_LIBRARY} (headers ${BLIS_INCLUDE_DIR}, "
               "variant ${GN_BLIS_VARIANT})")
