/*
 * bench_swim.c - membership at scale on the simulated network.
 *
 * Not a test (never run by ctest, never fails on timing). For n simulated
 * nodes (default 1024) it measures, in one run:
 *  - cold start: virtual time until every node sees all n alive, having
 *    joined through node 0;
 *  - steady-state load: datagrams and bytes sent per node per simulated
 *    second, and real CPU seconds per node per simulated second (the whole
 *    process, so it includes signing/verifying every frame and the
 *    simulator itself);
 *  - failure detection, for `crashes` victims crashed one at a time: time
 *    to the first suspicion anywhere (the SWIM paper's "first detection":
 *    e/(e-1) = 1.58 protocol periods counted from the first full period
 *    after the crash, so ~2.08 s for a crash at a random phase with
 *    T = 1 s), to the first `dead`, and until every survivor knows.
 * and prints the SWIM paper's predictions next to the measurements.
 *
 *  - optionally, false positives under loss: `loss` datagram loss on every
 *    link for `loss_s` simulated seconds, counting (observer, member)
 *    transitions to suspect and to dead among the live nodes, and the
 *    suspicions raised at their source (probes that got no ACK at all).
 *
 * Usage: bench_swim [n] [crashes] [steady_s] [loss loss_s]
 * (seed from GN_SEED)
 * CPU numbers on a shared machine are noisy; virtual-time numbers are exact
 * for a seed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_seed.h"
#include "gossip/gossip.h"
#include "sim.h"

#define E_CONST 2.718281828459045

struct bench {
        unsigned dead_events, suspect_events; /* any member, any observer */
        long victim;
        uint64_t crash_at, first_suspect, first_dead;
};

static void on_member(void *ctx, const struct gossip_member_info *m, int old)
{
        struct sim *s = ctx;
        struct bench *b = sim_user(s);

        (void)old;
        b->dead_events += m->state == GOSSIP_DEAD;
        b->suspect_events += m->state == GOSSIP_SUSPECT;
        if (b->victim < 0 || memcmp(m->key, sim_key(s, (size_t)b->victim),
                                    GOSSIP_KEY_BYTES) != 0)
                return;
        if (m->state == GOSSIP_SUSPECT && !b->first_suspect)
                b->first_suspect = sim_now(s);
        if (m->state == GOSSIP_DEAD && !b->first_dead)
                b->first_dead = sim_now(s);
}

static bool all_alive(struct sim *s, void *arg)
{
        size_t n = sim_n(s), i;

        (void)arg;
        for (i = 0; i < n; i++)
                if (gossip_alive_count(sim_node(s, i)) != n)
                        return false;
        return true;
}

static bool all_know_dead(struct sim *s, void *arg)
{
        const struct bench *b = arg;
        size_t n = sim_n(s), i;

        for (i = 0; i < n; i++) {
                if (!sim_node(s, i))
                        continue;
                if (sim_state(s, i, (size_t)b->victim) != GOSSIP_DEAD)
                        return false;
        }
        return true;
}

/* Probes that ended with no ACK at all, summed over the running nodes:
 * each raises (or confirms) a suspicion at its prober. */
static uint64_t probe_failures(struct sim *s)
{
        struct gossip_stats st;
        uint64_t sum = 0;

        for (size_t i = 0; i < sim_n(s); i++) {
                if (!sim_node(s, i))
                        continue;
                gossip_stats_get(sim_node(s, i), &st);
                sum += st.probe_failures;
        }
        return sum;
}

