/*
 * net.c - UDP datagrams and framed, pooled TCP streams on one libuv loop
 * (contract and tunables in net.h).
 *
 * Objects: struct node_net owns a UDP handle, a TCP listener, a periodic
 * housekeeping timer, a list of connections (struct conn, inbound and
 * outbound alike) and an array of destinations (struct dest, one per
 * address we have sent stream frames to). A dest points at its current
 * outbound conn, if any; a conn being closed is detached from its dest
 * first (conn->dest = NULL), so a late libuv callback on it never touches
 * the dest's new connection.
 *
 * Invariants:
 *  - dest->queued is the byte count of the dest's frames that are
 *    accepted and not yet completed (waiting for the connection, or inside
 *    libuv's write queue); every frame is counted exactly once as written
 *    or dropped.
 *  - frames never outlive the net: pending ones are freed when dropped,
 *    written ones in their write callback (UV_ECANCELED on close).
 *  - the net frees itself when its last handle's close callback has run
 *    after node_net_close(); dests are freed then, after every frame
 *    that points at them.
 *
 * Over 800 lines on purpose: a connection's life (connect, backoff,
 * reassembly, the first-frame deadline, per-address caps, eviction,
 * stall and idle cuts) is one state machine over struct conn and struct
 * dest, and its invariants above hold only if every transition is read
 * in one place; the policy numbers are in net.h.
 */
#include "net/net.h"
#include "base/gn_bigbuf.h"
#include "base/gn_endian.h"
#include "base/gn_rng.h"
#include "net/tcpinfo.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

enum {
        NET_RBUF = 64 << 10,     /* bytes per read from a TCP socket */
        NET_UBUF = 64 << 10,     /* bytes per UDP receive: any datagram fits */
        NET_TICK_MS = 100,       /* housekeeping: connect timeouts, stalls */
        NET_KEEP_BODY = 1 << 20, /* reuse a reassembly buffer up to this */
        NET_BIND_TRIES = 16,     /* ephemeral port: UDP free but TCP taken */
};

enum dest_state { D_IDLE, D_CONNECTING, D_UP, D_BACKOFF };

struct frame {
        uv_write_t req;
        struct dest *dest;
        struct frame *next; /* while waiting for the connection */
        size_t size;        /* 4 + payload */
        uint8_t bytes[];    /* length prefix, then payload */
};

struct udp_send {
        uv_udp_send_t req;
        struct node_net *net;
        size_t len;
        uint8_t data[];
};

struct conn {
        uv_tcp_t tcp;
        struct node_net *net;
        struct dest *dest; /* outbound and attached, else NULL */
        uv_connect_t creq;
        struct gossip_addr peer;
        int closing;
        int inbound;            /* accepted by our listener */
        int authed;             /* inbound: first frame passed cfg.verify */
        struct gossip_addr src; /* inbound: remote address, port 0 */
        uint64_t opened_ms;     /* accepted */
        uint64_t last_rx_ms;    /* last byte received */
        uint64_t frame_ms;      /* first header byte of the current frame */
        uint64_t last_frame_ms; /* last complete frame */
        uint64_t rx_first_us;   /* the read with the current frame's first
                                   bytes (uv_hrtime, microseconds) */
        uint64_t rx_after;      /* its bytes that came in later reads */
        struct conn *prev, *next;
        /* reassembly of the incoming stream */
        uint8_t hdr[4];
        size_t hdr_have;
        size_t want;
        uint8_t *body;
        size_t body_have, body_cap;
};

struct dest {
        struct node_net *net;
        enum dest_state state;
        struct conn *conn;
        struct frame *pend_head, *pend_tail;
        size_t queued;
        uint32_t fails;
        uint64_t retry_at;       /* uv_now when backoff ends */
        uint64_t since;          /* connect start / last write progress */
        uint64_t idle_since;     /* connected / last frame written */
        size_t last_wq;          /* write queue size at the last tick */
        struct gossip_link link; /* the link estimate (gossip/link.h) */
        uint64_t kern_us;        /* last TCP_INFO read, microseconds */
        struct node_net_peer_stats st;
};

struct node_net {
        uv_loop_t *loop;
        struct node_net_config cfg;
        uv_udp_t udp;
        uv_tcp_t listener;
        uv_timer_t timer;
        struct gossip_addr local;
        int closing;
        int timer_open;
        int handles; /* open libuv handles we own (closing ones included) */
        int inbound, pending; /* inbound conns; not yet authenticated */
        size_t rx_buffered;   /* sum of every conn's body_cap */
        struct conn *conns;
        struct dest **dests;
        size_t ndests, cap_dests;
        uint64_t rng;
        struct node_net_stats st;
        uint8_t rbuf[NET_RBUF];
        uint8_t ubuf[NET_UBUF];
};

/* ---- small helpers ---- */

static uint64_t net_rand(struct node_net *net)
{
        return gn_splitmix64(&net->rng); /* all randomness from the seed */
}

int node_net_addr_equal(const struct gossip_addr *a,
                        const struct gossip_addr *b)
{
        size_t n = a->family == 4 ? 4 : 16;
        return a->family == b->family && a->port == b->port &&
               memcmp(a->addr, b->addr, n) == 0;
}

