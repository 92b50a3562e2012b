# Install rules and the Debian package (CPack).
#
# What goes where (GNUInstallDirs; the package uses prefix /usr):
#   bin/        gossipnode gossipctl gossip-keygen gossip-import gossip-model
#               gossip-plot (stripped under --strip and in the package,
#               with the toolchain's strip when cross-building)
#   share/man/  gossipnode(1) gossipctl(1) gossip-keygen(1) gossip-import(1)
#               gossip-model(1) gossipnode-peers(5) (docs/man/), gzip -9n
#   lib/systemd/system/gossipnode.service, lib/sysusers.d/gossipnode.conf,
#   share/bash-completion/completions/, /etc/gossipnode/gossipnode.conf
#               (tools/dist/)
#   share/doc/gossipnode/  the user-facing docs, copyright (machine-readable)
#               and changelog.gz (tools/dist/debian/), examples/nftables.conf
# The binaries carry INSTALL_RPATH = the pinned BLIS build's directory
# (set in the top CMakeLists.txt), so an installed gossipnode loads the same
# libblis.so.4 as the build tree did.
set(GN_DIST ${PROJECT_SOURCE_DIR}/tools/dist)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr) # the .deb's prefix
# Fixed, not derived from the prefix: systemd only looks in these, and
# Debian 12 has merged /usr (lib/ here is not CMAKE_INSTALL_LIBDIR, which
# is the multiarch lib/<triplet>).
set(GN_UNITDIR lib/systemd/system CACHE STRING "systemd unit directory")
set(GN_SYSUSERSDIR lib/sysusers.d CACHE STRING "sysusers.d directory")

set(GN_PROGRAMS gossipnode gossipctl gossip-keygen gossip-import gossip-model)
if(GN_EMULATED) # the names are wrappers (cmake/Emulator.cmake)
  foreach(t ${GN_PROGRAMS})
    install(PROGRAMS $<TARGET_FILE:${t}>.${CMAKE_SYSTEM_PROCESSOR}
            DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME ${t})
    # A file install is not stripped by --strip (CPACK_STRIP_FILES), only
    # install(TARGETS) is: strip it the same way, with CMAKE_STRIP, which
    # CMake takes from the cross compiler's prefix (aarch64-linux-gnu-strip).
    install(CODE "if(CMAKE_INSTALL_DO_STRIP)
  execute_process(COMMAND \"${CMAKE_STRIP}\"
    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/${t}\"
    RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR \"${CMAKE_STRIP} ${t} failed: \${rc}\")
  endif()
endif()")
  endforeach()
else()
  install(TARGETS ${GN_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/gossip-plot
        DESTINATION ${CMAKE_INSTALL_BINDIR})
# Man pages and the changelog as Debian policy wants them: gzip -9n (no
# name or time stamp in the header, so the same source gives the same bytes).
find_program(GN_GZIP gzip REQUIRED)
set(GN_GZ_DIR ${CMAKE_BINARY_DIR}/gz)
file(MAKE_DIRECTORY ${GN_GZ_DIR})
set(GN_GZ_FILES)
function(gn_gzip src name) # -> ${GN_GZ_DIR}/${name}.gz
  set(out ${GN_GZ_DIR}/${name}.gz)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E copy ${src} ${GN_GZ_DIR}/${name}
    COMMAND ${GN_GZIP} -9nf ${GN_GZ_DIR}/${name}
    DEPENDS ${src} VERBATIM)
  set(GN_GZ_FILES ${GN_GZ_FILES} ${out} PARENT_SCOPE)
endfunction()
foreach(m gossipnode.1 gossipctl.1 gossip-keygen.1 gossip-import.1
          gossip-model.1 gossipnode-peers.5)
  gn_gzip(${PROJECT_SOURCE_DIR}/docs/man/${m} ${m})
  string(REGEX REPLACE ".*\\.([0-9])$" "man\\1" section ${m})
  install(FILES ${GN_GZ_DIR}/${m}.gz
          DESTINATION ${CMAKE_INSTALL_MANDIR}/${section})
endforeach()
# A native package (no Debian revision): its one changelog, in Debian's
# format, is changelog.gz (policy 12.7).
gn_gzip(${GN_DIST}/debian/changelog changelog)
add_custom_target(gn_gz ALL DEPENDS ${GN_GZ_FILES})
install(FILES ${GN_GZ_DIR}/changelog.gz ${GN_DIST}/debian/copyright
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${GN_DIST}/nftables.conf
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(FILES ${GN_DIST}/gossipnode.service DESTINATION ${GN_UNITDIR})
install(FILES ${GN_DIST}/sysusers.conf DESTINATION ${GN_SYSUSERSDIR}
        RENAME gossipnode.conf)
# /etc itself for the package and any /usr install (the unit and the
# daemon's default name /etc/gossipnode/gossipnode.conf); elsewhere
# PREFIX/etc, like GNUInstallDirs.
if(CPACK_PACKAGING_INSTALL_PREFIX OR CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(GN_CONFDIR /etc/gossipnode)
else()
  set(GN_CONFDIR ${CMAKE_INSTALL_SYSCONFDIR}/gossipnode)
endif()
install(FILES ${GN_DIST}/gossipnode.conf DESTINATION ${GN_CONFDIR})
foreach(c gossipnode gossipctl gossip-keygen)
  install(FILES ${GN_DIST}/completion.bash
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
          RENAME ${c})
endforeach()
install(FILES README.md docs/operations.md docs/control.md docs/eventlog.md
              docs/formats.md docs/protocol.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- Debian package -------------------------------------------------------
# Runtime dependencies are named, not found by dpkg-shlibdeps: it has to work
# for the arm64 package built on amd64 too, and the BLIS build is ours to
# choose (libblis4-serial owns blis-serial/libblis.so.4).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(GN_DEB_ARCH arm64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(GN_DEB_ARCH amd64)
else()
  set(GN_DEB_ARCH ${CMAKE_SYSTEM_PROCESSOR})
endif()
if(GN_BLIS_VARIANT_USED MATCHES "^(serial|pthread|openmp)$")
  set(GN_DEB_BLIS "libblis4-${GN_BLIS_VARIANT_USED}")
else()
  set(GN_DEB_BLIS "libblis4-serial | libblis4")
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gossipnode)
set(CPACK_PACKAGE_VERSION ${GN_VERSION})
set(CPACK_PACKAGE_CONTACT "gossipnode maintainers <gossipnode@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "peer-to-peer deep-learning trainer for small devices")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "gossipnode trains a neural network on a cluster of small boards \
(Raspberry-Pi class) without a parameter server: members find each other by \
gossip (SWIM), exchange signed model slices with a partner each step, and \
any node may join or leave at any time.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${GN_DEB_ARCH})
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6 (>= 2.34), libuv1 (>= 1.44), libsodium23 (>= 1.0.18), \
libmsgpackc2 (>= 4.0), zlib1g, libpng16-16 (>= 1.6), ${GN_DEB_BLIS}")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "dataset-fashion-mnist, systemd")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3, gnuplot-nox")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${GN_DIST}/debian/postinst ${GN_DIST}/debian/prerm
    ${GN_DIST}/debian/postrm ${GN_DIST}/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
include(CPack)