static double cpu_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
        int crashes = argc > 2 ? atoi(argv[2]) : 3;
        double steady = argc > 3 ? atof(argv[3]) : 20.0;
        double loss = argc > 5 ? atof(argv[4]) : 0.0;
        double loss_s = argc > 5 ? atof(argv[5]) : 0.0;
        struct bench b = {.victim = -1};
        struct sim_opts o = {0};
        struct sim_counters c0, c1;
        struct sim *s;
        double cpu0, cpu1, sum_first = 0, sum_all = 0;
        uint64_t t0;
        size_t i;
        int k, rc;

        o.n = n;
        o.seed = gn_test_seed("bench_swim", 42);
        o.delay_ms = 2;
        o.jitter_ms = 3;
        o.on_member = on_member;
        o.user = &b;
        if (n < 4 || (rc = sim_create(&o, &s)) < 0) {
                fprintf(stderr, "bench_swim: cannot build %zu nodes\n", n);
                return 1;
        }
        cpu0 = cpu_s();
        for (i = 1; i < n; i++)
                sim_join(s, i, 0);
        if (!sim_run_until_pred(s, 120000, 100, all_alive, NULL)) {
                fprintf(stderr, "bench_swim: no convergence in 120 s\n");
                return 1;
        }
        printf("n=%zu cold start: all see %zu alive at %.2f s virtual "
               "(%.1f s CPU)\n",
               n, n, sim_now(s) / 1000.0, cpu_s() - cpu0);

        /* Steady state after the join storm has drained. */
        sim_run_until(s, sim_now(s) + 30000);
        sim_counters(s, &c0);
        cpu0 = cpu_s();
        t0 = sim_now(s);
        sim_run_until(s, t0 + (uint64_t)(steady * 1000));
        cpu1 = cpu_s();
        sim_counters(s, &c1);
        printf("n=%zu steady %.0f s: %.2f datagrams/node/s (%.0f B/node/s), "
               "%.3f stream frames/node/s (%.0f B/node/s); CPU %.1f us per "
               "node per simulated s\n",
               n, steady, (c1.sent[0] - c0.sent[0]) / (double)n / steady,
               (c1.bytes[0] - c0.bytes[0]) / (double)n / steady,
               (c1.sent[1] - c0.sent[1]) / (double)n / steady,
               (c1.bytes[1] - c0.bytes[1]) / (double)n / steady,
               (cpu1 - cpu0) / (double)n / steady * 1e6);

        for (k = 0; k < crashes; k++) {
                b.victim = (long)(1 + (size_t)k * (n / (crashes + 1)));
                b.first_suspect = b.first_dead = 0;
                sim_crash(s, (size_t)b.victim);
                b.crash_at = sim_now(s);
                if (!sim_run_until_pred(s, b.crash_at + 120000, 100,
                                        all_know_dead, &b)) {
                        printf("victim %ld: not dead everywhere in 120 s\n",
                               b.victim);
                        continue;
                }
                printf("n=%zu crash of node %ld: first suspicion %.2f s, "
                       "first dead %.2f s, dead everywhere %.2f s\n",
                       n, b.victim, (b.first_suspect - b.crash_at) / 1000.0,
                       (b.first_dead - b.crash_at) / 1000.0,
                       (sim_now(s) - b.crash_at) / 1000.0);
                sum_first += (b.first_suspect - b.crash_at) / 1000.0;
                sum_all += (sim_now(s) - b.crash_at) / 1000.0;
                b.victim = -1;
                sim_run_until(s, sim_now(s) + 5000);
        }
        if (crashes > 0) {
                double lg = n > 10 ? log10((double)n) : 1.0;
                printf("n=%zu mean of %d: first suspicion %.2f s (SWIM "
                       "paper: e/(e-1) = %.2f periods from the first full "
                       "period, + 0.5 for a crash at a random phase = %.2f "
                       "s); dead everywhere %.2f s (suspicion min %.1f s .. "
                       "max %.1f s)\n",
                       n, crashes, sum_first / crashes, E_CONST / (E_CONST - 1),
                       E_CONST / (E_CONST - 1) + 0.5, sum_all / crashes, 4 * lg,
                       24 * lg);
        }
        if (loss > 0 && loss_s > 0) {
                uint64_t f0 = probe_failures(s);
                sim_set_loss_all(s, loss);
                b.dead_events = b.suspect_events = 0;
                sim_run_until(s, sim_now(s) + (uint64_t)(loss_s * 1000));
                printf("n=%zu loss %.0f%% for %.0f s: %u suspect and %u dead "
                       "transitions of live members (over all observers); "
                       "%llu suspicions raised by a node's own failed probe\n",
                       n, loss * 100, loss_s, b.suspect_events, b.dead_events,
                       (unsigned long long)(probe_failures(s) - f0));
        }
        sim_destroy(s);
        return 0;
}
