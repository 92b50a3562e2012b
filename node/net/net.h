/*
 * net.h - the daemon's transport: UDP datagrams and framed TCP streams on
 * one libuv loop.
 *
 * A struct node_net binds one address: a UDP socket for datagrams and a TCP
 * listener on the same port number. node_net_send() has exactly the shape
 * and meaning of struct gossip_env.send (the buffer is borrowed and copied),
 * so node_net_env() can wire the protocol core straight to it.
 *
 * Datagrams go out with uv_udp_try_send (uv_udp_send with a copy when the
 * socket would block). Stream frames go out on one pooled outgoing TCP
 * connection per destination address, connected on demand; frames sent
 * while it connects are queued. On the wire a stream frame is a 4-byte
 * big-endian length followed by that many bytes.
 *
 * Incoming datagrams and reassembled stream frames are handed to on_frame,
 * a stream frame with how it arrived (struct node_net_rx: the receiver's
 * view of the sender's link, for gossip/link.h).
 * A stream frame's length is checked against stream_max before any byte of
 * its body is buffered; an oversize length closes the connection
 * and is counted. The body buffer grows with the bytes that actually arrive,
 * so a peer that announces a big frame and stalls holds little memory, and
 * all partial frames together stay under rx_max (else the connection that
 * would exceed it is closed and counted).
 * A length below stream_min (the smallest wire frame, 60 bytes, protocol.md
 * section 6) closes the connection too, counted as undersize.
 *
 * Inbound connections cannot starve the node (the listener is open to
 * anyone who can reach the port; only frames are authenticated):
 *  - the first frame on an inbound connection is handed to cfg.verify
 *    (when set) before on_frame; anything but 0 closes the connection
 *    (auth_failures) and the frame is not delivered. Later frames are not
 *    checked here: the user verifies every frame anyway. The first frame
 *    must complete within hello_timeout_ms plus its length at
 *    NODE_NET_RX_MIN_RATE, counted from the accept (hello_timeouts);
 *  - at most pending_per_addr connections from one source address
 *    (IP, any port) may wait for their first frame; more are refused at
 *    accept (addr_rejects). Authenticated ones do not count: several
 *    nodes on one host all connect from the same address;
 *  - when NODE_NET_INBOUND_MAX connections are open, a new one evicts the
 *    oldest connection still waiting for its first frame (evictions), so
 *    unauthenticated connections can never keep a real peer out; only
 *    when every one is authenticated is the new one refused
 *    (accept_rejects);
 *  - a frame that has begun and sees no byte for stall_timeout_ms, or
 *    takes longer than stall_timeout_ms plus its length at
 *    NODE_NET_RX_MIN_RATE, is cut off (rx_stalls); an inbound connection
 *    with no frame for idle_timeout_ms is closed (idle_timeouts). Our own
 *    outgoing connections close after idle_timeout_ms / 2 without a frame
 *    (idle_closes), before the peer's timeout can race a write.
 *
 * For a TCP frame, `from` is the remote end of the connection, i.e. the
 * sender's ephemeral port, not its listen port: the protocol core identifies
 * senders by their signed key, never by the address, so that is fine.
 *
 * Backpressure: each destination has a bounded queue (queue_max bytes,
 * counting every accepted frame until its write completes, including what
 * sits in libuv's write queue). When a frame does not fit, it is dropped
 * and counted, and send returns -ENOBUFS: gradients are replaceable, memory
 * is not. A frame larger than queue_max is still accepted when the queue is
 * empty, so a big model transfer can always go through alone.
 *
 * Failures: a failed connect (refused, unreachable, or no answer within
 * connect_timeout_ms) drops the frames queued for it (counted) and puts the
 * destination in backoff: backoff_min_ms doubling per consecutive failure
 * up to backoff_max_ms, with random jitter in [50%, 100%] of that (from
 * cfg.seed). During backoff send drops the frame and returns the last
 * error; the next send after backoff reconnects. A connection that the
 * peer closes is dropped and the next send reconnects at once (an
 * established connection resets the failure count). A connection whose
 * writes make no progress for stall_timeout_ms - frames stuck in our queue,
 * or bytes the kernel sent that are never acknowledged (TCP_USER_TIMEOUT) -
 * counts as a stall: it is closed, its frames are dropped, and the
 * destination backs off as after a failed connect.
 *
 * Link estimate: every completed write of a stream frame feeds the
 * destination's struct gossip_link (gossip/link.h) with the bytes still
 * queued behind it, and the connection's TCP_INFO (RTT; the delivery rate
 * as a raise-only sample when the queue ran empty, until the peer reports
 * a rate: node_net_peer_rate_sample). Outgoing connections
 * set TCP_NOTSENT_LOWAT (notsent_lowat) so the kernel's unsent queue
 * stays short and a completion means the bytes are close to leaving.
 *
 * SIGPIPE: libuv writes with write(2), so a peer that hangs up while we
 * write raises SIGPIPE. The program must ignore it (signal(SIGPIPE,
 * SIG_IGN) in main, before the loop runs); the write then fails with EPIPE
 * and is handled here like any other error.
 * Threading: every call here must run on the loop's thread.
 * Errors: 0 or a negative errno (libuv's UV_E* values are negative errnos
 * on Unix, so uv_strerror() and strerror(-err) both name them).
 */
