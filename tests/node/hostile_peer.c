/*
 * hostile_peer.c - a trusted peer that lies: it holds a key from the peers
 * file, joins a real cluster on loopback like any gossipnode, and for the
 * whole run pushes parameter slices that are wrong in every way we know:
 *
 *   huge     every value 1e30 (fp32 payload)
 *   flip     the cluster's trained model, sign-flipped
 *   noise    N(0,1) values
 *   scale10  the trained model x 10
 *   stale    the step-0 model (same --seed as the cluster), labelled step 0
 *   nan      the trained model with NaN and Inf in it
 *
 * It learns "the trained model" by averaging in the slices the honest
 * nodes send it (it is in their schedule like anyone; it never trains).
 * Every PERIOD_MS it sends, to every live peer, the next attack in turn
 * twice: once at a step for which the schedule names it that peer's
 * sender (so only the content guards can stop it) and once at the peer's
 * next step (refused as not_partner when it is not the sender then).
 *
 *   usage: hostile_peer ATTACKS SECONDS [gossipnode options...]
 *   ATTACKS: comma list of the names above, or "all"; or "NAME@STEP" for a
 *   one-time poisoning: that attack, sent once to every live peer as soon
 *   as one has reached STEP, then nothing more (the model-health test);
 *   or "stop": a forged cluster-wide stop, sent at once: as soon as two
 *   peers are alive it leaves with a TARGET reason claiming 99% at step
 *   0 in its own name (the strongest lie: a vote, gossip/stop.h), then
 *   sends nothing more
 *
 * Prints what it sent, per attack, on exit (0; 1 on set-up errors). Used
 * by tests/node/test_hostile_run.py; see docs/reliability.md.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "cluster/cluster.h"
#include "gossip/codec.h"
#include "service/evlog.h"
#include "nn/nn.h"
#include "config/options.h"
#include "cluster/view.h"
#include "train/handoff.h"
#include "gossip/schedule.h"

/* A lie every 25 ms to each peer (a step takes ~20-100 ms here); our
 * turns looked for 16 steps ahead; "stale" labelled 200 steps back. */
enum { PERIOD_MS = 25, AHEAD_STEPS = 16, STALE_STEPS = 200 };
enum attack { HUGE, FLIP, NOISE, SCALE10, STALE, NANV, NATTACKS };
static const char *attack_names[NATTACKS] = {"huge",    "flip",  "noise",
                                             "scale10", "stale", "nan"};

struct hostile {
        struct node_cluster *c;
        struct node_options o;
        uv_timer_t tick, end;
        uv_signal_t term;
        struct gossip_codec enc; /* fp32: exact lies */
        float *init, *copy, *lie;
        size_t n;
        uint8_t *buf;
        size_t cap;
        int on[NATTACKS];
        int next;
        uint64_t once_at; /* NAME@STEP: fire once at STEP (0: every tick) */
        int fired;
        int stop_lie; /* "stop": leave with a forged TARGET reason */
        uint64_t sent[NATTACKS], sent_partner[NATTACKS];
        uint64_t rng;
};

static uint64_t rnd(uint64_t *s)
{
        uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
}