int node_net_addr_to_sockaddr(const struct gossip_addr *a,
                              struct sockaddr_storage *ss)
{
        memset(ss, 0, sizeof(*ss));
        if (a->family == 4) {
                struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
                s4->sin_family = AF_INET;
                s4->sin_port = htons(a->port);
                memcpy(&s4->sin_addr, a->addr, 4);
                return 0;
        }
        if (a->family == 6) {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons(a->port);
                memcpy(&s6->sin6_addr, a->addr, 16);
                return 0;
        }
        return -EINVAL;
}

int node_net_addr_from_sockaddr(const struct sockaddr *sa,
                                struct gossip_addr *a)
{
        memset(a, 0, sizeof(*a));
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
                a->family = 4;
                a->port = ntohs(s4->sin_port);
                memcpy(a->addr, &s4->sin_addr, 4);
                return 0;
        }
        if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
                a->family = 6;
                a->port = ntohs(s6->sin6_port);
                memcpy(a->addr, &s6->sin6_addr, 16);
                return 0;
        }
        return -EINVAL;
}

static void net_maybe_free(struct node_net *net)
{
        if (!net->closing || net->handles > 0)
                return;
        for (size_t i = 0; i < net->ndests; i++)
                free(net->dests[i]);
        free(net->dests);
        free(net);
}

static void net_handle_closed(uv_handle_t *h)
{
        struct node_net *net = h->data;
        net->handles--;
        net_maybe_free(net);
}

/* ---- connections ---- */

static void conn_free_body(struct conn *c)
{
        c->net->rx_buffered -= c->body_cap;
        free(c->body);
        c->body = NULL;
        c->body_cap = 0;
}

static void conn_closed(uv_handle_t *h)
{
        struct conn *c = h->data;
        struct node_net *net = c->net;
        if (c->prev)
                c->prev->next = c->next;
        else
                net->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        conn_free_body(c);
        free(c);
        net->handles--;
        net_maybe_free(net);
}

/* Detach c from its dest (if any) and start closing it. Idempotent. */
static void conn_close(struct conn *c)
{
        if (c->closing)
                return;
        c->closing = 1;
        if (c->dest) {
                c->dest->conn = NULL;
                c->dest->st.connected = 0;
                c->dest = NULL;
        }
        if (c->inbound) {
                c->net->inbound--;
                if (!c->authed)
                        c->net->pending--;
        }
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static struct conn *conn_new(struct node_net *net)
{
        struct conn *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        if (uv_tcp_init(net->loop, &c->tcp) != 0) {
                free(c);
                return NULL;
        }
        c->net = net;
        c->tcp.data = c;
        c->next = net->conns;
        if (net->conns)
                net->conns->prev = c;
        net->conns = c;
        net->handles++;
        return c;
}

static void conn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
        struct conn *c = h->data;
        /* One shared buffer: libuv reads one stream at a time and read_cb
         * consumes it before the next alloc. */
        *buf = uv_buf_init((char *)c->net->rbuf, NET_RBUF);
}

/* The rate report on_frame found in a frame, if any: a sample for our
 * link toward its sender (node_net_peer_rate_sample). */
static void take_report(struct node_net *net, const struct node_net_rx *rx)
{
        if (rx->report.rate_Bps && rx->report.span_us)
                node_net_peer_rate_sample(net, &rx->report.to,
                                          rx->report.rate_Bps,
                                          rx->report.span_us);
}

/* Hand a complete frame up, with how it arrived; the first one of an
 * inbound connection must pass cfg.verify. 0, or -EACCES when the
 * connection must be closed. */
static int conn_deliver(struct conn *c, const uint8_t *p, size_t len,
                        struct node_net_rx *rx)
{
        struct node_net *net = c->net;
        c->last_frame_ms = uv_now(net->loop);
        if (c->inbound && !c->authed) {
                if (net->cfg.verify &&
                    net->cfg.verify(net->cfg.verify_ctx, p, len) != 0) {
                        net->st.auth_failures++;
                        return -EACCES;
                }
                c->authed = 1;
                net->pending--;
        }
        net->st.frames_in++;
        net->st.bytes_in += len;
        if (net->cfg.on_frame) {
                net->cfg.on_frame(net->cfg.ctx, &c->peer, p, len,
                                  GOSSIP_CH_STREAM, rx);
                take_report(net, rx);
        }
        return 0;
}

/* Make room for n more body bytes, growing with what arrives (never past
 * the announced length). 0 or -ENOMEM. */
static int conn_grow(struct conn *c, size_t n)
{
        size_t need = c->body_have + n, cap = c->body_cap;
        if (need <= cap)
                return 0;
        if (cap < 4096)
                cap = 4096;
        while (cap < need)
                cap *= 2;
        if (cap > c->want)
                cap = c->want;
        if (c->net->rx_buffered - c->body_cap + cap > c->net->cfg.rx_max) {
                c->net->st.rx_over_budget++;
                return -ENOBUFS;
        }
        uint8_t *p = realloc(c->body, cap);
        if (!p)
                return -ENOMEM;
        c->net->rx_buffered += cap - c->body_cap;
        c->body = p;
        c->body_cap = cap;
        return 0;
}

