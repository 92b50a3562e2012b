/*
 * evlog.h - the daemon's two outputs: human log lines and the event log.
 *
 * Human lines go to one FILE (stderr, set by main) as "[name] text", each
 * written with a single fprintf under a lock so lines from the training
 * thread and the loop thread never interleave; lines above the configured
 * level are dropped.
 *
 * The event log (--event-log FILE) is JSON lines, one object per event, for
 * tools/gossip-plot; its format is documented in docs/eventlog.md. Every
 * object starts with "t_ms" (Unix time in milliseconds), "node" and "ev".
 * Each line is formatted into a buffer and written with one write(2) on a
 * file opened O_APPEND, so several nodes may even share one file.
 *
 * Invariants: every call is safe from any thread; a NULL struct node_evlog
 * makes the event calls no-ops (no --event-log); numbers that are not
 * finite are written as null so every line stays valid JSON.
 */
#ifndef NODE_EVLOG_H
#define NODE_EVLOG_H

#include <stdint.h>
#include <stdio.h>

/* ---- human log ---------------------------------------------------------- */

/* Send human lines to out with this prefix name, dropping those whose level
 * (enum node_log_level) is above max_level. out NULL: drop everything. */
void node_log_setup(FILE *out, const char *name, int max_level);

/* Prefix each line with its syslog priority ("<3>" error ... "<7>" debug),
 * for journald when stderr is its stream (node_sd_journal_stream()). */
void node_log_set_journal(int on);

/* Change the prefix name (e.g. once the peers file has named us). */
void node_log_set_name(const char *name);

/* Write one line at level (a newline is added). */
void node_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- event log ---------------------------------------------------------- */

struct node_evlog;

/* Open (create or append) path for the events of node `name`. 0 or a
 * negative errno; on error *out is NULL. */
int node_evlog_open(const char *path, const char *name,
                    struct node_evlog **out);

/* Change the node name written from now on (NULL l is fine). */
void node_evlog_set_name(struct node_evlog *l, const char *name);

/* Open the file again by its path (after logrotate moved it: SIGHUP) and
 * write there from now on. 0 or a negative errno (the old file stays);
 * NULL l is fine. */
int node_evlog_reopen(struct node_evlog *l);

/* Close it (NULL is fine). */
void node_evlog_close(struct node_evlog *l);

/* Unix time in milliseconds (the t_ms of every event). */
uint64_t node_evlog_now_ms(void);

/* {"ev":"start","model":..,"params":N,"shard":"i/n","seed":N,"step":N,
 *  "peers":N} - step is the step resumed from (0 on a fresh start). */
void node_evlog_start(struct node_evlog *l, const char *model, uint64_t params,
                      uint32_t shard_i, uint32_t shard_n, uint64_t seed,
                      uint64_t step, uint32_t peers);

/* {"ev":"step","step":N,"epoch":E,"loss":x,"acc":x,"sps":x,"lr":x,
 *  "max_ms":x,"slow":N}
 * loss/acc: means over the steps since the previous tick (acc in %);
 * max_ms: the longest step since then (null: none judged yet), slow:
 * the steps since then slower than twice the pace (train/stall.h). */
void node_evlog_step(struct node_evlog *l, uint64_t step, uint32_t epoch,
                     double loss, double acc, double sps, double lr,
                     double max_ms, uint64_t slow);

/* {"ev":"slow_step","step":N,"ms":x,"pace_ms":x,"wait_ms":x,"held":N,
 *  "held_max_ms":x,"held_max_step":N} - one step took over twice the
 * pace (the median step): its time, the pace, its time waiting for
 * partners, and the slow steps not told since the last such line
 * (rate-limited, train/stall.h) with the longest of them and its step
 * (null, 0: none). */
void node_evlog_slow_step(struct node_evlog *l, uint64_t step, double ms,
                          double pace_ms, double wait_ms, uint64_t held,
                          double held_max_ms, uint64_t held_max_step);

/* {"ev":"eval","step":N,"epoch":E,"train_acc":x,"test_acc":x,
 *  "test_loss":x,"train_s":x,"compute_s":x,"skipped":N} (accuracies in
 * %; train_acc may be null; train_s/compute_s: training-thread seconds so
 * far; skipped: steps skipped to the partners' pace so far, not trained;
 * see docs/eventlog.md). */
void node_evlog_eval(struct node_evlog *l, uint64_t step, uint32_t epoch,
                     double train_acc, double test_acc, double test_loss,
                     double train_s, double compute_s, uint64_t skipped);

/* {"ev":"catch_up","step":N,"skipped":S}: behind every recent partner at
 * step N, this node skips S steps to their pace (gossip_plan_catch_up). */
void node_evlog_catch_up(struct node_evlog *l, uint64_t step, uint64_t skip);

/* {"ev":"member","peer":"<name>","state":"alive|suspect|dead|left"} */
void node_evlog_member(struct node_evlog *l, const char *peer,
                       const char *state);

/* {"ev":"join","peer":"<name>","step":N} - took model state from peer. */
void node_evlog_join(struct node_evlog *l, const char *peer, uint64_t step);

/* {"ev":"stop","reason":"steps|epochs|time|target|signal|error",
 *  "step":N,"epoch":E,"test_acc":x,"max_ms":x,"slow":N} - max_ms, slow:
 * the run's longest step (null: none judged) and its slow steps. */
void node_evlog_stop(struct node_evlog *l, const char *reason, uint64_t step,
                     uint32_t epoch, double test_acc, double max_ms,
                     uint64_t slow);

#endif
