/*
 * test_stop.c - the cluster-wide stop decision (gossip/stop.c): percent to
 * basis points, which LEAVE reasons count, each signer once, the quorum,
 * the two rules (our own evaluation within the margin; a quorum of
 * members), a cluster in virtual steps (an honest one stops within a
 * step of its first node, a liar stops nobody), and the lines a node
 * logs. The wire form is in test_wire.c, the three-node run in
 * tests/node/test_cluster_run.py (scenario stop), a real liar in
 * tests/node/test_hostile_run.py --stop. GN_SEED replays the simulation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gossip/stop.h"

static struct gossip_stop target(uint64_t step, uint32_t acc, uint32_t tgt,
                                 const char *who)
{
        struct gossip_stop s = {0};

        s.reason = GOSSIP_STOP_TARGET;
        s.step = step;
        s.acc_bp = acc;
        s.target_bp = tgt;
        strcpy(s.origin, who);
        return s;
}

static void test_bp(void **state)
{
        (void)state;
        assert_int_equal(gossip_stop_bp(88.0), 8800);
        assert_int_equal(gossip_stop_bp(88.125), 8813); /* rounded */
        assert_int_equal(gossip_stop_bp(0.004), 0);
        assert_int_equal(gossip_stop_bp(0.005), 1);
        assert_int_equal(gossip_stop_bp(100.0), 10000);
        assert_int_equal(gossip_stop_bp(250.0), 10000);
        assert_int_equal(gossip_stop_bp(-3.0), 0);
        assert_int_equal(gossip_stop_bp(NAN), 0);
}

static void test_honoured(void **state)
{
        struct gossip_stop s = target(1400, 8812, 8800, "a");

        (void)state;
        assert_true(gossip_stop_honoured(&s, 8800));
        assert_true(gossip_stop_honoured(&s, 8812));  /* exactly ours */
        assert_false(gossip_stop_honoured(&s, 8813)); /* ours is higher */
        assert_false(gossip_stop_honoured(&s, 0));    /* we have none */
        s.reason = GOSSIP_STOP_NONE;
        assert_false(gossip_stop_honoured(&s, 8800));
        s.reason = 7; /* a later version's reason: not acted on */
        assert_false(gossip_stop_honoured(&s, 8800));
        assert_false(gossip_stop_honoured(NULL, 8800));
}

/* Judged again while a counted reason waits: not before the training
 * since the last evaluation took RECHECK_TIMES its time, at once when that
 * time is unknown, never with nothing counted. */
static void test_recheck(void **state)
{
        struct gossip_stop_tally t = {0};
        struct gossip_stop s = target(40, 7578, 7500, "n0");
        uint8_t key[GOSSIP_KEY_BYTES] = {1};

        (void)state;
        assert_false(gossip_stop_recheck_due(&t, 100.0, 0.1)); /* none */
        assert_false(gossip_stop_recheck_due(NULL, 100.0, 0.1));
        assert_int_equal(gossip_stop_count(&t, key, "n0", &s, 7500), 1);
        assert_false(gossip_stop_recheck_due(&t, 0.0, 0.1));
        assert_false(gossip_stop_recheck_due(
            &t, 0.999 * GOSSIP_STOP_RECHECK_TIMES * 0.1, 0.1));
        assert_true(gossip_stop_recheck_due(
            &t, 1.001 * GOSSIP_STOP_RECHECK_TIMES * 0.1, 0.1));
        assert_true(gossip_stop_recheck_due(&t, 0.0, 0.0)); /* unknown */
        assert_true(gossip_stop_recheck_due(&t, 0.0, NAN));
}

static void key_of(uint8_t key[GOSSIP_KEY_BYTES], int who)
{
        memset(key, 0, GOSSIP_KEY_BYTES);
        key[0] = (uint8_t)who;
        key[31] = 0xa5;
}