/* How the frame just completed by the read at now_us arrived; fresh:
 * its first bytes came in that same read (then it is no sample). */
static struct node_net_rx conn_rx(const struct conn *c, int fresh,
                                  uint64_t now_us)
{
        struct node_net_rx rx = {0};
        if (!fresh && now_us > c->rx_first_us) {
                rx.bytes_after_first = c->rx_after;
                rx.span_us = now_us - c->rx_first_us;
        }
        return rx;
}

/* Feed n stream bytes of one read, made at now_us, into the reassembler;
 * delivers complete frames. 0, or negative when the connection must be
 * closed. */
static int conn_feed(struct conn *c, const uint8_t *p, size_t n,
                     uint64_t now_us)
{
        struct node_net *net = c->net;
        struct node_net_rx rx;
        int err, fresh = 0; /* the current frame began in this read */
        c->last_rx_ms = uv_now(net->loop);
        while (n > 0 && !c->closing && !net->closing) {
                if (c->hdr_have == 0) {
                        c->frame_ms = c->last_rx_ms;
                        c->rx_first_us = now_us;
                        c->rx_after = 0;
                        fresh = 1;
                }
                if (c->hdr_have < 4) {
                        size_t k = 4 - c->hdr_have;
                        k = k < n ? k : n;
                        c->rx_after += fresh ? 0 : k;
                        memcpy(c->hdr + c->hdr_have, p, k);
                        c->hdr_have += k;
                        p += k;
                        n -= k;
                        if (c->hdr_have < 4)
                                break;
                        c->want = gn_be32_get(c->hdr);
                        c->body_have = 0;
                        if (c->want > net->cfg.stream_max) {
                                net->st.oversize++;
                                return -EMSGSIZE;
                        }
                        if (c->want < net->cfg.stream_min) {
                                net->st.undersize++;
                                return -EMSGSIZE;
                        }
                        continue;
                }
                size_t k = c->want - c->body_have;
                k = k < n ? k : n;
                c->rx_after += fresh ? 0 : k;
                rx = conn_rx(c, fresh, now_us);
                if (c->body_have == 0 && k == c->want) {
                        c->hdr_have = 0; /* whole frame in hand: no copy */
                        if ((err = conn_deliver(c, p, k, &rx)) != 0)
                                return err;
                } else {
                        if (conn_grow(c, k) != 0)
                                return -ENOMEM;
                        memcpy(c->body + c->body_have, p, k);
                        c->body_have += k;
                        if (c->body_have == c->want) {
                                c->hdr_have = 0;
                                err = conn_deliver(c, c->body, c->want, &rx);
                                if (c->body_cap > NET_KEEP_BODY || err)
                                        conn_free_body(c);
                                if (err)
                                        return err;
                        }
                }
                p += k;
                n -= k;
        }
        return 0;
}

static void dest_lost(struct dest *d, int err);
static void dest_fail(struct dest *d, int err);

static void conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
        struct conn *c = s->data;
        struct node_net *net = c->net;
        if (nread == 0 || c->closing)
                return;
        if (nread < 0) {
                if (c->dest && nread == UV_ETIMEDOUT) {
                        net->st.stalls++; /* TCP_USER_TIMEOUT fired */
                        dest_fail(c->dest, (int)nread);
                } else if (c->dest) {
                        dest_lost(c->dest, (int)nread);
                } else {
                        if (nread != UV_EOF)
                                net->st.inbound_errors++;
                        conn_close(c);
                }
                return;
        }
        if (conn_feed(c, (const uint8_t *)buf->base, (size_t)nread,
                      uv_hrtime() / 1000) != 0) {
                if (c->dest)
                        dest_lost(c->dest, -EMSGSIZE);
                else
                        conn_close(c);
        }
}

/* ---- destinations (outbound stream) ---- */

static void dest_drop(struct dest *d, const struct frame *f)
{
        size_t len = f->size - 4;
        d->st.frames_dropped++;
        d->st.bytes_dropped += len;
        d->net->st.frames_dropped++;
        d->net->st.bytes_dropped += len;
}

static void dest_drop_pending(struct dest *d)
{
        struct frame *f = d->pend_head;
        while (f) {
                struct frame *next = f->next;
                dest_drop(d, f);
                d->queued -= f->size;
                gn_big_free(f);
                f = next;
        }
        d->pend_head = d->pend_tail = NULL;
        d->st.queued_bytes = d->queued;
}

/* A connect failed or a connection stalled: drop what waits, back off. */
static void dest_fail(struct dest *d, int err)
{
        struct node_net *net = d->net;
        uint64_t base = net->cfg.backoff_min_ms, half;
        if (d->conn)
                conn_close(d->conn);
        dest_drop_pending(d);
        d->fails++;
        d->st.connect_failures++;
        net->st.connect_failures++;
        d->st.last_error = err;
        for (uint32_t i = 1; i < d->fails && base < net->cfg.backoff_max_ms;
             i++)
                base *= 2;
        if (base > net->cfg.backoff_max_ms)
                base = net->cfg.backoff_max_ms;
        half = base / 2;
        d->retry_at = uv_now(net->loop) + half + net_rand(net) % (half + 1);
        d->state = D_BACKOFF;
}

