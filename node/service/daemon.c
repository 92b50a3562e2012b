/*
 * daemon.c - the loop thread: signals, the trainer's thread, the cluster,
 * the control socket and the metrics endpoint.
 *
 * A run: set-up (event log; trainer: the model's size only; cluster: key,
 * peers, transport, protocol; control socket; metrics), loop, tear-down.
 * The node joins first: the training thread waits until the join is
 * through (on_load_timer), then loads the data, the model and the
 * checkpoint (and runs BLIS's kernel probe if main() left it) while the
 * loop already answers membership, gossipctl and metrics; the train state
 * says `loading` until then (docs/design.md, "Join first").
 * The run ends when the trainer has finished (a stop criterion, or a stop
 * asked by SIGTERM/SIGINT or the control command "leave") and, in a
 * cluster, the leave has been announced and has lingered long enough to
 * go out. With --after-train serve a stop criterion does not end the run:
 * the training thread is joined, the node stays a member and answers state
 * requests, gossipctl and metrics from the loop alone, and only a stop
 * (SIGTERM/SIGINT, "leave") ends it. Then every handle is closed, the loop runs
 * dry and the trainer thread is joined. The trainer writes its final checkpoint
 * itself before it reports done, so the order "leave, checkpoint, exit 0"
 * holds.
 */
#define _GNU_SOURCE 1 /* SCHED_BATCH */
#include "service/daemon.h"
#include <sched.h>

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "nn/checkpoint.h"
#include "cluster/cluster.h"
#include "service/ctl.h"
#include "service/evlog.h"
#include "train/handoff.h"
#include "train/kernel.h"
#include "service/metrics.h"
#include "nn/nn.h"
#include "ident/peers.h"
#include "service/sdnotify.h"
#include "train/trainer.h"
#include "service/version.h"

struct daemon {
        const struct node_options *o;
        uv_loop_t loop;
        uv_signal_t sig_term, sig_int, sig_hup;
        uv_async_t done_async;
        struct node_trainer *trainer;
        struct node_trainer_hooks hooks;
        struct node_cluster *cluster;
        struct node_ctl *ctl;
        struct node_metrics *metrics;
        struct node_evlog *ev;
        int stopping, trainer_done, left, closed;
        int serving; /* training finished, thread joined (--after-train) */
        /* the load, held while the node joins (start_load): released, and
         * the loop's SCHED_BATCH once the trainer has loaded */
        uv_timer_t load_timer;
        int load_released, batch_wanted;
        uint64_t load_since; /* loop ms at start_load */
        char refused[320];   /* the cluster refused us: why ("" if not) */
        /* systemd (node/service/sdnotify.h): READY=1, STATUS= and, while
         * healthy, WATCHDOG=1, all from one loop timer */
        uv_timer_t sd_timer;
        int sd_ready;         /* READY=1 sent */
        uint64_t sd_samples;  /* trainer progress seen at the last tick */
        uint64_t sd_moved_ms; /* loop time it last moved */
        uint64_t sd_wd_ms;    /* watchdog period; 0: none */
        uint64_t sd_period;   /* tick once ready */
};

/* ---- hooks (training thread) ------------------------------------------- */

static void hook_done(void *ctx, struct node_trainer *t)
{
        struct daemon *d = ctx;

        uv_async_send(&d->done_async);
}

/* ---- shutdown (loop thread) --------------------------------------------- */

static void close_all(struct daemon *d)
{
        uv_handle_t *hs[] = {
            (uv_handle_t *)&d->sig_term, (uv_handle_t *)&d->sig_int,
            (uv_handle_t *)&d->sig_hup,  (uv_handle_t *)&d->done_async,
            (uv_handle_t *)&d->sd_timer, (uv_handle_t *)&d->load_timer};

        if (d->closed)
                return;
        d->closed = 1;
        for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
                if (!uv_is_closing(hs[i]))
                        uv_close(hs[i], NULL);
        node_ctl_close(d->ctl);
        d->ctl = NULL;
        node_metrics_close(d->metrics);
        d->metrics = NULL;
        node_cluster_close(d->cluster);
        /* d->cluster stays set: the trainer has finished with it */
}

