/* lab_delay.c - the link lab's delay, jitter and loss, in user space
 * (NFQUEUE).
 *
 * The kernel here has no netem, so tests/lab/linklab runs one of these in
 * each lab host's network namespace, bound to NFQUEUE queue Q and fed by
 *   iptables -A INPUT -i lab0 -j NFQUEUE --queue-num Q
 * Every packet gets one verdict: dropped at once (silent loss: on INPUT
 * the sender's sendto() never sees it), otherwise accepted when it is due.
 * It sits on the receiver's INPUT chain, not on OUTPUT: a packet held on
 * OUTPUT still counts against the sending socket's TCP small-queue budget,
 * and one flow then gets ~5 Mbit/s on a 100 Mbit/s link.
 *
 * The models (a Wi-Fi-like hop for the fleet bench, tests/bench/fleet):
 *  - delay: DELAY after arrival, plus with --jitter-us J an extra delay
 *    drawn per packet from an exponential of mean J. A packet is never
 *    due before the one ahead of it: one that waits long holds those
 *    behind it, which then leave back to back. That is how a Wi-Fi hop
 *    varies (the frame at the head retried or waiting for the medium,
 *    the queue behind it), and it keeps every flow in order, as 802.11
 *    delivers it.
 *  - loss: with probability LOSS per packet, independently; or with
 *    --loss-burst B > 1 in bursts (a two-state Gilbert channel: the bad
 *    state drops every packet and lasts B packets on average, the good
 *    state drops none, entered and left so that LOSS of all packets are
 *    lost in the long run): what a Wi-Fi link's residual loss looks like
 *    once the MAC's retries give up during a fade or interference.
 * What it cannot model: a medium shared by several hosts (each host's
 * link here is its own, capped by tbf), rate changes over time (802.11
 * rate adaptation), or reordering.
 *
 * Invariants: due times never decrease, so the held packets form one FIFO
 * and leave in the order they came: no flow is ever reordered. The kernel
 * keeps each packet; we keep only its id and due time, in a ring of
 * --limit entries. A packet that finds the ring full is dropped and
 * counted (a router's tail drop). GSO packets are segmented by the kernel
 * before they reach us (no NFQA_CFG_F_GSO), so loss is per wire packet.
 * On SIGTERM/SIGINT every held packet is accepted at once, the queue is
 * unbound and the counters go to stderr; exit status 0. Randomness comes
 * from --seed only (the loss pattern with independent loss is the same
 * with or without jitter). "ready" on stdout (then stdout is closed) once
 * the queue is bound: the lab adds its iptables rule after that, so no
 * packet meets an unbound queue.
 *
 * Usage: lab_delay --queue Q [--delay-us D] [--jitter-us J] [--loss P]
 *                  [--loss-burst B] [--seed S] [--limit N]
 */
#define _GNU_SOURCE /* ppoll */
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <math.h>
#include <stdbool.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/gn_rng.h"

enum {
        /* Held packets by default: 100 Mbit/s x 20 ms one way is ~170
         * full-size packets; 4096 leaves room for a faster link or a
         * longer delay, and matches the kernel queue length we ask for. */
        LAB_DELAY_LIMIT_DEFAULT = 4096,
        /* Netlink receive buffer: a burst of 4096 metadata-only messages
         * (~200 bytes each) must fit, or the kernel reports ENOBUFS and
         * the packets behind those messages wait until the queue is
         * destroyed. */
        LAB_DELAY_RCVBUF = 8 << 20,
        LAB_DELAY_MSG_MAX = 65536,
};

struct lab_delay_held {
        uint32_t id;
        uint64_t due_ns;
};

struct lab_delay {
        struct nfq_q_handle *qh;
        struct lab_delay_held *ring;
        uint32_t limit, head, count;
        uint64_t delay_ns;
        double jitter_ns;        /* mean of the exponential extra delay */
        uint64_t last_due_ns;    /* due times never decrease (FIFO) */
        uint64_t loss_threshold; /* drop if rand64 < this (independent, or
                                  * good -> bad with bursts) */
        uint64_t burst_end;      /* bursts: bad -> good if rand64 < this */
        bool bursty, bad;
        uint64_t rng;  /* gn_splitmix64 state: the loss pattern */
        uint64_t jrng; /* ... and the jitter's, apart */
        uint64_t seen, delayed, lost, bursts, overflow, enobufs, verdict_errors;
};

static volatile sig_atomic_t lab_delay_stop;

static void lab_delay_on_signal(int sig)
{
        (void)sig;
        lab_delay_stop = 1;
}

static uint64_t lab_delay_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void lab_delay_verdict(struct lab_delay *d, uint32_t id,
                              uint32_t verdict)
{
        if (nfq_set_verdict(d->qh, id, verdict, 0, NULL) < 0)
                d->verdict_errors++;
}

/* A uniform double in (0, 1]. */
static double lab_delay_unit(uint64_t *rng)
{
        return (double)((gn_splitmix64(rng) >> 11) + 1) * 0x1p-53;
}

/* Whether the packet arriving now is lost: independently, or by the
 * two-state burst channel (one draw per packet either way). */