/* An established connection ended (peer closed, reset, bad frame). */
static void dest_lost(struct dest *d, int err)
{
        d->net->st.disconnects++;
        d->st.last_error = err == UV_EOF ? 0 : err;
        if (d->conn)
                conn_close(d->conn);
        d->state = D_IDLE;
}

/* Copy d's link estimate into its stats. */
static void dest_publish_link(struct dest *d)
{
        struct gossip_link_estimate e;
        gossip_link_get(&d->link, &e);
        d->st.goodput_Bps = e.goodput_Bps;
        d->st.link_rtt_us = e.rtt_us;
        d->st.link_samples = e.samples;
        d->st.link_peer_samples = e.peer_samples;
}

/* A frame of `bytes` completed on c: feed the link estimator our queue's
 * view, then the kernel's (RTT always; its delivery rate, a lower bound,
 * only when our queue ran empty, i.e. we were app-limited, and the
 * estimator drops it once the peer has reported a rate). */
static void dest_link_done(struct dest *d, struct conn *c, size_t bytes)
{
        uint64_t now = uv_hrtime() / 1000, span;
        struct node_tcpinfo ti;
        uv_os_fd_t fd;
        gossip_link_frame_done(&d->link, now, bytes, d->queued);
        if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 &&
            node_tcpinfo_read(fd, &ti) == 0) {
                gossip_link_rtt_sample(&d->link, now, ti.rtt_us);
                span = d->kern_us && now > d->kern_us ? now - d->kern_us
                                                      : GOSSIP_LINK_SPAN_MIN_US;
                if (span > GOSSIP_LINK_TAU_US)
                        span = GOSSIP_LINK_TAU_US;
                if (d->queued == 0 && ti.has_delivery && ti.delivery_rate)
                        gossip_link_app_sample(&d->link, now,
                                               (double)ti.delivery_rate, span,
                                               bytes);
                d->kern_us = now;
        }
        dest_publish_link(d);
}

static void frame_written(uv_write_t *req, int status)
{
        struct frame *f = (struct frame *)req;
        struct dest *d = f->dest;
        struct node_net *net = d->net;
        d->queued -= f->size;
        d->st.queued_bytes = d->queued;
        if (status == 0) {
                size_t len = f->size - 4;
                d->st.frames_out++;
                d->st.bytes_out += len;
                net->st.frames_out++;
                net->st.bytes_out += len;
                d->since = d->idle_since = uv_now(net->loop);
                dest_link_done(d, req->handle->data, f->size);
        } else {
                gossip_link_break(&d->link);
                dest_drop(d, f);
                struct conn *c = req->handle->data;
                if (status != UV_ECANCELED && c->dest == d)
                        dest_lost(d, status);
        }
        gn_big_free(f);
}

static int dest_write(struct dest *d, struct frame *f)
{
        uv_buf_t b = uv_buf_init((char *)f->bytes, (unsigned)f->size);
        f->dest = d;
        return uv_write(&f->req, (uv_stream_t *)&d->conn->tcp, &b, 1,
                        frame_written);
}

/* Bytes the kernel has taken but the peer never acknowledges (a
 * black-holed path) are invisible to libuv's write queue: have the kernel
 * fail the connection after the same stall bound. Best effort. */
static void conn_user_timeout(struct conn *c, uint32_t ms)
{
        uv_os_fd_t fd;
        unsigned v = ms;
        if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
                setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &v, sizeof(v));
}

/* Keep the kernel's unsent queue short (NODE_NET_NOTSENT_LOWAT). Best
 * effort. Without it a write completes as soon as the kernel's buffer
 * (autotuned up to megabytes) takes the bytes: frames wait there, where we
 * cannot see or drop them, and completions track the buffer, not the link
 * (docs/history/benchmarks-log.md section 5.4). */
static void conn_lowat(struct conn *c, uint32_t bytes)
{
        uv_os_fd_t fd;
        if (bytes != UINT32_MAX && uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
                node_tcpinfo_lowat(fd, bytes);
}

static void dest_connected(uv_connect_t *req, int status)
{
        struct conn *c = req->data;
        struct dest *d = c->dest;
        struct node_net *net = c->net;
        if (!d || c->closing || net->closing)
                return; /* timed out or shut down: already handled */
        if (status < 0) {
                dest_fail(d, status);
                return;
        }
        d->state = D_UP;
        d->fails = 0;
        d->st.connects++;
        d->st.connected = 1;
        d->st.last_error = 0;
        net->st.connects++;
        d->since = d->idle_since = uv_now(net->loop);
        d->last_wq = 0;
        uv_tcp_nodelay(&c->tcp, 1);
        conn_user_timeout(c, net->cfg.stall_timeout_ms);
        conn_lowat(c, net->cfg.notsent_lowat);
        gossip_link_break(&d->link); /* a new connection: a new span */
        if (uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read)) {
                dest_lost(d, -EIO);
                dest_drop_pending(d);
                return;
        }
        while (d->pend_head && d->conn) {
                struct frame *f = d->pend_head;
                d->pend_head = f->next;
                if (!d->pend_head)
                        d->pend_tail = NULL;
                int err = dest_write(d, f);
                if (err) {
                        dest_drop(d, f);
                        d->queued -= f->size;
                        gn_big_free(f);
                        dest_lost(d, err);
                        dest_drop_pending(d);
                }
        }
        d->st.queued_bytes = d->queued;
}

