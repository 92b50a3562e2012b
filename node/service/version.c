/* version.c - the build's version string (from CMake's project version). */
#include "service/version.h"

#ifndef GN_VERSION
#define GN_VERSION "unknown"
#endif

const char *node_version(void)
{
        return GN_VERSION;
}