static float normal(uint64_t *s)
{
        double u1 = ((double)(rnd(s) >> 11) + 1.0) / 9007199254740993.0;
        double u2 = (double)(rnd(s) >> 11) / 9007199254740992.0;

        return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* The lie of kind a for [lo, lo + count) into h->lie. */
static void make_lie(struct hostile *h, int a, size_t lo, size_t count)
{
        for (size_t i = 0; i < count; i++) {
                float m = h->copy[lo + i];

                switch (a) {
                case HUGE:
                        h->lie[i] = 1e30f;
                        break;
                case FLIP:
                        h->lie[i] = -m;
                        break;
                case NOISE:
                        h->lie[i] = normal(&h->rng);
                        break;
                case SCALE10:
                        h->lie[i] = 10.0f * m;
                        break;
                case STALE:
                        h->lie[i] = h->init[lo + i];
                        break;
                default:
                        h->lie[i] = m;
                }
        }
}

/* Encode the lie for step's slice (NaN/Inf patched into the fp32 body,
 * which the encoder itself refuses to write). 0 or a GOSSIP_E* code. */
static int encode_lie(struct hostile *h, int a, uint64_t step, size_t *len)
{
        const struct gossip_plan_cfg *p =
            node_handoff_plan(node_cluster_handoff(h->c));
        size_t lo, count;
        uint32_t part = gossip_plan_slice(p, step, &lo, &count);
        int rc;

        make_lie(h, a, lo, count);
        rc = gossip_codec_encode_part(&h->enc, part, h->lie, count, step,
                                      h->buf, h->cap, len);
        if (rc == 0 && a == NANV) {
                uint32_t nan = 0x7fc00000u, inf = 0x7f800000u;
                uint8_t *body = h->buf + GOSSIP_CODEC_HEADER_BYTES;

                memcpy(body, &nan, 4);
                memcpy(body + 4 * (count / 2), &inf, 4);
        }
        return rc;
}

/* The first step in [from, from + span) at which the schedule names us
 * member m's sender; UINT64_MAX if none. */
static uint64_t our_turn(struct hostile *h, const uint8_t *key, uint64_t from,
                         uint64_t span)
{
        struct node_view *v = node_cluster_view(h->c);

        /* the receiver's own check (node/cluster/view.h), asked for us as
         * sender */
        for (uint64_t t = from; t < from + span; t++)
                if (gossip_plan_due(
                        node_handoff_plan(node_cluster_handoff(h->c)), t) &&
                    node_view_is_sender(v, t, v->pk, key))
                        return t;
        return UINT64_MAX;
}

static void push(struct hostile *h, const struct gossip_member_info *m, int a)
{
        const struct gossip_plan_cfg *p =
            node_handoff_plan(node_cluster_handoff(h->c));
        uint64_t steps[2], k = p->avg_every ? p->avg_every : 1;
        size_t len;

        /* the next round boundary after the peer's step, and our turn */
        steps[0] = (m->step / k + 1) * k;
        steps[1] = our_turn(h, m->key, steps[0], AHEAD_STEPS);
        if (a == STALE) {
                /* labelled step 0, and at a turn of ours long past */
                steps[0] = 0;
                steps[1] = m->step > STALE_STEPS
                               ? our_turn(h, m->key, m->step - STALE_STEPS,
                                          AHEAD_STEPS * 4)
                               : UINT64_MAX;
        }
        for (int i = 0; i < 2; i++) {
                if (steps[i] == UINT64_MAX)
                        continue;
                if (encode_lie(h, a, steps[i], &len) == 0 &&
                    gossip_send_app(node_cluster_view(h->c)->g, m->key,
                                    GOSSIP_APP_PARAMS, steps[i], h->buf,
                                    len) == 0) {
                        h->sent[a]++;
                        h->sent_partner[a] += i == 1;
                }
        }
}

/* "stop": once two peers are alive, leave claiming that we reached 99%
 * at step 0 (no origin: ourselves), against any target; then nothing
 * more. */
static void lie_stop(struct hostile *h)
{
        struct gossip_stop lie = {0};

        if (h->fired || gossip_alive_count(node_cluster_view(h->c)->g) < 3) {
                node_cluster_rearm(h->c);
                return;
        }
        lie.reason = GOSSIP_STOP_TARGET;
        lie.acc_bp = 9900;
        lie.target_bp = 9900;
        if (gossip_leave_with(node_cluster_view(h->c)->g, &lie) == 0) {
                h->fired = 1;
                h->sent[0]++;
        }
        node_cluster_rearm(h->c);
}

static void on_tick(uv_timer_t *t)
{
        struct hostile *h = t->data;
        struct gossip_member_info *mi;
        uint64_t newest = 0;
        size_t n = 0;
        int a;

        if (h->stop_lie) {
                lie_stop(h);
                return;
        }
        mi = node_view_members(node_cluster_view(h->c), &n);
        for (size_t i = 1; mi && i < n; i++)
                if (mi[i].state == GOSSIP_ALIVE && mi[i].step > newest)
                        newest = mi[i].step;
        /* learn the trained model from what the honest nodes send us */
        node_handoff_average(node_cluster_handoff(h->c), newest, h->copy, h->n);
        if (h->once_at && (h->fired || newest < h->once_at)) {
                free(mi);
                node_cluster_rearm(h->c);
                return;
        }
        h->fired = 1;
        for (int tries = 0; tries < NATTACKS; tries++) {
                a = h->next;
                h->next = (h->next + 1) % NATTACKS;
                if (h->on[a])
                        break;
        }
        for (size_t i = 1; mi && i < n; i++)
                if (mi[i].state == GOSSIP_ALIVE)
                        push(h, &mi[i], a);
        free(mi);
        node_cluster_rearm(h->c);
}

static void on_end(uv_timer_t *t)
{
        struct hostile *h = t->data;

        uv_timer_stop(&h->tick);
        uv_stop(t->loop);
}

static void on_term(uv_signal_t *s, int signum)
{
        (void)signum;
        uv_stop(s->loop);
}

static int parse_attacks(struct hostile *h, const char *s)
{
        char buf[256], *tok, *save = NULL;

        if (strcmp(s, "all") == 0) {
                for (int a = 0; a < NATTACKS; a++)
                        h->on[a] = 1;
                return 0;
        }
        if (strcmp(s, "stop") == 0) {
                h->stop_lie = 1;
                return 0;
        }
        snprintf(buf, sizeof(buf), "%s", s);
        if ((tok = strchr(buf, '@'))) {
                *tok++ = '\0';
                h->once_at = strtoull(tok, NULL, 10);
                if (!h->once_at || strchr(buf, ','))
                        return -1;
        }
        for (tok = strtok_r(buf, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
                int a = 0;

                while (a < NATTACKS && strcmp(attack_names[a], tok) != 0)
                        a++;
                if (a == NATTACKS)
                        return -1;
                h->on[a] = 1;
        }
        return 0;
}

static int setup(struct hostile *h, uv_loop_t *loop, int argc, char **argv,
                 char *err, size_t errlen)
{
        struct gossip_codec_cfg cc = {0};
        struct nn_model *model = NULL;
        int rc;

        rc = node_options_parse(argc, argv, &h->o, err, errlen);
        if (rc)
                return rc;
        h->o.robust = 0; /* it must take in the honest slices to copy them */
        rc = nn_model_create(h->o.model, 1, 28, 28, h->o.seed, &model);
        if (rc) {
                snprintf(err, errlen, "model: %s", nn_strerror(rc));
                return rc;
        }
        h->n = nn_model_nparams(model);
        h->init = malloc(h->n * sizeof(float));
        h->copy = malloc(h->n * sizeof(float));
        h->lie = malloc(h->n * sizeof(float));
        if (!h->init || !h->copy || !h->lie) {
                nn_model_free(model);
                return -1;
        }
        memcpy(h->init, nn_model_params(model), h->n * sizeof(float));
        memcpy(h->copy, h->init, h->n * sizeof(float));
        nn_model_free(model);
        cc.id = GOSSIP_CODEC_FP32;
        cc.n = h->n;
        cc.parts = h->o.params_parts;
        if (gossip_codec_init(&h->enc, &cc))
                return -1;
        h->cap = gossip_codec_max_size(&h->enc);
        h->buf = malloc(h->cap);
        if (!h->buf)
                return -1;
        return node_cluster_open(&h->c, loop, &h->o, NULL, h->n, err, errlen);
}

int main(int argc, char **argv)
{
        static struct hostile h;
        uv_loop_t loop;
        char err[512] = "";
        double secs;

        if (argc < 3 || sodium_init() < 0 || nn_lib_init() != 0) {
                fprintf(stderr, "usage: hostile_peer ATTACKS SECONDS "
                                "[gossipnode options]\n");
                return 1;
        }
        h.rng = 0x4057113ull;
        secs = atof(argv[2]);
        if (parse_attacks(&h, argv[1]) || !(secs > 0)) {
                fprintf(stderr, "hostile_peer: bad attacks or seconds\n");
                return 1;
        }
        node_log_setup(stderr, "hostile", NODE_LOG_WARN);
        uv_loop_init(&loop);
        argv[2] = argv[0];
        if (setup(&h, &loop, argc - 2, argv + 2, err, sizeof(err))) {
                fprintf(stderr, "hostile_peer: %s\n",
                        err[0] ? err : "out of memory");
                return 1;
        }
        uv_timer_init(&loop, &h.tick);
        uv_timer_init(&loop, &h.end);
        h.tick.data = h.end.data = &h;
        uv_timer_start(&h.tick, on_tick, PERIOD_MS, PERIOD_MS);
        uv_timer_start(&h.end, on_end, (uint64_t)(secs * 1000), 0);
        uv_signal_init(&loop, &h.term);
        uv_signal_start(&h.term, on_term, SIGTERM);
        uv_run(&loop, UV_RUN_DEFAULT);
        if (h.stop_lie)
                printf("sent stop %llu\n", (unsigned long long)h.sent[0]);
        for (int a = 0; a < NATTACKS; a++)
                if (h.on[a])
                        printf("sent %s %llu (%llu at our scheduled turn)\n",
                               attack_names[a], (unsigned long long)h.sent[a],
                               (unsigned long long)h.sent_partner[a]);
        fflush(stdout);
        /* the process ends here: the loop's handles die with it */
        _exit(0);
}