static void test_count_each_signer_once(void **state)
{
        struct gossip_stop_tally t = {0};
        struct gossip_stop a = target(100, 9000, 8800, "a"),
                           b = target(90, 9100, 8800, "b"),
                           low = target(80, 8000, 7500, "c");
        uint8_t k1[GOSSIP_KEY_BYTES], k2[GOSSIP_KEY_BYTES];

        (void)state;
        key_of(k1, 1);
        key_of(k2, 2);
        assert_int_equal(gossip_stop_count(&t, k1, "a", &low, 8800), 0);
        assert_int_equal(t.n, 0); /* below our target: not counted */
        assert_int_equal(gossip_stop_count(&t, k1, "a", &a, 0), 0);
        assert_int_equal(t.n, 0); /* no target of ours */
        assert_int_equal(gossip_stop_count(&t, k1, "a", &a, 8800), 1);
        /* the same signer again, under another origin name: once only */
        assert_int_equal(gossip_stop_count(&t, k1, "a", &b, 8800), 0);
        assert_int_equal(t.n, 1);
        assert_int_equal(gossip_stop_count(&t, k2, "b", &b, 8800), 1);
        assert_int_equal(t.n, 2);
        assert_int_equal(t.votes, 2); /* each said it reached it itself */
        key_of(k1, 3); /* "c" repeats a's reason: counted, not a vote */
        assert_int_equal(gossip_stop_count(&t, k1, "c", &a, 8800), 1);
        assert_int_equal(t.n, 3);
        assert_int_equal(t.votes, 2);
        assert_string_equal(t.first.origin, "a"); /* the first kept */
        assert_int_equal(t.first.step, 100);
        assert_int_equal(t.first.acc_bp, 9000);
}

static void test_count_full(void **state)
{
        static struct gossip_stop_tally t;
        struct gossip_stop a = target(1, 9000, 8800, "");
        uint8_t k[GOSSIP_KEY_BYTES] = {0};

        (void)state;
        for (int i = 0; i < GOSSIP_STOP_ORIGINS_MAX; i++) {
                k[0] = (uint8_t)i;
                k[1] = (uint8_t)(i >> 8);
                assert_int_equal(gossip_stop_count(&t, k, "", &a, 8800), 1);
        }
        k[2] = 1;
        assert_int_equal(gossip_stop_count(&t, k, "", &a, 8800), 0);
        assert_int_equal(t.n, GOSSIP_STOP_ORIGINS_MAX);
}

static void test_quorum(void **state)
{
        (void)state;
        assert_int_equal(gossip_stop_quorum(0), 2);
        assert_int_equal(gossip_stop_quorum(1), 2);
        assert_int_equal(gossip_stop_quorum(2), 2);
        assert_int_equal(gossip_stop_quorum(3), 2);
        assert_int_equal(gossip_stop_quorum(4), 2);
        assert_int_equal(gossip_stop_quorum(5), 3);
        assert_int_equal(gossip_stop_quorum(16), 8);
        assert_int_equal(gossip_stop_quorum(17), 9);
}

/* One member's word is never enough, whatever the cluster's size and
 * whatever it claims: only our own evaluation within the margin is. */
static void test_one_liar_never_enough(void **state)
{
        /* the strongest lie: in its own name (a vote) */
        struct gossip_stop lie = target(0, 10000, 0, "");
        struct gossip_stop_verdict v;
        uint8_t k[GOSSIP_KEY_BYTES];

        (void)state;
        key_of(k, 9);
        for (size_t alive = 0; alive <= 600; alive++) {
                struct gossip_stop_tally t = {0};

                assert_int_equal(gossip_stop_count(&t, k, "liar", &lie, 8800),
                                 1);
                assert_int_equal(t.votes, 1);
                assert_string_equal(t.first.origin, "liar");
                assert_int_equal(gossip_stop_decide(
                                     &t, alive, GOSSIP_STOP_NO_EVAL, 8800, &v),
                                 GOSSIP_STOP_WAIT);
                assert_int_equal(gossip_stop_decide(&t, alive, 8699, 8800, &v),
                                 GOSSIP_STOP_WAIT);
                assert_int_equal(v.have, 1);
                assert_true(v.need >= 2);
                assert_int_equal(gossip_stop_decide(&t, alive, 8700, 8800, &v),
                                 GOSSIP_STOP_BY_OWN);
        }
}