static int dest_connect(struct dest *d)
{
        struct node_net *net = d->net;
        struct sockaddr_storage ss;
        struct conn *c;
        int err;
        node_net_addr_to_sockaddr(&d->st.addr, &ss);
        c = conn_new(net);
        if (!c)
                return -ENOMEM;
        c->dest = d;
        c->peer = d->st.addr;
        c->creq.data = c;
        d->conn = c;
        d->state = D_CONNECTING;
        d->since = uv_now(net->loop);
        err = uv_tcp_connect(&c->creq, &c->tcp, (struct sockaddr *)&ss,
                             dest_connected);
        if (err)
                dest_fail(d, err);
        return err;
}

static struct dest *dest_get(struct node_net *net, const struct gossip_addr *to)
{
        for (size_t i = 0; i < net->ndests; i++)
                if (node_net_addr_equal(&net->dests[i]->st.addr, to))
                        return net->dests[i];
        if (net->ndests >= NODE_NET_DEST_MAX)
                return NULL;
        if (net->ndests == net->cap_dests) {
                size_t cap = net->cap_dests ? net->cap_dests * 2 : 16;
                struct dest **p = realloc(net->dests, cap * sizeof(*p));
                if (!p)
                        return NULL;
                net->dests = p;
                net->cap_dests = cap;
        }
        struct dest *d = calloc(1, sizeof(*d));
        if (!d)
                return NULL;
        d->net = net;
        gossip_link_init(&d->link);
        /* normalised: padding and unused address bytes zero */
        d->st.addr.family = to->family;
        d->st.addr.port = to->port;
        memcpy(d->st.addr.addr, to->addr, to->family == 4 ? 4 : 16);
        net->dests[net->ndests++] = d;
        return d;
}

/* Milliseconds a frame of len bytes may take at NODE_NET_RX_MIN_RATE. */
static uint64_t net_rx_allow_ms(size_t len)
{
        return (uint64_t)len * 1000 / NODE_NET_RX_MIN_RATE;
}

/* Why inbound c must be closed now (the counter to bump), or NULL. */
static uint64_t *conn_expired(struct conn *c, uint64_t now)
{
        struct node_net *net = c->net;
        const struct node_net_config *cfg = &net->cfg;
        size_t want = c->hdr_have == 4 ? c->want : 0;
        if (!c->authed)
                return now - c->opened_ms >=
                               cfg->hello_timeout_ms + net_rx_allow_ms(want)
                           ? &net->st.hello_timeouts
                           : NULL;
        if (c->hdr_have > 0)
                return now - c->last_rx_ms >= cfg->stall_timeout_ms ||
                               now - c->frame_ms >=
                                   cfg->stall_timeout_ms + net_rx_allow_ms(want)
                           ? &net->st.rx_stalls
                           : NULL;
        return now - c->last_frame_ms >= cfg->idle_timeout_ms
                   ? &net->st.idle_timeouts
                   : NULL;
}

/* Inbound deadlines: first frame, stalled frames, idle connections. */
static void net_tick_inbound(struct node_net *net, uint64_t now)
{
        uint64_t *why;
        for (struct conn *c = net->conns; c; c = c->next) {
                if (!c->inbound || c->closing)
                        continue;
                if ((why = conn_expired(c, now)) != NULL) {
                        (*why)++;
                        conn_close(c);
                }
        }
}

/* Housekeeping: connect timeouts, stalled writes, idle connections. */
static void net_tick(uv_timer_t *t)
{
        struct node_net *net = t->data;
        uint64_t now = uv_now(net->loop);
        net_tick_inbound(net, now);
        for (size_t i = 0; i < net->ndests; i++) {
                struct dest *d = net->dests[i];
                if (d->state == D_CONNECTING &&
                    now - d->since >= net->cfg.connect_timeout_ms) {
                        dest_fail(d, UV_ETIMEDOUT);
                } else if (d->state == D_UP && d->queued > 0 && d->conn) {
                        size_t wq = uv_stream_get_write_queue_size(
                            (uv_stream_t *)&d->conn->tcp);
                        if (wq != d->last_wq) {
                                d->last_wq = wq;
                                d->since = now;
                        } else if (now - d->since >=
                                   net->cfg.stall_timeout_ms) {
                                net->st.stalls++;
                                dest_fail(d, UV_ETIMEDOUT);
                        }
                } else if (d->state == D_UP && d->conn &&
                           now - d->idle_since >=
                               net->cfg.idle_timeout_ms / 2) {
                        net->st.idle_closes++;
                        conn_close(d->conn);
                        d->state = D_IDLE;
                } else if (d->state == D_UP) {
                        d->since = now;
                }
        }
}