#ifndef NODE_NET_H
#define NODE_NET_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "gossip/gossip_types.h"
#include "gossip/link.h"

/* Tunables. A zero field in struct node_net_config takes these. */
enum {
        /* Largest UDP payload over IPv4; membership datagrams are ~1 KiB. */
        NODE_NET_DGRAM_MAX = 65507,
        /* A stream frame carries at most a full model + optimizer state:
         * 64 MiB covers a 784-512-10 MLP with Adam many times over while
         * bounding what one hostile length prefix can make us buffer. */
        NODE_NET_STREAM_MAX = 64 << 20,
        /* Per-destination send queue: a few gradients of a small model.
         * Beyond this a slow peer gets its frames dropped, not buffered. */
        NODE_NET_QUEUE_MAX = 8 << 20,
        /* Reconnect backoff: the first retry after 100 ms catches a peer
         * that was restarting; 10 s caps the cost of a long-dead one. */
        NODE_NET_BACKOFF_MIN_MS = 100,
        NODE_NET_BACKOFF_MAX_MS = 10000,
        /* A SYN that gets no answer (firewall drop) would otherwise wait
         * for the kernel's ~2 min; probes declare a member suspect sooner. */
        NODE_NET_CONNECT_TIMEOUT_MS = 3000,
        /* Pending writes with no byte written for this long: the path is
         * black-holed; close and reconnect rather than wait on TCP's
         * exponential retransmits. Long enough for a 2 MB frame at 1 Mbit. */
        NODE_NET_STALL_TIMEOUT_MS = 30000,
        /* All partly received stream frames together: two full-size
         * frames. Peers are only authenticated above us (by signature), so
         * this caps what anyone who can connect can make us buffer. */
        NODE_NET_RX_MAX = 2 * NODE_NET_STREAM_MAX,
        /* Inbound TCP connections accepted at once (fd exhaustion guard). */
        NODE_NET_INBOUND_MAX = 256,
        /* The smallest stream frame: a MAC frame with an empty body
         * (GOSSIP_WIRE_MAC_OVERHEAD, protocol.md section 6). */
        NODE_NET_STREAM_MIN = 60,
        /* A real peer connects because it has a frame queued, and sends it
         * at once: 3 s is many round trips even on a congested link, while
         * a silent connection holds a slot for no longer. */
        NODE_NET_HELLO_TIMEOUT_MS = 3000,
        /* Frames in progress must average at least this (bytes/s) on top
         * of the grace period: a 1 Mbit/s link carries ~125 KB/s, so a
         * real peer has 4x headroom; a 5 MB state transfer gets 160 s. A
         * trickle (slowloris) cannot hold a slot for longer. */
        NODE_NET_RX_MIN_RATE = 32 << 10,
        /* Unauthenticated connections per source address: a restarting
         * peer may have a couple in flight; an attacker with one address
         * gets no more than this. */
        NODE_NET_PENDING_PER_ADDR = 4,
        /* A connection that carried no frame for 2 min is closed: nodes
         * exchange every step (well under a second), and reconnecting
         * costs one round trip. */
        NODE_NET_IDLE_TIMEOUT_MS = 120000,
        /* Distinct destinations tracked (the peers file bounds real use). */
        NODE_NET_DEST_MAX = 4096,
        /* TCP_NOTSENT_LOWAT on outgoing connections: the kernel takes at
         * most this many unsent bytes (plus one segment buffer) beyond
         * what is in flight, so frames wait in our queue, where they are
         * counted and can be dropped, and a write completion means the
         * bytes are close to leaving (the link estimator's premise,
         * gossip/link.h). 64 KB: 50 ms at 10 Mbit/s, 0.5 ms at 1 Gbit/s,
         * where a smaller value would wake the loop for every few
         * segments. Measured in docs/benchmarks.md (section 5.4). */
        NODE_NET_NOTSENT_LOWAT = 64 << 10,
};