static bool lab_delay_lose(struct lab_delay *d)
{
        uint64_t r;

        if (!d->loss_threshold)
                return false;
        r = gn_splitmix64(&d->rng);
        if (!d->bursty)
                return r < d->loss_threshold;
        if (d->bad && r < d->burst_end)
                d->bad = false;
        else if (!d->bad && r < d->loss_threshold) {
                d->bad = true;
                d->bursts++;
        }
        return d->bad;
}

/* When the packet arriving now is due: after the delay and its jitter,
 * and not before the packet ahead of it. */
static uint64_t lab_delay_due(struct lab_delay *d)
{
        uint64_t due = lab_delay_now_ns() + d->delay_ns;

        if (d->jitter_ns > 0)
                due +=
                    (uint64_t)(-d->jitter_ns * log(lab_delay_unit(&d->jrng)));
        if (due < d->last_due_ns)
                due = d->last_due_ns;
        d->last_due_ns = due;
        return due;
}

/* Called by nfq_handle_packet() for each queued packet. */
static int lab_delay_on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg,
                               struct nfq_data *nfa, void *arg)
{
        struct lab_delay *d = arg;
        struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
        uint32_t id;

        (void)qh;
        (void)msg;
        if (!ph)
                return 0;
        id = ntohl(ph->packet_id);
        d->seen++;
        if (lab_delay_lose(d)) {
                d->lost++;
                lab_delay_verdict(d, id, NF_DROP);
                return 0;
        }
        if (d->delay_ns == 0 && d->jitter_ns == 0) {
                lab_delay_verdict(d, id, NF_ACCEPT);
                return 0;
        }
        if (d->count == d->limit) {
                d->overflow++;
                lab_delay_verdict(d, id, NF_DROP);
                return 0;
        }
        d->ring[(d->head + d->count) % d->limit] =
            (struct lab_delay_held){.id = id, .due_ns = lab_delay_due(d)};
        d->count++;
        d->delayed++;
        return 0;
}

/* Accept every held packet due by now_ns (all of them if now_ns is
 * UINT64_MAX), oldest first. */
static void lab_delay_release(struct lab_delay *d, uint64_t now_ns)
{
        while (d->count && d->ring[d->head].due_ns <= now_ns) {
                lab_delay_verdict(d, d->ring[d->head].id, NF_ACCEPT);
                d->head = (d->head + 1) % d->limit;
                d->count--;
        }
}

/* Read every message waiting on fd and hand it to libnetfilter_queue. */
static int lab_delay_drain(struct lab_delay *d, struct nfq_handle *h, int fd,
                           char *buf)
{
        for (;;) {
                ssize_t n = recv(fd, buf, LAB_DELAY_MSG_MAX, MSG_DONTWAIT);

                if (n >= 0) {
                        nfq_handle_packet(h, buf, (int)n);
                        continue;
                }
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                        return 0;
                if (errno == ENOBUFS) {
                        d->enobufs++;
                        continue;
                }
                return -errno;
        }
}

/* Wait for packets or the next due time; signals are unblocked only
 * inside ppoll so a SIGTERM cannot slip in between the check and the
 * wait. */
static int lab_delay_wait(struct lab_delay *d, int fd, const sigset_t *open)
{
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        struct timespec ts, *tp = NULL;

        if (d->count) {
                uint64_t now = lab_delay_now_ns(),
                         due = d->ring[d->head].due_ns;
                uint64_t left = due > now ? due - now : 0;

                ts.tv_sec = (time_t)(left / 1000000000u);
                ts.tv_nsec = (long)(left % 1000000000u);
                tp = &ts;
        }
        if (ppoll(&pfd, 1, tp, open) < 0 && errno != EINTR)
                return -errno;
        return 0;
}

static int lab_delay_loop(struct lab_delay *d, struct nfq_handle *h)
{
        int fd = nfq_fd(h), rc = 0;
        sigset_t block, open;
        char *buf = malloc(LAB_DELAY_MSG_MAX);

        if (!buf)
                return -ENOMEM;
        sigemptyset(&block);
        sigaddset(&block, SIGTERM);
        sigaddset(&block, SIGINT);
        sigprocmask(SIG_BLOCK, &block, &open);
        sigdelset(&open, SIGTERM);
        sigdelset(&open, SIGINT);
        while (!lab_delay_stop) {
                rc = lab_delay_wait(d, fd, &open);
                if (rc == 0)
                        rc = lab_delay_drain(d, h, fd, buf);
                if (rc < 0)
                        break;
                lab_delay_release(d, lab_delay_now_ns());
        }
        lab_delay_release(d, UINT64_MAX);
        free(buf);
        return rc;
}

struct lab_delay_opts {
        int queue;
        long long delay_us, jitter_us;
        double loss, loss_burst;
        unsigned long long seed;
        long limit;
};