static int net_send_stream(struct node_net *net, const struct gossip_addr *to,
                           const void *buf, size_t len)
{
        struct dest *d = dest_get(net, to);
        struct frame *f;
        if (!d)
                return -ENOBUFS;
        if (d->state == D_BACKOFF) {
                if (uv_now(net->loop) < d->retry_at) {
                        d->st.frames_dropped++;
                        d->st.bytes_dropped += len;
                        net->st.frames_dropped++;
                        net->st.bytes_dropped += len;
                        return d->st.last_error ? d->st.last_error
                                                : -ECONNREFUSED;
                }
                d->state = D_IDLE;
        }
        size_t wq =
            d->conn
                ? uv_stream_get_write_queue_size((uv_stream_t *)&d->conn->tcp)
                : 0;
        if ((d->queued > 0 || wq > 0) &&
            (d->queued + len + 4 > net->cfg.queue_max ||
             wq + len + 4 > net->cfg.queue_max)) {
                d->st.frames_dropped++;
                d->st.bytes_dropped += len;
                net->st.frames_dropped++;
                net->st.bytes_dropped += len;
                return -ENOBUFS;
        }
        f = gn_big_alloc(sizeof(*f) + 4 + len); /* a STATE: megabytes */
        if (!f)
                return -ENOMEM;
        memset(f, 0, sizeof(*f));
        f->size = 4 + len;
        f->dest = d;
        gn_be32_put(f->bytes, (uint32_t)len);
        memcpy(f->bytes + 4, buf, len);
        d->queued += f->size;
        d->st.queued_bytes = d->queued;
        if (d->state == D_UP) {
                int err = dest_write(d, f);
                if (err) {
                        dest_drop(d, f);
                        d->queued -= f->size;
                        d->st.queued_bytes = d->queued;
                        gn_big_free(f);
                        dest_lost(d, err);
                }
                return err;
        }
        if (d->pend_tail)
                d->pend_tail->next = f;
        else
                d->pend_head = f;
        d->pend_tail = f;
        if (d->state == D_IDLE)
                return dest_connect(d);
        return 0;
}

/* ---- datagrams ---- */

static void udp_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
        struct node_net *net = h->data;
        *buf = uv_buf_init((char *)net->ubuf, NET_UBUF);
}

static void udp_recv(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf,
                     const struct sockaddr *sa, unsigned flags)
{
        struct node_net *net = h->data;
        struct gossip_addr from;
        if (net->closing || nread < 0 || sa == NULL)
                return; /* errors on an unconnected UDP socket: nothing */
        if ((flags & UV_UDP_PARTIAL) || (size_t)nread > net->cfg.dgram_max ||
            nread == 0) {
                net->st.dgram_oversize++;
                return;
        }
        if (node_net_addr_from_sockaddr(sa, &from) != 0)
                return;
        net->st.dgram_in++;
        net->st.dgram_bytes_in += (uint64_t)nread;
        if (net->cfg.on_frame) {
                struct node_net_rx rx = {0};

                net->cfg.on_frame(net->cfg.ctx, &from, buf->base, (size_t)nread,
                                  GOSSIP_CH_DGRAM, &rx);
                take_report(net, &rx);
        }
}

static void udp_sent(uv_udp_send_t *req, int status)
{
        struct udp_send *u = (struct udp_send *)req;
        if (status == 0) {
                u->net->st.dgram_out++;
                u->net->st.dgram_bytes_out += u->len;
        } else {
                u->net->st.dgram_send_fail++;
        }
        free(u);
}

static int net_send_dgram(struct node_net *net, const struct gossip_addr *to,
                          const void *buf, size_t len)
{
        struct sockaddr_storage ss;
        uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
        struct udp_send *u;
        int r;
        if (node_net_addr_to_sockaddr(to, &ss) != 0)
                return -EINVAL;
        r = uv_udp_try_send(&net->udp, &b, 1, (struct sockaddr *)&ss);
        if (r >= 0) {
                net->st.dgram_out++;
                net->st.dgram_bytes_out += len;
                return 0;
        }
        if (r != UV_EAGAIN) {
                net->st.dgram_send_fail++;
                return r;
        }
        if (uv_udp_get_send_queue_size(&net->udp) + len > net->cfg.queue_max) {
                net->st.dgram_send_fail++;
                return -ENOBUFS;
        }
        u = malloc(sizeof(*u) + len);
        if (!u)
                return -ENOMEM;
        u->net = net;
        u->len = len;
        memcpy(u->data, buf, len);
        b = uv_buf_init((char *)u->data, (unsigned)len);
        r = uv_udp_send(&u->req, &net->udp, &b, 1, (struct sockaddr *)&ss,
                        udp_sent);
        if (r) {
                net->st.dgram_send_fail++;
                free(u);
        }
        return r;
}

/* ---- listener ---- */

/* Unauthenticated inbound connections from c's source address, c aside. */
static uint32_t net_pending_from(struct node_net *net, const struct conn *c)
{
        uint32_t n = 0;
        for (struct conn *o = net->conns; o; o = o->next)
                if (o != c && o->inbound && !o->authed && !o->closing &&
                    node_net_addr_equal(&o->src, &c->src))
                        n++;
        return n;
}

/* The oldest inbound connection still waiting for its first frame, c
 * aside (the list is newest first), or NULL. */
static struct conn *net_oldest_pending(struct node_net *net,
                                       const struct conn *c)
{
        struct conn *found = NULL;
        for (struct conn *o = net->conns; o; o = o->next)
                if (o != c && o->inbound && !o->authed && !o->closing)
                        found = o;
        return found;
}