static void maybe_close(struct daemon *d)
{
        if (d->trainer_done && (d->left || !d->cluster))
                close_all(d);
}

static void on_left(void *arg)
{
        struct daemon *d = arg;

        d->left = 1;
        maybe_close(d);
}

/* Stop training and (in a cluster) announce the leave; idempotent. */
static void begin_stop(struct daemon *d, const char *why)
{
        if (d->stopping)
                return;
        d->stopping = 1;
        node_sd_notify("STOPPING=1");
        if (why && d->serving)
                node_log(NODE_LOG_INFO,
                         "%s: stopping (training was over, serving ends)", why);
        else if (why)
                node_log(NODE_LOG_INFO, "%s: stopping after this step", why);
        node_trainer_stop(d->trainer);
        if (d->cluster)
                node_cluster_leave(d->cluster, on_left, d);
        maybe_close(d); /* serving alone: the trainer is long done */
}

/* A stop criterion was met and --after-train serve: join the training
 * thread (it has written its final checkpoint and returns at once) and
 * stay up; 0, or the trainer's error (then the run ends as usual). */
static int start_serving(struct daemon *d)
{
        struct node_train_stats st;
        int rc = node_trainer_join(d->trainer);

        if (rc)
                return rc;
        d->serving = 1;
        if (d->cluster)
                node_cluster_serve(d->cluster, d->trainer);
        node_trainer_stats(d->trainer, &st);
        node_log(NODE_LOG_INFO,
                 "training finished at step %llu: serving the model until "
                 "SIGTERM (--after-train serve)",
                 (unsigned long long)st.step);
        return 0;
}

/* Members refused us for other cluster settings and none with ours is
 * alive (node_cluster_on_refused): nobody can train with us, so the run
 * ends and node_daemon_run reports it (main exits 78: fix the setting,
 * do not restart). */
static void on_refused_out(void *arg, const char *why)
{
        struct daemon *d = arg;

        snprintf(d->refused, sizeof(d->refused), "%s", why);
        begin_stop(d, "refused by the cluster");
}

static void on_done_async(uv_async_t *a)
{
        struct daemon *d = a->data;

        d->trainer_done = 1;
        if (!d->stopping && d->o->after_train == NODE_AFTER_SERVE &&
            start_serving(d) == 0)
                return;
        if (!d->stopping && !d->cluster)
                node_sd_notify("STOPPING=1"); /* begin_stop does it else */
        if (d->cluster && !d->stopping)
                begin_stop(d, NULL); /* a stop criterion: say goodbye */
        maybe_close(d);
}

