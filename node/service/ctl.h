/*
 * ctl.h - the control socket: a Unix domain stream socket that gossipctl
 * talks to. The protocol is specified exactly in docs/control.md.
 *
 * Framing: every request and every response is a 4-byte big-endian length
 * followed by that many bytes of one msgpack map with string keys.
 *   request:  {"cmd": "<name>", "args": {...}}        ("args" optional)
 *   response: {"ok": true, "data": <any>}
 *          or {"ok": false, "error": "<one-line message>"}
 * A client may send several requests on one connection; responses come in
 * order, one per request. Requests are at most NODE_CTL_REQ_MAX bytes.
 *
 * The server checks framing and the envelope (cmd is a string, args a map),
 * answers the built-in command "version" itself, and hands everything else
 * to the daemon's handler, which writes the "data" value with a msgpack
 * packer. A malformed body gets an error response and the connection stays
 * usable; a length prefix over the bound gets an error response and the
 * connection is closed (the stream cannot be resynchronised).
 *
 * The socket file is created mode 0600 (chmod after bind, before listen,
 * so no one can connect in between). If the path already exists: a socket
 * with a live listener refuses the start (-EADDRINUSE); a stale socket
 * (connection refused) is removed; anything that is not a socket is left
 * alone (-EEXIST). node_ctl_close() unlinks the file.
 *
 * SIGPIPE: libuv writes with write(2), so a peer that hangs up while we
 * write raises SIGPIPE. The program must ignore it (signal(SIGPIPE,
 * SIG_IGN) in main, before the loop runs); the write then fails with EPIPE
 * and is handled here like any other error.
 * Threading: server calls on the loop thread; the client helpers at the end
 * are plain blocking POSIX calls for tools and tests.
 * Errors: 0 or a negative errno.
 */
#ifndef NODE_CTL_H
#define NODE_CTL_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>
#include <uv.h>

enum {
        NODE_CTL_REQ_MAX = 64 << 10,  /* bytes: commands are tiny */
        NODE_CTL_RESP_MAX = 16 << 20, /* bytes: members of a big cluster */
        NODE_CTL_CLIENTS_MAX = 32,    /* concurrent connections */
        NODE_CTL_CMD_MAX = 32,        /* bytes of a command name */
        NODE_CTL_ERR_MAX = 256,       /* bytes of an error message */
        NODE_CTL_PROTOCOL = 1,        /* reported by "version" */
};

/*
 * The daemon's command handler, called on the loop thread for every
 * well-formed request except "version". cmd is NUL-terminated; args is
 * always a map (empty if the request had none) and is valid only during
 * the call. On success return 0 having packed exactly one msgpack object
 * (the "data" value) into data; on failure return a negative errno and
 * write a one-line message into err (errlen bytes, NUL-terminated);
 * whatever was packed is then discarded. An unknown command should return
 * -ENOTSUP with a message naming it.
 */
typedef int (*node_ctl_handler)(void *ctx, const char *cmd,
                                const msgpack_object *args,
                                msgpack_packer *data, char *err, size_t errlen);

struct node_ctl_config {
        const char *path; /* socket path (< 108 bytes) */
        node_ctl_handler handler;
        void *ctx; /* passed to handler */
};

struct node_ctl_stats {
        uint64_t clients;         /* connections accepted */
        uint64_t clients_refused; /* over NODE_CTL_CLIENTS_MAX */
        uint64_t requests;        /* well-formed requests answered */
        uint64_t errors;          /* error responses sent */
        uint64_t bad_requests;    /* malformed or oversize */
};

struct node_ctl;

/* Create the socket at cfg->path (0600) and start listening. -EADDRINUSE
 * if a live daemon answers there, -EEXIST if a non-socket file is in the
 * way, -ENAMETOOLONG for a long path. On error nothing is left open. */
int node_ctl_open(struct node_ctl **out, uv_loop_t *loop,
                  const struct node_ctl_config *cfg);

/* Stop listening, close every client, unlink the socket file; the struct
 * frees itself once libuv has closed the handles. NULL is fine. */
void node_ctl_close(struct node_ctl *ctl);

/* Copy the counters into *out. */
void node_ctl_stats(const struct node_ctl *ctl, struct node_ctl_stats *out);

/* ---- blocking client helpers (gossipctl, tests) ---- */

/* Connect to the socket at path. A file descriptor, or a negative errno. */
int node_ctl_client_connect(const char *path);

/* Send one framed request (len bytes of msgpack) on fd. 0 or -errno
 * (-EPIPE if the daemon hung up; no SIGPIPE is raised). */
int node_ctl_client_send(int fd, const void *req, size_t len);

/* Read one framed response from fd into a new malloc'd buffer (*resp,
 * *resp_len; the caller frees it). -EMSGSIZE if it announces more than
 * NODE_CTL_RESP_MAX, -ECONNRESET on EOF, else 0 or -errno. */
int node_ctl_client_recv(int fd, void **resp, size_t *resp_len);

/* ---- packing replies ---- */

/* One msgpack str of the NUL-terminated s. */
void node_ctl_pack_str(msgpack_packer *pk, const char *s);

/* One map entry with string key k (the caller packed the map header):
 * a string, an unsigned integer, a double (nil when v is not finite, so a
 * reply never carries NaN or Inf: docs/control.md), a boolean. */
void node_ctl_pack_kstr(msgpack_packer *pk, const char *k, const char *v);
void node_ctl_pack_ku64(msgpack_packer *pk, const char *k, uint64_t v);
void node_ctl_pack_kdbl(msgpack_packer *pk, const char *k, double v);
void node_ctl_pack_kbool(msgpack_packer *pk, const char *k, int v);

/* Pack {"cmd": cmd, "args": {}} into sbuf (a convenience for simple
 * commands). 0 or -ENOMEM. */
int node_ctl_pack_request(msgpack_sbuffer *sbuf, const char *cmd);

#endif