/* May freshly accepted c stay? Applies the per-address cap, then makes
 * room by evicting the oldest unauthenticated connection when full.
 * 0, or -EBUSY (counted) when c must go. */
static int net_admit(struct node_net *net, struct conn *c)
{
        struct conn *victim;
        if (net_pending_from(net, c) >= net->cfg.pending_per_addr) {
                net->st.addr_rejects++;
                return -EBUSY;
        }
        if ((uint32_t)net->inbound <= net->cfg.inbound_max)
                return 0;
        victim = net_oldest_pending(net, c);
        if (!victim) {
                net->st.accept_rejects++;
                return -EBUSY;
        }
        net->st.evictions++;
        conn_close(victim);
        return 0;
}

static void net_accept(uv_stream_t *server, int status)
{
        struct node_net *net = server->data;
        struct sockaddr_storage ss;
        int sl = sizeof(ss);
        struct conn *c;
        if (status < 0 || net->closing)
                return;
        c = conn_new(net);
        if (!c)
                return;
        c->inbound = 1;
        net->inbound++;
        net->pending++;
        c->opened_ms = c->last_rx_ms = uv_now(net->loop);
        if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 ||
            uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) != 0 ||
            node_net_addr_from_sockaddr((struct sockaddr *)&ss, &c->peer)) {
                conn_close(c);
                return;
        }
        c->src = c->peer;
        c->src.port = 0;
        if (net_admit(net, c) != 0) {
                conn_close(c);
                return;
        }
        net->st.accepts++;
        if (uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read))
                conn_close(c);
}

/* ---- public API ---- */

static void net_defaults(struct node_net_config *c)
{
        if (!c->dgram_max || c->dgram_max > NODE_NET_DGRAM_MAX)
                c->dgram_max = NODE_NET_DGRAM_MAX;
        if (!c->stream_max || c->stream_max > UINT32_MAX)
                c->stream_max = NODE_NET_STREAM_MAX;
        if (!c->queue_max)
                c->queue_max = NODE_NET_QUEUE_MAX;
        if (!c->backoff_min_ms)
                c->backoff_min_ms = NODE_NET_BACKOFF_MIN_MS;
        if (!c->backoff_max_ms)
                c->backoff_max_ms = NODE_NET_BACKOFF_MAX_MS;
        if (c->backoff_max_ms < c->backoff_min_ms)
                c->backoff_max_ms = c->backoff_min_ms;
        if (!c->rx_max)
                c->rx_max = NODE_NET_RX_MAX;
        if (!c->stream_min)
                c->stream_min = NODE_NET_STREAM_MIN;
        if (c->stream_min > c->stream_max)
                c->stream_min = c->stream_max;
        if (!c->hello_timeout_ms)
                c->hello_timeout_ms = NODE_NET_HELLO_TIMEOUT_MS;
        if (!c->idle_timeout_ms)
                c->idle_timeout_ms = NODE_NET_IDLE_TIMEOUT_MS;
        if (!c->pending_per_addr)
                c->pending_per_addr = NODE_NET_PENDING_PER_ADDR;
        if (!c->inbound_max)
                c->inbound_max = NODE_NET_INBOUND_MAX;
        if (!c->connect_timeout_ms)
                c->connect_timeout_ms = NODE_NET_CONNECT_TIMEOUT_MS;
        if (!c->stall_timeout_ms)
                c->stall_timeout_ms = NODE_NET_STALL_TIMEOUT_MS;
        if (!c->notsent_lowat)
                c->notsent_lowat = NODE_NET_NOTSENT_LOWAT;
}

/* Bind UDP then TCP to the same port number. 0 or -errno; on error the
 * handles stay initialised (the caller closes them). */
static int net_bind(struct node_net *net, struct gossip_addr want)
{
        struct sockaddr_storage ss;
        int sl = sizeof(ss), err;
        if (node_net_addr_to_sockaddr(&want, &ss) != 0)
                return -EINVAL;
        err = uv_udp_bind(&net->udp, (struct sockaddr *)&ss, 0);
        if (err)
                return err;
        err = uv_udp_getsockname(&net->udp, (struct sockaddr *)&ss, &sl);
        if (err)
                return err;
        node_net_addr_from_sockaddr((struct sockaddr *)&ss, &net->local);
        err = uv_tcp_bind(&net->listener, (struct sockaddr *)&ss, 0);
        if (err)
                return err;
        return uv_listen((uv_stream_t *)&net->listener, 128, net_accept);
}

static int net_init_handles(struct node_net *net)
{
        int err = uv_udp_init(net->loop, &net->udp);
        if (err)
                return err;
        net->udp.data = net;
        net->handles++;
        err = uv_tcp_init(net->loop, &net->listener);
        if (err)
                return err;
        net->listener.data = net;
        net->handles++;
        return 0;
}

static void net_close_handles(struct node_net *net)
{
        if (net->handles >= 1)
                uv_close((uv_handle_t *)&net->udp, net_handle_closed);
        if (net->handles >= 2)
                uv_close((uv_handle_t *)&net->listener, net_handle_closed);
}