/* How a stream frame arrived, for the receiver's rate sample
 * (gossip_link_rx_frame): the bytes of it (length prefix included) that
 * came after the read which brought its first ones, and the microseconds
 * (uv_hrtime) from that read to the one that completed it. Both 0 for a
 * datagram and for a frame that arrived in one read.
 *
 * report is the receiver's answer, filled by on_frame (zeroed before): a
 * rate report the frame carried, i.e. how fast its sender received our
 * frames (rate_Bps over span_us), a sample for our link toward `to`. The
 * transport takes it after on_frame returns (node_net_peer_rate_sample),
 * so that delivering a frame never calls back into net.c. */
struct node_net_rx {
        uint64_t bytes_after_first;
        uint64_t span_us;
        struct {
                struct gossip_addr to;
                uint32_t rate_Bps, span_us; /* rate_Bps 0: none */
        } report;
};

/* Called for every complete incoming frame; buf is borrowed for the call,
 * rx too (its report is the callee's to fill). channel is GOSSIP_CH_DGRAM
 * or GOSSIP_CH_STREAM. */
typedef void (*node_net_frame_cb)(void *ctx, const struct gossip_addr *from,
                                  const void *buf, size_t len, int channel,
                                  struct node_net_rx *rx);

/* Called with the first complete frame of each inbound TCP connection,
 * before on_frame; buf is borrowed for the call. Return 0 when the frame
 * is authentic (e.g. its signer is trusted and its signature or MAC
 * verifies; gossip_frame_authenticate() does exactly that and has this
 * shape after a cast of its first argument), anything else to have the
 * connection closed. Must not keep state that a second check of the same
 * frame would trip over (replay windows): on_frame sees the frame next. */
typedef int (*node_net_verify_cb)(void *ctx, const void *buf, size_t len);

struct node_net_config {
        struct gossip_addr listen;   /* family 4 or 6; port 0 = ephemeral */
        size_t dgram_max;            /* bytes; 0 = NODE_NET_DGRAM_MAX */
        size_t stream_max;           /* bytes per frame; 0 = default */
        size_t queue_max;            /* bytes per destination; 0 = default */
        uint32_t backoff_min_ms;     /* 0 = default */
        uint32_t backoff_max_ms;     /* 0 = default */
        uint32_t connect_timeout_ms; /* 0 = default */
        uint32_t stall_timeout_ms;   /* 0 = default */
        size_t rx_max;     /* reassembly bytes, all connections; 0 = default */
        size_t stream_min; /* bytes per frame; 0 = default */
        uint32_t hello_timeout_ms; /* 0 = default */
        uint32_t idle_timeout_ms;  /* 0 = default */
        uint32_t pending_per_addr; /* 0 = default */
        uint32_t inbound_max;      /* 0 = NODE_NET_INBOUND_MAX */
        node_net_verify_cb verify; /* NULL: any first frame will do */
        void *verify_ctx;          /* passed to verify */
        uint64_t seed;             /* jitter of the reconnect backoff */
        /* bytes; 0 = NODE_NET_NOTSENT_LOWAT, UINT32_MAX = the kernel's
         * default (unbounded: only for measuring what the bound does) */
        uint32_t notsent_lowat;
        node_net_frame_cb on_frame;
        void *ctx; /* passed to on_frame */
};

/* Node-wide counters (monotonic since node_net_open). */
struct node_net_stats {
        uint64_t dgram_in, dgram_bytes_in;   /* delivered datagrams */
        uint64_t dgram_out, dgram_bytes_out; /* handed to the kernel */
        uint64_t dgram_send_fail;            /* send errors */
        uint64_t dgram_oversize;        /* over dgram_max, truncated or empty */
        uint64_t frames_in, bytes_in;   /* delivered stream frames */
        uint64_t frames_out, bytes_out; /* stream frames fully written */
        uint64_t frames_dropped; /* queue full, backoff, failed connect */
        uint64_t bytes_dropped;
        uint64_t oversize;         /* length prefix 0 or over stream_max */
        uint64_t rx_over_budget;   /* closed: reassembly over rx_max */
        uint64_t connects;         /* outgoing connections established */
        uint64_t connect_failures; /* refused, unreachable, timed out */
        uint64_t disconnects;      /* established outgoing ones lost */
        uint64_t stalls;  /* closed for no write progress (ours or TCP's) */
        uint64_t accepts; /* inbound connections accepted */
        uint64_t accept_rejects;  /* full of authenticated connections */
        uint64_t inbound_errors;  /* inbound read errors / resets */
        uint64_t undersize;       /* length prefix below stream_min */
        uint64_t auth_failures;   /* first frame refused by verify */
        uint64_t hello_timeouts;  /* no first frame in time */
        uint64_t addr_rejects;    /* over pending_per_addr at accept */
        uint64_t evictions;       /* unauthenticated, made room when full */
        uint64_t rx_stalls;       /* frame cut off: no byte or too slow */
        uint64_t idle_timeouts;   /* inbound closed for no frame */
        uint64_t idle_closes;     /* our outbound closed for no frame */
        uint64_t inbound_open;    /* inbound connections open now */
        uint64_t inbound_pending; /* of those, not yet authenticated */
};