static int lab_delay_parse(int argc, char **argv, struct lab_delay_opts *o)
{
        *o = (struct lab_delay_opts){.queue = -1,
                                     .limit = LAB_DELAY_LIMIT_DEFAULT};
        for (int i = 1; i + 1 < argc; i += 2) {
                const char *k = argv[i], *v = argv[i + 1];
                char *end;

                errno = 0;
                if (!strcmp(k, "--queue"))
                        o->queue = (int)strtol(v, &end, 10);
                else if (!strcmp(k, "--delay-us"))
                        o->delay_us = strtoll(v, &end, 10);
                else if (!strcmp(k, "--jitter-us"))
                        o->jitter_us = strtoll(v, &end, 10);
                else if (!strcmp(k, "--loss"))
                        o->loss = strtod(v, &end);
                else if (!strcmp(k, "--loss-burst"))
                        o->loss_burst = strtod(v, &end);
                else if (!strcmp(k, "--seed"))
                        o->seed = strtoull(v, &end, 10);
                else if (!strcmp(k, "--limit"))
                        o->limit = strtol(v, &end, 10);
                else
                        return -EINVAL;
                if (errno || *end || end == v)
                        return -EINVAL;
        }
        if (argc % 2 == 0 || o->queue < 0 || o->queue > 65535 ||
            o->delay_us < 0 || o->delay_us > 10000000 || o->jitter_us < 0 ||
            o->jitter_us > 1000000 || !(o->loss >= 0) || o->loss > 1 ||
            !(o->loss_burst >= 0) || o->loss_burst > 1000 || o->limit < 1 ||
            o->limit > 1 << 20)
                return -EINVAL;
        return 0;
}

/* Bind queue o->queue with metadata-only copies and a kernel queue as
 * long as our ring. */
static int lab_delay_bind(struct nfq_handle *h, struct lab_delay *d,
                          const struct lab_delay_opts *o)
{
        d->qh = nfq_create_queue(h, (uint16_t)o->queue, lab_delay_on_packet, d);
        if (!d->qh)
                return errno ? -errno : -EIO;
        if (nfq_set_mode(d->qh, NFQNL_COPY_META, 0) < 0 ||
            nfq_set_queue_maxlen(d->qh, (uint32_t)o->limit) < 0)
                return errno ? -errno : -EIO;
        nfnl_rcvbufsiz(nfq_nfnlh(h), LAB_DELAY_RCVBUF);
        return 0;
}

/* Thresholds for loss share `loss`: independent, or bursts of `burst`
 * packets on average (bad -> good with 1/burst per packet; good -> bad
 * with loss / (burst (1 - loss)), so the bad state holds `loss` of the
 * packets). */
static void lab_delay_loss_model(struct lab_delay *d, double loss, double burst)
{
        double p = loss;

        d->bursty = burst > 1 && loss > 0 && loss < 1;
        if (d->bursty) {
                p = loss / (burst * (1 - loss));
                d->burst_end = (uint64_t)(0x1p64 / burst);
        }
        d->loss_threshold = p >= 1 ? UINT64_MAX : (uint64_t)(p * 0x1p64);
}

static void lab_delay_report(const struct lab_delay *d, int rc)
{
        fprintf(stderr,
                "lab_delay: seen %llu delayed %llu lost %llu bursts %llu "
                "overflow %llu enobufs %llu verdict_errors %llu%s%s\n",
                (unsigned long long)d->seen, (unsigned long long)d->delayed,
                (unsigned long long)d->lost, (unsigned long long)d->bursts,
                (unsigned long long)d->overflow, (unsigned long long)d->enobufs,
                (unsigned long long)d->verdict_errors, rc ? " error: " : "",
                rc ? strerror(-rc) : "");
}

int main(int argc, char **argv)
{
        struct lab_delay_opts o;
        struct lab_delay d = {0};
        struct nfq_handle *h = NULL;
        struct sigaction sa = {.sa_handler = lab_delay_on_signal};
        int rc;

        if (lab_delay_parse(argc, argv, &o) < 0) {
                fprintf(stderr, "usage: lab_delay --queue Q [--delay-us D] "
                                "[--jitter-us J] [--loss 0..1] "
                                "[--loss-burst B] [--seed S] [--limit N]\n");
                return 2;
        }
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        d.limit = (uint32_t)o.limit;
        d.delay_ns = (uint64_t)o.delay_us * 1000u;
        d.jitter_ns = (double)o.jitter_us * 1000.0;
        lab_delay_loss_model(&d, o.loss, o.loss_burst);
        d.rng = o.seed;
        d.jrng = o.seed ^ 0x6a09e667f3bcc909ull;
        d.ring = calloc(d.limit, sizeof(*d.ring));
        rc = d.ring ? 0 : -ENOMEM;
        if (rc == 0) {
                h = nfq_open();
                rc = h ? 0 : (errno ? -errno : -EIO);
        }
        if (rc == 0)
                rc = lab_delay_bind(h, &d, &o);
        if (rc < 0)
                goto out;
        printf("ready\n");
        fflush(stdout);
        fclose(stdout);
        rc = lab_delay_loop(&d, h);
out:
        if (d.qh)
                nfq_destroy_queue(d.qh);
        if (h)
                nfq_close(h);
        lab_delay_report(&d, rc);
        free(d.ring);
        return rc < 0 ? 1 : 0;
}