int node_net_open(struct node_net **out, uv_loop_t *loop,
                  const struct node_net_config *cfg)
{
        struct node_net *net = NULL;
        int err = -EINVAL;
        *out = NULL;
        if (!loop || !cfg ||
            (cfg->listen.family != 4 && cfg->listen.family != 6))
                return -EINVAL;
        for (int tries = 0; tries < NET_BIND_TRIES; tries++) {
                net = calloc(1, sizeof(*net));
                if (!net)
                        return -ENOMEM;
                net->loop = loop;
                net->cfg = *cfg;
                net_defaults(&net->cfg);
                net->rng = cfg->seed;
                err = net_init_handles(net);
                if (!err)
                        err = net_bind(net, cfg->listen);
                if (!err)
                        break;
                net->closing = 1;
                net_close_handles(net);
                if (net->handles == 0)
                        free(net);
                net = NULL;
                /* with port 0 the UDP port was free but TCP's was not */
                if (err != UV_EADDRINUSE || cfg->listen.port != 0)
                        return err;
        }
        if (!net)
                return err;
        err = uv_udp_recv_start(&net->udp, udp_alloc, udp_recv);
        if (!err)
                err = uv_timer_init(loop, &net->timer);
        if (err) {
                node_net_close(net);
                return err;
        }
        net->timer.data = net;
        net->timer_open = 1;
        net->handles++;
        uv_timer_start(&net->timer, net_tick, NET_TICK_MS, NET_TICK_MS);
        uv_unref((uv_handle_t *)&net->timer);
        *out = net;
        return 0;
}

void node_net_close(struct node_net *net)
{
        struct conn *c;
        if (!net || net->closing)
                return;
        net->closing = 1;
        for (size_t i = 0; i < net->ndests; i++)
                dest_drop_pending(net->dests[i]);
        for (c = net->conns; c; c = c->next)
                conn_close(c);
        uv_close((uv_handle_t *)&net->udp, net_handle_closed);
        uv_close((uv_handle_t *)&net->listener, net_handle_closed);
        if (net->timer_open)
                uv_close((uv_handle_t *)&net->timer, net_handle_closed);
}

int node_net_local_addr(const struct node_net *net, struct gossip_addr *out)
{
        if (!net || !out)
                return -EINVAL;
        *out = net->local;
        return 0;
}

int node_net_send(struct node_net *net, const struct gossip_addr *to,
                  const void *buf, size_t len, int channel)
{
        if (!net || !to || (!buf && len) || net->closing ||
            (to->family != 4 && to->family != 6))
                return -EINVAL;
        if (channel == GOSSIP_CH_DGRAM) {
                if (len > net->cfg.dgram_max)
                        return -EMSGSIZE;
                return net_send_dgram(net, to, buf, len);
        }
        if (channel == GOSSIP_CH_STREAM) {
                if (len == 0)
                        return -EINVAL;
                if (len > net->cfg.stream_max || len < net->cfg.stream_min)
                        return -EMSGSIZE;
                return net_send_stream(net, to, buf, len);
        }
        return -EINVAL;
}

uint64_t node_net_now_ms(const struct node_net *net)
{
        return uv_now(net->loop);
}

static int net_env_send(void *ctx, const struct gossip_addr *to,
                        const void *buf, size_t len, int channel)
{
        return node_net_send(ctx, to, buf, len, channel);
}

static uint64_t net_env_now(void *ctx)
{
        return node_net_now_ms(ctx);
}

void node_net_env(struct node_net *net, struct gossip_env *env)
{
        env->send = net_env_send;
        env->now_ms = net_env_now;
        env->ctx = net;
}

void node_net_stats(const struct node_net *net, struct node_net_stats *out)
{
        *out = net->st;
        out->inbound_open = (uint64_t)net->inbound;
        out->inbound_pending = (uint64_t)net->pending;
}

size_t node_net_peer_stats(const struct node_net *net,
                           struct node_net_peer_stats *out, size_t max)
{
        for (size_t i = 0; i < net->ndests && i < max; i++)
                out[i] = net->dests[i]->st;
        return net->ndests;
}

uint64_t node_net_queued_bytes(const struct node_net *net)
{
        uint64_t sum = 0;

        for (size_t i = 0; i < net->ndests; i++)
                sum += net->dests[i]->queued;
        return sum;
}

int node_net_peer_link(const struct node_net *net, const struct gossip_addr *a,
                       struct gossip_link_estimate *out)
{
        for (size_t i = 0; i < net->ndests; i++)
                if (node_net_addr_equal(&net->dests[i]->st.addr, a)) {
                        gossip_link_get(&net->dests[i]->link, out);
                        return 0;
                }
        return -ENOENT;
}

int node_net_peer_rate_sample(struct node_net *net, const struct gossip_addr *a,
                              uint32_t rate_Bps, uint32_t span_us)
{
        for (size_t i = 0; i < net->ndests; i++)
                if (node_net_addr_equal(&net->dests[i]->st.addr, a)) {
                        struct dest *d = net->dests[i];
                        gossip_link_peer_sample(&d->link, uv_hrtime() / 1000,
                                                rate_Bps, span_us);
                        dest_publish_link(d);
                        return 0;
                }
        return -ENOENT;
}
