/*
 * sdnotify.h - the daemon's side of systemd's service protocols, written by
 * hand (docs/design.md says why not libsystemd): readiness and status
 * datagrams to $NOTIFY_SOCKET, the watchdog period from $WATCHDOG_USEC, and
 * whether stderr is the journal ($JOURNAL_STREAM), so log lines can carry
 * "<N>" priority prefixes.
 *
 * Outside systemd every call is a cheap no-op (the variables are unset).
 * All calls are safe from any thread: each notification is one sendmsg on
 * its own socket, and nothing is cached.
 */
#ifndef NODE_SDNOTIFY_H
#define NODE_SDNOTIFY_H

#include <stdint.h>

/* Send one notification ("READY=1", "STATUS=...", "WATCHDOG=1", lines
 * joined by '\n'). 1 sent, 0 not under systemd ($NOTIFY_SOCKET unset), or
 * a negative errno (a path too long, the socket gone, ...). */
int node_sd_notify(const char *msg);

/* The watchdog period in microseconds if systemd expects pings from this
 * process ($WATCHDOG_USEC set, $WATCHDOG_PID unset or ours), else 0. */
uint64_t node_sd_watchdog_usec(void);

/* The watchdog policy: 1 if a ping is due to systemd now, i.e. the node
 * is ready and either its trainer has finished (leaving) or its progress
 * counter moved less than one period wd_ms ago (at moved_ms); 0 lets the
 * watchdog fire. Pure; times in the same clock's milliseconds. */
int node_sd_healthy(int ready, int running, uint64_t now_ms, uint64_t moved_ms,
                    uint64_t wd_ms);

/* 1 if file descriptor fd is the journal's stream ($JOURNAL_STREAM names
 * its device and inode), else 0. */
int node_sd_journal_stream(int fd);

#endif