static void test_decide(void **state)
{
        struct gossip_stop_tally t = {0};
        struct gossip_stop r = target(500, 8810, 8800, "n0");
        struct gossip_stop_verdict v;
        uint8_t k[GOSSIP_KEY_BYTES];

        (void)state;
        /* nothing heard: our evaluation alone is not a cluster stop */
        assert_int_equal(gossip_stop_decide(&t, 3, 9900, 8800, &v),
                         GOSSIP_STOP_WAIT);
        key_of(k, 1);
        gossip_stop_count(&t, k, "n0", &r, 8800);
        /* no target of ours: never */
        assert_int_equal(gossip_stop_decide(&t, 3, 9900, 0, NULL),
                         GOSSIP_STOP_WAIT);
        /* 3 nodes, n0 left: 2 alive + 1 counted, 1 of 2 */
        assert_int_equal(gossip_stop_decide(&t, 2, 8750, 8800, &v),
                         GOSSIP_STOP_BY_OWN);
        assert_int_equal(v.floor_bp, 8700);
        key_of(k, 2);
        gossip_stop_count(&t, k, "n1", &r, 8800);
        /* a second member that stopped on n0's word and repeats it: it
         * asks us to evaluate, it is no vote */
        assert_int_equal(t.n, 2);
        assert_int_equal(t.votes, 1);
        assert_int_equal(
            gossip_stop_decide(&t, 1, GOSSIP_STOP_NO_EVAL, 8800, &v),
            GOSSIP_STOP_WAIT);
        assert_int_equal(v.have, 1);
        /* a third that reached the target itself (origin: its name, or
         * none): a quorum, whatever our own accuracy */
        r.origin[0] = 0;
        key_of(k, 3);
        gossip_stop_count(&t, k, "n2", &r, 8800);
        assert_int_equal(
            gossip_stop_decide(&t, 1, GOSSIP_STOP_NO_EVAL, 8800, &v),
            GOSSIP_STOP_BY_QUORUM);
        assert_int_equal(v.have, 2);
        assert_int_equal(v.need, 2);
        /* 7 alive + 3 counted = 10: 5 votes needed */
        assert_int_equal(gossip_stop_decide(&t, 7, 100, 8800, &v),
                         GOSSIP_STOP_WAIT);
        assert_int_equal(v.need, 5);
        /* a target under the margin: any accuracy of ours is near it */
        assert_int_equal(gossip_stop_decide(&t, 7, 0, 50, &v),
                         GOSSIP_STOP_BY_OWN);
}

static void test_format_wait(void **state)
{
        struct gossip_stop_verdict v = {0};
        char buf[200];

        (void)state;
        v.have = 1;
        v.need = 2;
        v.own_bp = GOSSIP_STOP_NO_EVAL;
        gossip_stop_format_wait(&v, buf, sizeof(buf));
        assert_string_equal(buf, "1 of 2 votes needed");
        v.own_bp = 7120;
        v.floor_bp = 8700;
        v.target_bp = 8800;
        gossip_stop_format_wait(&v, buf, sizeof(buf));
        assert_string_equal(buf, "1 of 2 votes needed, our accuracy "
                                 "71.20% < 87.00% (target 88.00% less 1.00 "
                                 "points)");
}

/* ---- a cluster in virtual steps -------------------------------------------
 *
 * N honest nodes train in lockstep; node i's test accuracy at step s is
 * a curve rising to 91% plus its own offset (within +-0.3 points: the
 * models are averaged) plus evaluation noise (+-0.2). Each evaluates
 * every EVAL steps and, when a reason was counted, at its next step; a
 * LEAVE reaches the others one step after it is sent. A node stops on
 * its own target (and leaves with its own reason, a vote), or when
 * gossip_stop_decide says so after an evaluation or on hearing (quorum),
 * and then leaves repeating the first reason it counted (no vote).
 *
 * Honest bound: the first node stops at its evaluation at step s0; the
 * others hear it during s0 + 1 and evaluate at its end (as the trainer
 * does, node/trainer.c): their accuracy is at least the first's less
 * 0.6 (offsets) and 0.4 (noise), above target - margin, so all have
 * stopped by s0 + 1, and none at s0 unless it reached the target itself
 * (not yet at s0).
 * Liar: it leaves at step 0 claiming 99%; no honest node may stop
 * before its own accuracy is within the margin. */
