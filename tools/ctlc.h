/*
 * ctlc.h - the client side of the control protocol (docs/control.md), and
 * msgpack helpers for gossipctl: one blocking request/response exchange,
 * typed look-ups in a decoded map, and a generic msgpack -> JSON writer.
 *
 * tools/ depends on the control protocol only, never on the daemon's
 * internals, so this is a second, independent implementation of the client
 * half of docs/control.md; the tests run it against a fake server.
 *
 * Invariants: a response is read only after its 4-byte length has been
 * checked against CTLC_RESP_MAX; a response that is not exactly one msgpack
 * map with a boolean "ok" is refused as malformed. The JSON writer emits
 * valid JSON for any msgpack input: strings are escaped per RFC 8259 and
 * invalid UTF-8 becomes U+FFFD, non-finite floats become null, bin becomes
 * a base64 string, ext becomes {"ext":type,"data":base64}, and map keys
 * that are not strings are written as the JSON text of the key.
 * Errors: 0 or a negative errno; messages go into a caller's buffer.
 */
#ifndef TOOLS_CTLC_H
#define TOOLS_CTLC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <msgpack.h>

enum {
        CTLC_REQ_MAX = 64 << 10,  /* docs/control.md: request bound */
        CTLC_RESP_MAX = 16 << 20, /* docs/control.md: response bound */
        CTLC_TIMEOUT_MS = 10000,  /* default: a live daemon answers in ms */
};

/* One decoded response. data points into the zone owned by this struct. */
struct ctlc_resp {
        int ok;                     /* the "ok" flag */
        const msgpack_object *data; /* "data" (ok) or NULL */
        char error[256];            /* "error" (!ok), NUL-terminated */
        msgpack_unpacked unp;
        char *buf; /* the raw frame (bin/str objects point into it) */
};

/* Connect to the Unix socket at path with send/receive timeouts of
 * timeout_ms. A file descriptor, or a negative errno (-ENOENT: no socket,
 * -ECONNREFUSED: no daemon listening, -ENAMETOOLONG, ...). */
int ctlc_connect(const char *path, int timeout_ms);

/* Send {"cmd": cmd, "args": {key: value, ...}} (nargs string pairs; keys
 * and values may be NULL when nargs is 0) and read the response into r,
 * which the caller releases with ctlc_resp_free(). 0 means a well-formed
 * response arrived (r->ok says whether the command succeeded); negative
 * errno on transport failure or -EBADMSG for a malformed response, with
 * a message in err. */
int ctlc_call(int fd, const char *cmd, const char *const *keys,
              const char *const *values, size_t nargs, struct ctlc_resp *r,
              char *err, size_t errlen);

/* Release what ctlc_call stored in r (safe on a zeroed struct). */
void ctlc_resp_free(struct ctlc_resp *r);

/* The value under string key in map o, or NULL (also when o is not a map). */
const msgpack_object *ctlc_get(const msgpack_object *o, const char *key);

/* Copy a str value into buf (truncating, always NUL-terminated); buf gets
 * "-" when o is NULL, nil or not a string. Returns buf. */
const char *ctlc_str(const msgpack_object *o, char *buf, size_t len);

/* Number as double: 0 and *ok = 0 when o is NULL, nil or not a number. */
double ctlc_num(const msgpack_object *o, int *ok);

/* Write o as compact JSON to f. 0, or -EIO if writing failed. */
int ctlc_json_write(FILE *f, const msgpack_object *o);

/* Format a byte count for humans ("512B", "1.5K", "20.3M", "1.1G"). */
const char *ctlc_human_bytes(double v, char *buf, size_t len);

/* Format a duration in milliseconds for humans ("0.8ms", "1.2s", "4m",
 * "3h"); "-" when ok is 0. */
const char *ctlc_human_ms(double ms, int ok, char *buf, size_t len);

#endif
