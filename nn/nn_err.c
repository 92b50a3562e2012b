/* nn_err.c - names for the engine's error codes. */
#include "nn/nn_err.h"

const char *nn_strerror(int err)
{
        switch (err) {
        case NN_OK:
                return "success";
        case NN_EINVAL:
                return "invalid argument";
        case NN_ENOMEM:
                return "out of memory";
        case NN_EIO:
                return "input/output error";
        case NN_EFORMAT:
                return "bad file format";
        case NN_ECHECKSUM:
                return "checksum mismatch";
        case NN_EMISMATCH:
                return "does not match the model";
        }
        return "unknown error";
}