enum { SIM_NODES = 5, SIM_EVAL = 50, SIM_STEPS = 20000 };

static uint64_t sim_rng;

static double sim_uniform(void)
{
        uint64_t x = (sim_rng += 0x9e3779b97f4a7c15ull);

        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
        return (double)(x >> 11) / 9007199254740992.0; /* [0, 1) */
}

struct sim_node {
        struct gossip_stop_tally t;
        double offset;
        int stopped, ask_eval;
        uint64_t stop_step;
        double acc_at_stop;
};

static double sim_acc(const struct sim_node *n, uint64_t step)
{
        return 91.0 * (1.0 - exp(-(double)step / 800.0)) + n->offset +
               0.4 * (sim_uniform() - 0.5);
}

/* Run the cluster; liar: one member left at step 0 with a 99% reason.
 * Returns the step of the first stop. */
static uint64_t sim_run(struct sim_node *nd, int liar, uint32_t target_bp)
{
        /* the liar's reason in its own name: a vote */
        struct gossip_stop lie = target(0, 9900, 8800, ""), leave[SIM_NODES];
        char name[16];
        int sent[SIM_NODES] = {0}; /* 1: a LEAVE in flight this step */
        uint64_t first = UINT64_MAX;
        uint8_t k[GOSSIP_KEY_BYTES];

        for (int i = 0; i < SIM_NODES; i++) {
                memset(&nd[i], 0, sizeof(nd[i]));
                nd[i].offset = 0.6 * (sim_uniform() - 0.5);
                if (liar) {
                        key_of(k, 200);
                        nd[i].ask_eval = gossip_stop_count(&nd[i].t, k, "liar",
                                                           &lie, target_bp);
                }
        }
        for (uint64_t s = 1; s <= SIM_STEPS; s++) {
                int arrived[SIM_NODES];
                size_t alive = 0;

                memcpy(arrived, sent, sizeof(sent));
                memset(sent, 0, sizeof(sent));
                for (int i = 0; i < SIM_NODES; i++)
                        alive += !nd[i].stopped;
                for (int i = 0; i < SIM_NODES; i++) {
                        struct sim_node *n = &nd[i];
                        int stop = 0, own = 0, rule;
                        double acc;

                        if (n->stopped)
                                continue;
                        for (int j = 0; j < SIM_NODES; j++) {
                                if (!arrived[j])
                                        continue;
                                key_of(k, j);
                                snprintf(name, sizeof(name), "n%d", j);
                                if (gossip_stop_count(&n->t, k, name, &leave[j],
                                                      target_bp))
                                        n->ask_eval = 1;
                        }
                        rule = gossip_stop_decide(
                            &n->t, alive, GOSSIP_STOP_NO_EVAL, target_bp, NULL);
                        stop = rule != GOSSIP_STOP_WAIT;
                        acc = sim_acc(n, s);
                        if (!stop && (s % SIM_EVAL == 0 || n->ask_eval)) {
                                n->ask_eval = 0;
                                own = gossip_stop_bp(acc) >= target_bp;
                                stop = own ||
                                       gossip_stop_decide(
                                           &n->t, alive, gossip_stop_bp(acc),
                                           target_bp, NULL) != GOSSIP_STOP_WAIT;
                        }
                        if (!stop)
                                continue;
                        n->stopped = 1;
                        n->stop_step = s;
                        n->acc_at_stop = acc;
                        /* our own reason (a vote), or the one we heard */
                        leave[i] =
                            own || !n->t.n
                                ? target(s, gossip_stop_bp(acc), target_bp, "")
                                : n->t.first;
                        sent[i] = 1;
                        if (s < first)
                                first = s;
                }
        }
        return first;
}

