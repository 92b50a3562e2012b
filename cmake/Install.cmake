# Install rules and the Debian package (CPack).
#
# What goes where (GNUInstallDirs; the package uses prefix /usr):
#   bin/        gossipnode gossipctl gossip-keygen gossip-plot
#   share/man/  gossipnode(1) gossipctl(1) gossip-keygen(1) gossipnode-peers(5)
#               (docs/man/)
#   lib/systemd/system/gossipnode.service, lib/sysusers.d/gossipnode.conf,
#   share/bash-completion/completions/, /etc/gossipnode/gossipnode.conf
#               (tools/dist/)
#   share/doc/gossipnode/  the user-facing docs
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

if(GN_EMULATED) # the names are wrappers (cmake/Emulator.cmake)
  foreach(t gossipnode gossipctl gossip-keygen)
    install(PROGRAMS $<TARGET_FILE:${t}>.${CMAKE_SYSTEM_PROCESSOR}
            DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME ${t})
  endforeach()
else()
  install(TARGETS gossipnode gossipctl gossip-keygen
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/gossip-plot
        DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/docs/man/gossipnode.1
              ${PROJECT_SOURCE_DIR}/docs/man/gossipctl.1
              ${PROJECT_SOURCE_DIR}/docs/man/gossip-keygen.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/docs/man/gossipnode-peers.5
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)
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
libmsgpackc2 (>= 4.0), zlib1g, ${GN_DEB_BLIS}")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "dataset-fashion-mnist, systemd")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3, gnuplot-nox")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${GN_DIST}/debian/postinst ${GN_DIST}/debian/prerm
    ${GN_DIST}/debian/postrm ${GN_DIST}/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
include(CPack)
