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
# the alternatives' one.  Installed binaries get the same directory as
# INSTALL_RPATH (cmake/Install.cmake), or `cmake --install` would strip it
# and the alternatives (perhaps the OpenMP build) would win again.
target_link_libraries(gn_blis INTERFACE ${BLIS_LIBRARY} Threads::Threads m)
add_library(gn::blis ALIAS gn_blis)

# Name the build actually linked, not the one asked for: with only
# libblis-dev (say on arm64) the fallback above takes the alternatives'
# libblis.so, whose real path says which variant it is.
get_filename_component(_gn_blis_real ${BLIS_LIBRARY} REALPATH)
get_filename_component(GN_BLIS_LIBRARY_DIR ${BLIS_LIBRARY} DIRECTORY)
if(_gn_blis_real MATCHES "/blis-(serial|pthread|openmp)/")
  set(GN_BLIS_VARIANT_USED ${CMAKE_MATCH_1})
else()
  set(GN_BLIS_VARIANT_USED "unknown")
endif()
if(GN_BLIS_LIBRARY_DIR MATCHES "/blis-(serial|pthread|openmp)$")
  set(GN_BLIS_PINNED ON) # a private directory: RUNPATH pins it
else()
  set(GN_BLIS_PINNED OFF) # the alternatives' link: any install may flip it
endif()
if(NOT GN_BLIS_VARIANT STREQUAL "system" AND
   NOT GN_BLIS_VARIANT_USED STREQUAL GN_BLIS_VARIANT)
  message(WARNING "BLIS: asked for '${GN_BLIS_VARIANT}', linked "
                  "'${GN_BLIS_VARIANT_USED}' (${_gn_blis_real})")
endif()
message(STATUS "BLIS: ${BLIS_LIBRARY} -> ${_gn_blis_real} (headers "
               "${BLIS_INCLUDE_DIR}); variant asked ${GN_BLIS_VARIANT}, "
               "used ${GN_BLIS_VARIANT_USED}, pinned by RUNPATH: "
               "${GN_BLIS_PINNED}")