/* One outgoing destination (stream channel). */
struct node_net_peer_stats {
        struct gossip_addr addr;
        uint64_t frames_out, bytes_out; /* fully written */
        uint64_t frames_dropped, bytes_dropped;
        uint64_t connects, connect_failures;
        uint64_t queued_bytes; /* accepted, not yet written */
        int connected;         /* 1 if a connection is up now */
        int last_error;        /* last connect/write error, 0 if none */
        /* the link estimate (node_net_peer_link has all of it) */
        double goodput_Bps;         /* smoothed goodput; 0: not measured */
        uint32_t link_rtt_us;       /* the kernel's smoothed RTT, smoothed */
        uint64_t link_samples;      /* backlogged goodput samples taken */
        uint64_t link_peer_samples; /* of them, reported by the peer */
};

struct node_net;

/* Bind UDP and TCP on cfg->listen (same port; with port 0 the UDP socket
 * gets an ephemeral port and TCP binds the same number) and start reading.
 * On success *out is set; on error nothing is left open and e.g.
 * -EADDRINUSE says the port is taken. */
int node_net_open(struct node_net **out, uv_loop_t *loop,
                  const struct node_net_config *cfg);

/* Close every handle and drop every queued frame; the struct frees itself
 * once libuv has closed them, so the caller then runs the loop until it
 * ends. No on_frame call happens after this returns. NULL is fine. */
void node_net_close(struct node_net *net);

/* The bound address (with the real port when 0 was asked). 0 or -errno. */
int node_net_local_addr(const struct node_net *net, struct gossip_addr *out);

/* Send one frame of len bytes to `to` on channel (GOSSIP_CH_DGRAM or
 * GOSSIP_CH_STREAM). buf is copied. 0 when handed to the kernel or queued;
 * -EMSGSIZE over the channel's bound (or under stream_min on the stream),
 * -ENOBUFS when the destination's queue
 * is full (frame dropped, counted), the last connect error while in
 * backoff (dropped, counted), -EINVAL on a bad address or channel. */
int node_net_send(struct node_net *net, const struct gossip_addr *to,
                  const void *buf, size_t len, int channel);

/* The loop's cached monotonic time in milliseconds (uv_now). */
uint64_t node_net_now_ms(const struct node_net *net);

/* Fill env->send, env->now_ms and env->ctx so that the protocol core talks
 * through this transport; env->seed is left alone. */
void node_net_env(struct node_net *net, struct gossip_env *env);

/* Copy the node-wide counters into *out. */
void node_net_stats(const struct node_net *net, struct node_net_stats *out);

/* Copy up to max per-destination records into out; returns how many
 * destinations there are (may exceed max). */
size_t node_net_peer_stats(const struct node_net *net,
                           struct node_net_peer_stats *out, size_t max);

/* Stream bytes accepted by node_net_send and not yet written, over every
 * destination (the sum of their queued_bytes). */
uint64_t node_net_queued_bytes(const struct node_net *net);

/* The link estimate of destination a (gossip/link.h: goodput from our
 * write completions while its queue is backlogged and from the rates the
 * peer reports, raised by the kernel's app-limited delivery rate until
 * the peer reports one, RTT from TCP_INFO). out->updated_us is on the
 * uv_hrtime() clock in microseconds (not uv_now's milliseconds).
 * 0, or -ENOENT when we never sent a stream frame to a. */
int node_net_peer_link(const struct node_net *net, const struct gossip_addr *a,
                       struct gossip_link_estimate *out);

/* Destination a's peer told us it received our frames at rate_Bps over
 * span_us (PARAMS keys 17-18): a sample for its link estimate
 * (gossip_link_peer_sample). 0, or -ENOENT when we never sent a stream
 * frame to a. */
int node_net_peer_rate_sample(struct node_net *net, const struct gossip_addr *a,
                              uint32_t rate_Bps, uint32_t span_us);

/* 1 if a and b name the same family, address and port (bytes beyond an
 * IPv4 address and struct padding are ignored), else 0. */
int node_net_addr_equal(const struct gossip_addr *a,
                        const struct gossip_addr *b);

/* Convert between struct gossip_addr and a sockaddr (sockaddr_in or
 * sockaddr_in6). 0, or -EINVAL on an unknown family. */
int node_net_addr_to_sockaddr(const struct gossip_addr *a,
                              struct sockaddr_storage *ss);
int node_net_addr_from_sockaddr(const struct sockaddr *sa,
                                struct gossip_addr *a);

#endif
