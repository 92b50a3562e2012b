/* version.h - the build's version string, shared by the daemon and tools. */
#ifndef NODE_VERSION_H
#define NODE_VERSION_H

const char *node_version(void);

#endif
