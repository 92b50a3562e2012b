# cmake -DOUT=path -DSUFFIX=aarch64 -DEMU=qemu-aarch64 -P EmulatorWrapper.cmake
# If OUT is an ELF file (just linked), move it to OUT.SUFFIX and write OUT
# as a shell script that runs it under EMU. Otherwise OUT is already the
# wrapper: nothing to do.
file(READ ${OUT} magic LIMIT 4 HEX)
if(NOT magic STREQUAL "7f454c46")
  return()
endif()
get_filename_component(name ${OUT} NAME)
file(RENAME ${OUT} ${OUT}.${SUFFIX})
file(WRITE ${OUT} "#!/bin/sh\n# emulated build: the real binary is ${name}.${SUFFIX}\n"
     "exec ${EMU} \"$(dirname \"$0\")/${name}.${SUFFIX}\" \"$@\"\n")
file(CHMOD ${OUT} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
     GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
