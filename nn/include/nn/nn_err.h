/*
 * nn_err.h - error codes of the learning engine.
 *
 * Every nn_* call that can fail returns 0 or one of these negative codes.
 * Calls that touch files also take a caller buffer (char *err, size_t errlen)
 * that receives one line naming the file and what is wrong with it.
 */
#ifndef NN_ERR_H
#define NN_ERR_H

#include <stddef.h>

enum nn_err {
        NN_OK = 0,
        NN_EINVAL = -1,    /* bad argument or model spec */
        NN_ENOMEM = -2,    /* allocation failed */
        NN_EIO = -3,       /* open/read/write/fsync/rename failed */
        NN_EFORMAT = -4,   /* wrong magic, truncated, inconsistent sizes */
        NN_ECHECKSUM = -5, /* checksum mismatch */
        NN_EMISMATCH = -6, /* checkpoint does not fit this model */
};

const char *nn_strerror(int err);

#endif