static void test_sim_honest(void **state)
{
        struct sim_node nd[SIM_NODES];
        uint64_t seed =
            getenv("GN_SEED") ? strtoull(getenv("GN_SEED"), 0, 0) : 33;

        (void)state;
        printf("# GN_SEED=%llu\n", (unsigned long long)seed);
        for (int run = 0; run < 50; run++) {
                uint64_t s0;

                sim_rng = seed * 1000 + (uint64_t)run;
                s0 = sim_run(nd, 0, 8800);
                assert_true(s0 < SIM_STEPS);
                for (int i = 0; i < SIM_NODES; i++) {
                        if (!nd[i].stopped || nd[i].stop_step > s0 + 1)
                                fail_msg("seed %llu run %d: n%d stopped %d "
                                         "at %llu, first at %llu",
                                         (unsigned long long)seed, run, i,
                                         nd[i].stopped,
                                         (unsigned long long)nd[i].stop_step,
                                         (unsigned long long)s0);
                        /* not yet at s0, unless its own target */
                        if (nd[i].stop_step == s0)
                                assert_true(gossip_stop_bp(nd[i].acc_at_stop) >=
                                            8800);
                }
        }
}

static void test_sim_liar(void **state)
{
        struct sim_node nd[SIM_NODES];
        uint64_t seed =
            getenv("GN_SEED") ? strtoull(getenv("GN_SEED"), 0, 0) : 33;

        (void)state;
        printf("# GN_SEED=%llu\n", (unsigned long long)seed);
        for (int run = 0; run < 50; run++) {
                uint64_t s0;

                sim_rng = seed * 1000 + (uint64_t)run;
                s0 = sim_run(nd, 1, 8800);
                /* 91% * (1 - exp(-s/800)) + 0.5 reaches 87% near step
                 * 2400: nobody stops before step 2000 */
                if (s0 < 2000)
                        fail_msg("seed %llu run %d: first stop at %llu",
                                 (unsigned long long)seed, run,
                                 (unsigned long long)s0);
                /* each stopped at its own evaluation within the margin:
                 * those that stopped on the liar's word repeat it, and a
                 * repeat is no vote, so no quorum forms for the rest */
                for (int i = 0; i < SIM_NODES; i++) {
                        uint32_t want = 8700;

                        if (!nd[i].stopped ||
                            gossip_stop_bp(nd[i].acc_at_stop) < want)
                                fail_msg("seed %llu run %d: n%d at %.2f%%, "
                                         "step %llu, first %llu",
                                         (unsigned long long)seed, run, i,
                                         nd[i].acc_at_stop,
                                         (unsigned long long)nd[i].stop_step,
                                         (unsigned long long)s0);
                }
        }
}

static void test_format(void **state)
{
        struct gossip_stop s = target(1432, 8812, 8800, "pi-kitchen");
        char buf[160];
        int n;

        (void)state;
        n = gossip_stop_format(&s, buf, sizeof(buf));
        assert_string_equal(buf, "stopped: pi-kitchen reached target 88.0% "
                                 "at step 1432 (test accuracy 88.12%)");
        assert_int_equal(n, (int)strlen(buf));
        s.origin[0] = 0;
        gossip_stop_format(&s, buf, sizeof(buf));
        assert_non_null(strstr(buf, "stopped: a peer reached"));
        gossip_stop_format(&s, buf, 10); /* cut, terminated */
        assert_int_equal(strlen(buf), 9);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bp),
            cmocka_unit_test(test_honoured),
            cmocka_unit_test(test_recheck),
            cmocka_unit_test(test_count_each_signer_once),
            cmocka_unit_test(test_count_full),
            cmocka_unit_test(test_quorum),
            cmocka_unit_test(test_one_liar_never_enough),
            cmocka_unit_test(test_decide),
            cmocka_unit_test(test_format_wait),
            cmocka_unit_test(test_sim_honest),
            cmocka_unit_test(test_sim_liar),
            cmocka_unit_test(test_format),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