static void on_signal(uv_signal_t *s, int signum)
{
        struct daemon *d = s->data;
        char err[512];
        int rc;

        if (signum == SIGHUP) {
                rc = node_evlog_reopen(d->ev);
                if (rc)
                        node_log(NODE_LOG_ERROR,
                                 "SIGHUP: cannot reopen the event log: %s",
                                 strerror(-rc));
                if (!d->cluster)
                        node_log(NODE_LOG_INFO, "SIGHUP: no peers file");
                else if (node_cluster_reload(d->cluster, err, sizeof(err)))
                        node_log(NODE_LOG_ERROR,
                                 "SIGHUP: %s (keeping the old peers)", err);
                if (d->cluster) /* and the authority's list */
                        node_cluster_reload_crl(d->cluster);
                return;
        }
        begin_stop(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static int start_signals(struct daemon *d)
{
        struct {
                uv_signal_t *h;
                int sig;
        } s[] = {{&d->sig_term, SIGTERM},
                 {&d->sig_int, SIGINT},
                 {&d->sig_hup, SIGHUP}};
        int rc;

        for (size_t i = 0; i < 3; i++) {
                uv_signal_init(&d->loop, s[i].h);
                s[i].h->data = d;
                rc = uv_signal_start(s[i].h, on_signal, s[i].sig);
                if (rc)
                        return rc;
        }
        return 0;
}

/* ---- systemd: readiness, status, watchdog -------------------------------- */

/* v formatted with fmt, or "-" for a value not known yet (NaN). */
static const char *sd_val(char *buf, size_t n, const char *fmt, double v)
{
        if (!isfinite(v))
                return "-";
        snprintf(buf, n, fmt, v);
        return buf;
}

/* What the status line says about the exchange, where an operator looks
 * first (systemctl status): "" when it works or there is no cluster, else
 * "; exchange degraded: ..." (gossip_plan_health_say) or, while
 * training, "; alone: no peer alive". */
static const char *sd_exchange(struct daemon *d, char *buf, size_t len)
{
        struct node_handoff_stats hs;
        char why[128];

        buf[0] = '\0';
        if (!d->cluster)
                return buf;
        node_handoff_stats(node_cluster_handoff(d->cluster), &hs);
        if (hs.exchange.verdict != GOSSIP_PLAN_HEALTHY)
                snprintf(
                    buf, len, "; exchange %s",
                    gossip_plan_health_say(&hs.exchange, why, sizeof(why)));
        else if (!d->serving &&
                 node_handoff_alive(node_cluster_handoff(d->cluster)) <= 1)
                snprintf(buf, len, "; alone: no peer alive");
        return buf;
}

/* Loop, each tick: READY=1 (with the STATUS= line) once the trainer has
 * trained a sample (so any join and state fetch is over and the model is
 * ours), then STATUS= and,
 * only while healthy (node_sd_healthy(): the sample count moved within
 * one watchdog period, or the run is over), WATCHDOG=1. A wedged trainer
 * or loop stops the pings, and systemd restarts the unit. */
static void on_sd_timer(uv_timer_t *h)
{
        struct daemon *d = h->data;
        struct node_train_stats st;
        char msg[384], a[16], b[16], c[24], ex[160];
        uint64_t now = uv_now(&d->loop);
        int ready = 0;

        node_trainer_stats(d->trainer, &st);
        if (st.loss == 0 && st.acc == 0) /* no progress window yet */
                st.loss = st.acc = NAN;
        if (st.samples != d->sd_samples) {
                d->sd_samples = st.samples;
                d->sd_moved_ms = now;
        }
        /* serving without a step: resumed from a checkpoint already at
         * its stop criterion (a finished service restarted). READY=1
         * carries the whole status line: `systemctl status` right after
         * the start shows the step, not a bare word for a period. */
        if (!d->sd_ready && (st.samples > 0 || d->serving)) {
                d->sd_ready = ready = 1;
                uv_timer_set_repeat(h, d->sd_period);
        }
        snprintf(msg, sizeof(msg),
                 "%sSTATUS=%s step %llu, loss %s, acc %s, test %s%s%s",
                 ready ? "READY=1\n" : "",
                 d->serving          ? "training finished, serving: at"
                 : d->sd_ready       ? "training"
                 : !d->load_released ? "joining"
                 : st.loading        ? "loading the data"
                                     : "joining",
                 (unsigned long long)st.step,
                 sd_val(c, sizeof(c), "%.3f", st.loss),
                 sd_val(a, sizeof(a), "%.1f%%", st.acc),
                 sd_val(b, sizeof(b), "%.1f%%", st.test_acc),
                 sd_exchange(d, ex, sizeof(ex)),
                 !ready && node_sd_healthy(d->sd_ready, st.running, now,
                                           d->sd_moved_ms, d->sd_wd_ms)
                     ? "\nWATCHDOG=1"
                     : "");
        node_sd_notify(msg);
}

/* Loop: start the timer if systemd listens: every 200 ms until ready (so
 * READY=1 follows the first step closely), then every 5 s or half the
 * watchdog period, whichever is shorter. */
static void sd_start(struct daemon *d)
{
        d->sd_period = 5000;
        if (!getenv("NOTIFY_SOCKET"))
                return;
        d->sd_wd_ms = node_sd_watchdog_usec() / 1000;
        if (d->sd_wd_ms && d->sd_wd_ms / 2 < d->sd_period)
                d->sd_period = d->sd_wd_ms / 2 ? d->sd_wd_ms / 2 : 1;
        d->sd_moved_ms = uv_now(&d->loop);
        uv_timer_start(&d->sd_timer, on_sd_timer, 200, 200);
}

/* ---- control socket and metrics (loop thread) ---------------------------- */

/* "exchange": is averaging working ("ok", "degraded: ..."); nil when
 * training alone (gossip/plan.h, gossip_plan_health). */
static void pack_exchange(struct daemon *d, msgpack_packer *pk)
{
        struct node_handoff_stats hs;
        char why[128];

        node_ctl_pack_str(pk, "exchange");
        if (!d->cluster) {
                msgpack_pack_nil(pk);
                return;
        }
        node_handoff_stats(node_cluster_handoff(d->cluster), &hs);
        node_ctl_pack_str(
            pk, gossip_plan_health_say(&hs.exchange, why, sizeof(why)));
}

/* "loading" (data, model, kernels: not training yet), "training",
 * "serving" (finished, still a member) or "finished". */
static const char *train_state(const struct daemon *d,
                               const struct node_train_stats *st)
{
        if (st->running || !st->stop_reason) /* or not started yet */
                return st->loading ? "loading" : "training";
        return d->serving ? "serving" : "finished";
}

static void pack_train(struct daemon *d, msgpack_packer *pk)
{
        struct node_train_stats st;

        node_trainer_stats(d->trainer, &st);
        msgpack_pack_map(pk, 29);
        pack_exchange(d, pk);
        node_ctl_pack_kstr(pk, "state", train_state(d, &st));
        node_ctl_pack_ku64(pk, "step", st.step);
        node_ctl_pack_ku64(pk, "rollbacks_nonfinite", st.rollbacks_nonfinite);
        node_ctl_pack_ku64(pk, "rollbacks_loss", st.rollbacks_loss);
        node_ctl_pack_ku64(pk, "rollbacks_chance", st.rollbacks_chance);
        node_ctl_pack_ku64(pk, "rollbacks_norm", st.rollbacks_norm);
        node_ctl_pack_ku64(pk, "rollbacks_accuracy", st.rollbacks_accuracy);
        node_ctl_pack_ku64(pk, "health_snapshot_step", st.health_snapshot_step);
        node_ctl_pack_ku64(pk, "epoch", st.epoch);
        node_ctl_pack_ku64(pk, "samples", st.samples);
        node_ctl_pack_ku64(pk, "extra_batches", st.extra_batches);
        node_ctl_pack_ku64(pk, "steps_skipped", st.steps_skipped);
        node_ctl_pack_ku64(pk, "refetches", st.refetches);
        node_ctl_pack_kdbl(pk, "pace_ratio", st.pace_ratio);
        node_ctl_pack_kdbl(pk, "step_pace_ms", st.step_pace_ms);
        node_ctl_pack_kdbl(pk, "step_max_ms", st.step_max_ms);
        node_ctl_pack_ku64(pk, "step_max_at", st.step_max_at);
        node_ctl_pack_kdbl(pk, "step_max_wait_ms", st.step_max_wait_ms);
        node_ctl_pack_ku64(pk, "steps_slow", st.steps_slow);
        node_ctl_pack_kdbl(pk, "slow_ms", st.slow_ms);
        node_ctl_pack_kdbl(pk, "slow_wait_ms", st.slow_wait_ms);
        node_ctl_pack_kdbl(pk, "loss", st.loss);
        node_ctl_pack_kdbl(pk, "train_acc", st.acc / 100.0);
        node_ctl_pack_kdbl(pk, "test_acc", st.test_acc / 100.0);
        node_ctl_pack_kdbl(pk, "samples_per_s", st.sps);
        node_ctl_pack_kdbl(pk, "lr", st.lr);
        node_ctl_pack_kstr(pk, "model", node_trainer_spec(d->trainer));
        node_ctl_pack_kbool(pk, "running", st.running);
}

static int ctl_handler(void *ctx, const char *cmd, const msgpack_object *args,
                       msgpack_packer *data, char *err, size_t errlen)
{
        struct daemon *d = ctx;

        if (strcmp(cmd, "train") == 0) {
                pack_train(d, data);
                return 0;
        }
        if (strcmp(cmd, "leave") == 0) {
                msgpack_pack_map(data, 1);
                node_ctl_pack_kbool(data, "leaving", 1);
                begin_stop(d, "control: leave");
                return 0;
        }
        if (d->cluster)
                return node_cluster_ctl(d->cluster, d->trainer, cmd, args, data,
                                        err, errlen);
        if (!strcmp(cmd, "members") || !strcmp(cmd, "stats") ||
            !strcmp(cmd, "certs") || !strcmp(cmd, "join") ||
            !strcmp(cmd, "force-leave")) {
                snprintf(err, errlen, "%s: not in a cluster (no --peers)", cmd);
                return -ENOTSUP;
        }
        snprintf(err, errlen, "unknown command: %s", cmd);
        return -ENOTSUP;
}

static void metrics_fill(void *ctx, struct node_metrics_buf *b)
{
        struct daemon *d = ctx;
        struct node_train_stats st;

        node_trainer_stats(d->trainer, &st);
        node_metrics_counter(b, "train_steps_total", "Optimizer steps taken",
                             st.step);
        node_metrics_counter(b, "train_samples_total",
                             "Training samples processed this run", st.samples);
        node_metrics_counter(b, "train_extra_batches_total",
                             "Batches trained while waiting for a partner "
                             "(--fill-batches)",
                             st.extra_batches);
        node_metrics_counter(b, "train_steps_skipped_total",
                             "Steps skipped, not trained, to catch up with "
                             "partners ahead (part of train_steps_total)",
                             st.steps_skipped);
        node_metrics_counter(b, "train_refetches_total",
                             "Times this node, far behind every partner, "
                             "took a peer's state",
                             st.refetches);
        node_metrics_counter(b, "train_slow_steps_total",
                             "Steps that took over twice the median step "
                             "(evaluations and checkpoints not counted)",
                             st.steps_slow);
        node_metrics_family(b, "train_slow_step_seconds_total",
                            NODE_METRICS_COUNTER, "Time of those steps");
        node_metrics_sample(b, "train_slow_step_seconds_total", NULL, 0,
                            st.slow_ms / 1e3);
        node_metrics_family(b, "train_slow_step_wait_seconds_total",
                            NODE_METRICS_COUNTER,
                            "Of it, waiting for partners' slices");
        node_metrics_sample(b, "train_slow_step_wait_seconds_total", NULL, 0,
                            st.slow_wait_ms / 1e3);
        node_metrics_gauge(b, "train_pace_ratio",
                           "Steps passed per step trained over the last "
                           "512 or so (1: never behind; a slower device "
                           "skips to its partners' pace)",
                           st.pace_ratio);
        node_metrics_gauge(b, "train_step_median_seconds",
                           "Median time of the last 128 steps (0: fewer "
                           "than 16 timed)",
                           st.step_pace_ms / 1e3);
        node_metrics_gauge(b, "train_step_max_seconds",
                           "The run's longest step (0: none judged yet)",
                           st.step_max_ms / 1e3);
        node_metrics_family(b, "train_rollbacks_total", NODE_METRICS_COUNTER,
                            "Model-health rollbacks to the last good "
                            "snapshot, by cause");
        node_metrics_sample(b, "train_rollbacks_total",
                            &(struct node_metrics_label){"reason", "nonfinite"},
                            1, (double)st.rollbacks_nonfinite);
        node_metrics_sample(b, "train_rollbacks_total",
                            &(struct node_metrics_label){"reason", "loss"}, 1,
                            (double)st.rollbacks_loss);
        node_metrics_sample(b, "train_rollbacks_total",
                            &(struct node_metrics_label){"reason", "chance"}, 1,
                            (double)st.rollbacks_chance);
        node_metrics_sample(b, "train_rollbacks_total",
                            &(struct node_metrics_label){"reason", "norm"}, 1,
                            (double)st.rollbacks_norm);
        node_metrics_sample(b, "train_rollbacks_total",
                            &(struct node_metrics_label){"reason", "accuracy"},
                            1, (double)st.rollbacks_accuracy);
        node_metrics_gauge(b, "train_epoch", "Completed passes over the shard",
                           st.epoch);
        node_metrics_gauge(b, "train_loss", "Mean training loss, last window",
                           st.loss);
        node_metrics_gauge(b, "train_accuracy",
                           "Training accuracy, last window (0..1)",
                           st.acc / 100.0);
        node_metrics_gauge(b, "test_accuracy",
                           "Test accuracy at the last evaluation (0..1)",
                           st.test_acc / 100.0);
        node_metrics_gauge(b, "samples_per_second",
                           "Training throughput, last window", st.sps);
        node_metrics_gauge(b, "learning_rate", "Learning rate", st.lr);
        if (d->cluster)
                node_cluster_metrics(d->cluster, d->trainer, b);
}

static int open_services(struct daemon *d, char *err, size_t errlen)
{
        const struct node_options *o = d->o;
        struct node_ctl_config cc = {0};
        struct gossip_addr ma;
        int rc;

        if (o->control_path) {
                cc.path = o->control_path;
                cc.handler = ctl_handler;
                cc.ctx = d;
                rc = node_ctl_open(&d->ctl, &d->loop, &cc);
                if (rc) {
                        snprintf(err, errlen, "--control %s: %s",
                                 o->control_path, strerror(-rc));
                        return rc;
                }
        }
        if (o->metrics_addr) {
                rc = node_addr_parse(o->metrics_addr, &ma, 1);
                if (rc == 0)
                        rc = node_metrics_open(&d->metrics, &d->loop, &ma,
                                               metrics_fill, d);
                if (rc) {
                        snprintf(err, errlen, "--metrics %s: %s",
                                 o->metrics_addr, strerror(-rc));
                        return rc;
                }
        }
        return 0;
}

/* ---- the run ------------------------------------------------------------- */

static int setup(struct daemon *d, char *err, size_t errlen)
{
        const struct node_options *o = d->o;
        int rc;

        if (o->event_log) {
                rc = node_evlog_open(o->event_log, o->name ? o->name : "node",
                                     &d->ev);
                if (rc) {
                        snprintf(err, errlen, "--event-log %s: %s",
                                 o->event_log, strerror(-rc));
                        return rc;
                }
        }
        d->hooks.on_done = hook_done;
        d->hooks.ctx = d;
        /* the size only: the load runs on the training thread */
        rc = node_trainer_create(o, &d->hooks, d->ev, &d->trainer, err, errlen);
        if (rc)
                return rc;
        rc = uv_loop_init(&d->loop);
        if (rc) {
                snprintf(err, errlen, "libuv: %s", uv_strerror(rc));
                return rc;
        }
        uv_async_init(&d->loop, &d->done_async, on_done_async);
        d->done_async.data = d;
        uv_timer_init(&d->loop, &d->sd_timer);
        d->sd_timer.data = d;
        uv_timer_init(&d->loop, &d->load_timer);
        d->load_timer.data = d;
        rc = start_signals(d);
        if (rc) {
                snprintf(err, errlen, "signals: %s", uv_strerror(rc));
                return rc;
        }
        if (node_options_clustered(o)) {
                rc = node_cluster_open(&d->cluster, &d->loop, o, d->ev,
                                       node_trainer_nparams(d->trainer), err,
                                       errlen);
                if (rc)
                        return rc;
                node_trainer_attach(d->trainer,
                                    node_cluster_handoff(d->cluster));
                node_cluster_on_refused(d->cluster, on_refused_out, d);
                node_evlog_set_name(d->ev, node_cluster_name(d->cluster));
        }
        return open_services(d, err, errlen);
}

/* When the trainer does not block on a partner (--wait-ms 0, or extra
 * batches with --fill-batches instead of idling) the loop thread runs
 * SCHED_BATCH: a wake-up (a frame arriving, the trainer posting a
 * slice) then no longer preempts the training thread on a busy core; the
 * loop runs at the next tick instead, or at once on an idle core, with the
 * same CPU share. Measured, 4 nodes on 2 cores without waits: compute
 * efficiency 87-88% -> 94-96%. With waits it is not used: a partner's
 * slice then leaves up to a tick later, more 2 ms waits time out, and
 * fewer runs reached 88% (docs/history/cluster-tuning.md #20, #25). Called
 * once the load is over (on_load_timer); the trainer's thread was created
 * before and keeps SCHED_OTHER. */
static void loop_thread_batch(void)
{
        struct sched_param sp;

        memset(&sp, 0, sizeof(sp));
        if (sched_setscheduler(0, SCHED_BATCH, &sp))
                node_log(NODE_LOG_DEBUG, "SCHED_BATCH: %s", strerror(errno));
}

/* Join first, then load (docs/design.md, "Join first"): on one core
 * share the load (data, model, the kernel probe's children) would take
 * CPU from the loop while it joins and greets. The trainer's load waits
 * until the cluster says the join is through or has taken long enough
 * (node_cluster_may_load), or a stop. The loop stays SCHED_OTHER until the
 * load is over, so the membership's wake-ups preempt it meanwhile. */
static void on_load_timer(uv_timer_t *h)
{
        struct daemon *d = h->data;
        struct node_train_stats st;

        if (!d->load_released &&
            (d->stopping || !d->cluster || node_cluster_may_load(d->cluster))) {
                d->load_released = 1;
                if (d->cluster && !d->stopping)
                        node_log(
                            NODE_LOG_INFO,
                            "loading the data, %.2f s after the join began",
                            (double)(uv_now(&d->loop) - d->load_since) / 1e3);
                node_trainer_release(d->trainer);
                uv_timer_set_repeat(h, 100);
        }
        if (!d->load_released)
                return;
        node_trainer_stats(d->trainer, &st);
        if (st.loading && !d->trainer_done)
                return;
        if (d->batch_wanted && !d->stopping)
                loop_thread_batch();
        uv_timer_stop(h);
}

static void start_load(struct daemon *d)
{
        d->batch_wanted = d->o->wait_ms == 0 || d->o->fill_batches;
        d->load_since = uv_now(&d->loop);
        uv_timer_start(&d->load_timer, on_load_timer, 0, 10);
}

int node_daemon_run(const struct node_options *o, char *err, size_t errlen)
{
        struct daemon d;
        int rc, loop_ok;

        memset(&d, 0, sizeof(d));
        d.o = o;
        rc = setup(&d, err, errlen);
        loop_ok = d.done_async.loop != NULL;
        if (rc == 0)
                node_log(NODE_LOG_INFO, "gossipnode %s, %s", node_version(),
                         node_kernel_pending()
                             ? "BLIS kernels to be measured while the data "
                               "loads"
                             : node_kernel_summary());
        if (rc == 0) {
                node_trainer_hold(d.trainer);
                rc = node_trainer_start(d.trainer);
                if (rc)
                        snprintf(err, errlen, "start: %s", strerror(-rc));
                if (rc == 0) {
                        start_load(&d);
                        sd_start(&d);
                }
        }
        if (loop_ok) {
                if (rc) {
                        d.trainer_done = 1;
                        d.left = 1;
                        close_all(&d);
                }
                uv_run(&d.loop, UV_RUN_DEFAULT);
                uv_loop_close(&d.loop);
        }
        if (rc == 0) {
                rc = node_trainer_join(d.trainer);
                if (rc && node_trainer_error(d.trainer)[0])
                        snprintf(err, errlen, "%s",
                                 node_trainer_error(d.trainer));
                else if (rc) /* never an empty message */
                        snprintf(err, errlen, "training failed: %s",
                                 nn_strerror(rc));
        }
        if (rc == 0 && d.refused[0]) {
                snprintf(err, errlen, "%s", d.refused);
                rc = NODE_DAEMON_REFUSED;
        }
        node_trainer_free(d.trainer);
        node_evlog_close(d.ev);
        return rc;
}
