#!/usr/bin/python3
"""churn_fleet.py - churn at fleet size (issue 34 item 4): 16 Pi-class
devices of the fleet lab train; at about --stop-at of the run 4 of them
go away, 2 by `systemctl stop gossipnode` (a leave) and 2 by SIGKILL to
the unit's main process (a crash), and --down-s seconds later the
stopped ones are started again (`systemctl start`). The unit restarts a
killed node by itself (Restart=on-failure, RestartSec=10s in
tools/dist/gossipnode.service): that is what a device would do, so it is
let happen and reported; the `systemctl start` at --down-s is then a
no-op for those.

The target: "no stall longer than 2 steps' time on any survivor", and
the restarted ones "rejoin and end within 1 point of the rest". A stall
is read from the node's own measure (node/train/stall.h): the wall time
of one training step (its waits for partners included; evaluations and
checkpoints, which run between steps, not), against the node's pace,
the median of its last 128 steps. Per survivor and per phase it reports
the longest step and the steps over 2x the pace:
  before   from the start to the first stop
  during   from the first stop to 10 s after the restart
  after    from then to the end
("before" is the 30 s up to the first stop; the start-up before it,
16 devices loading and joining at once, is reported apart as "start".)
The phases come from each node's `step` events (every 3 s: the longest
step and the slow ones since the previous), placed by their time, so a
boundary is good to one progress tick (3 s). The pace a phase's longest
step is held against is the `slow_step` events' pace in that phase, else
the one `gossipctl train` reported just before the churn.

The peer in the same run (--control N): N more rounds of the same
training with nothing stopped, the phases cut at the same points (the
survivors' median step passing --stop-at of the run, then --down-s and
10 s): the slow steps a run has without churn, which on the lab's
quota are not few (a device at 6 % runs 1 ms of every 17 ms, so a step
moves in 17 ms stairs and any other work in the container, the loop
thread's included, costs the training thread whole periods).

For the restarted devices: rejoin (seconds from the (re)start until half
of the survivors', and all of their, event logs say it is alive again),
its first training step, and its final test accuracy against the
survivors' median.

Everything else is bench_fleet.py's (imported, not copied): the fleet
(tests/fleet/fleet: Debian 12 containers under systemd, the .deb
installed with apt, each device held to --quota % of a core), the
uncapped veth links, the training settings (MLP 784-512-10, batch 100,
lr 0.1, cosine over --epochs passes of each shard, about 30 evaluations
a run), the wait for no other fleet and a low load before each round,
and the teardown (fleet down, cgroups, namespaces) on exit, error or
signal. A round lasts about 2-3 minutes of training at --epochs 64.

Usage (root):
  /usr/bin/python3 tests/bench/fleet/churn_fleet.py --deb DEB
      [--rounds 1] [--epochs 64] [--quota 6] [--stop-at 0.27]
      [--down-s 35] [--control 1] [--out DIR] [--keep]
Prints progress, a table per round and the medians; one JSON line per
round to OUT/rounds.jsonl. Exit status 0, 1 when a round failed, 2 on
bad usage. It does not fail on a missed target: it prints it.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_fleet as bf  # noqa: E402

bc, fleet, linklab = bf.bc, bf.fleet, bf.linklab

# our own fleet name and subnet: bench_fleet's rows (fbench) wait for us
# and we for them (bf.wait_quiet counts every fleet not named bf.NAME)
bf.NAME = "fchurn"
bf.SUBNET = "10.82.0"
SIZE = 16
STOPPED = (3, 7)           # systemctl stop, started again at --down-s
KILLED = (11, 15)          # SIGKILL to the main process
BEFORE_S = 30.0            # "before" is this long, up to the churn
AFTER_RESTART_S = 10.0     # "during" ends this long after the restart
STATE_SPAN_S = 4.0         # a state served: the server's steps this near
POLL_S = 2.0


def say(msg):
    print(f"churn-fleet: {msg}", flush=True)


def since_start(evs):
    """The events of the node's last run (after its last `start`)."""
    k = max((i for i, e in enumerate(evs) if e["ev"] == "start"),
            default=0)
    return evs[k:]


class ChurnRow(bf.Row):
    def __init__(self, a, rnd, control=False):
        super().__init__(a, rnd, SIZE, "uncapped")
        self.control = control
        self.tag = f"{'control' if control else 'churn'}-r{rnd}"
        self.gone = STOPPED + KILLED
        self.survivors = [i for i in range(SIZE) if i not in self.gone]

    def stopped(self, i):
        return any(e["ev"] == "stop" for e in since_start(
            self.read_events(i)))

    def steps_now(self, idx):
        out = []
        for i in idx:
            st = [e["step"] for e in since_start(self.read_events(i))
                  if e["ev"] in ("step", "eval")]
            out.append(st[-1] if st else 0)
        return out

    def main_pid(self, i):
        out = self.sh(i, "systemctl show -p MainPID --value gossipnode",
                      check=False).strip()
        return int(out) if out.isdigit() else 0

    def churn_out(self):
        """Stop 2, kill 2; the host times (s since the epoch)."""
        t = {}
        pace = {i: self.ctl(i, "train").get("step_pace_ms")
                for i in self.survivors}
        if self.control:
            say(f"{self.tag}: the churn's time; nothing stopped (control)")
            return {i: time.time() for i in self.gone}, pace
        for i in STOPPED:
            self.sh(i, "systemctl stop --no-block gossipnode")
            t[i] = time.time()
        for i in KILLED:
            pid = self.main_pid(i)
            if not pid:
                raise fleet.FleetError(f"dev{i}: no main pid to kill")
            self.sh(i, f"kill -9 {pid}")
            t[i] = time.time()
        say(f"{self.tag}: stopped {['dev%d' % i for i in STOPPED]} "
            f"(systemctl stop), killed {['dev%d' % i for i in KILLED]} "
            f"(SIGKILL to the main pid)")
        return t, pace

    def churn_in(self):
        t = {}
        if self.control:
            return {i: (time.time(), "control") for i in self.gone}
        for i in self.gone:
            was = self.sh(i, "systemctl is-active gossipnode",
                          check=False).strip()
            self.sh(i, "systemctl start --no-block gossipnode")
            t[i] = (time.time(), was)
        say(f"{self.tag}: started them again (state before: "
            + ", ".join(f"dev{i} {w}" for i, (_, w) in t.items()) + ")")
        return t

    def run(self):
        a = self.a
        for i in range(self.n):
            self.fl.quota(i, a.quota)
        t0 = time.monotonic()
        self.t_start = time.time()
        self.each(lambda i: self.sh(i, "systemctl start --no-block "
                                    "gossipnode"))
        total = a.epochs * -(-60000 // SIZE // 100)
        self.t_out = self.t_in = None
        last = t0
        deadline = t0 + a.row_timeout
        while True:
            time.sleep(POLL_S)
            now = time.monotonic()
            if self.t_out is None:
                med = bc.median(self.steps_now(self.survivors))
                if med >= a.stop_at * total:
                    self.t_out, self.pace_before = self.churn_out()
                    self.mono_out = now
            elif self.t_in is None and now - self.mono_out >= a.down_s:
                self.t_in = self.churn_in()
            elif self.t_in is not None and all(
                    self.stopped(i) for i in range(self.n)):
                break
            if now > deadline:
                raise fleet.FleetError(f"{self.tag}: not done in "
                                       f"{a.row_timeout:.0f} s")
            if now - last > bf.PROGRESS_S:
                st = self.steps_now(range(self.n))
                say(f"{self.tag}: {now - t0:.0f} s, steps {min(st)}.."
                    f"{max(st)} of {total}, load {bf.load1():.2f}")
                last = now
        self.wall_s = time.monotonic() - t0
        self.t_end = time.time()
        train = self.each(lambda i: self.ctl(i, "train"))
        for i in range(self.n):
            self.fl.quota(i, None)
        logs = self.each(lambda i: self.sh(
            i, "journalctl -u gossipnode --no-pager -q -o cat", check=False))
        return self.result(train, logs)

    # --- what it gave ------------------------------------------------------
    def phases(self):
        t_out = min(self.t_out.values())
        t_in = max(t for t, _ in self.t_in.values())
        return [("start", self.t_start, t_out - BEFORE_S),
                ("before", t_out - BEFORE_S, t_out),
                ("during", t_out, t_in + AFTER_RESTART_S),
                ("after", t_in + AFTER_RESTART_S, self.t_end + 1)]

    def survivor(self, i, train):
        evs = self.read_events(i)
        out = {"name": self.names[i], "pace_before_ms": self.pace_before[i],
               "pace_end_ms": train.get("step_pace_ms"),
               "run_max_ms": train.get("step_max_ms"),
               "run_slow": train.get("steps_slow"),
               "final_test_acc": last_acc(evs)}
        for name, lo, hi in self.phases():
            inside = [e for e in evs if lo * 1e3 <= e["t_ms"] < hi * 1e3]
            stp = [e for e in inside if e["ev"] == "step"]
            slow = [e for e in inside if e["ev"] == "slow_step"]
            mx = max((e.get("max_ms") or 0 for e in stp), default=0)
            paces = [e["pace_ms"] for e in slow if e.get("pace_ms")]
            pace = bc.median(paces) if paces else self.pace_before[i]
            worst = max(slow, key=lambda e: e["ms"], default=None)
            nslow = sum(e.get("slow", 0) for e in stp)
            out[name] = {
                "max_ms": mx or None, "slow": nslow,
                "slow_per_min": nslow / (hi - lo) * 60 if hi > lo else None,
                "pace_ms": pace,
                "max_over_pace": mx / pace if mx and pace else None,
                "worst_told": worst and {k: worst.get(k) for k in (
                    "step", "ms", "pace_ms", "wait_ms")},
                "waited_ms": sum(e.get("wait_ms") or 0 for e in slow),
            }
        return out

    def rejoined(self, r):
        """Seconds from r's (re)start to alive in half / all of the
        survivors' views; and to its first step."""
        if r in KILLED:  # systemd may have restarted it before our start
            starts = [e["t_ms"] / 1e3 for e in self.read_events(r)
                      if e["ev"] == "start" and
                      e["t_ms"] / 1e3 > self.t_out[r]]
            back = self.t_out[r]
        else:
            starts = [e["t_ms"] / 1e3 for e in self.read_events(r)
                      if e["ev"] == "start" and
                      e["t_ms"] / 1e3 > self.t_in[r][0]]
            back = self.t_in[r][0]
        seen = []
        for i in self.survivors:
            ts = [e["t_ms"] / 1e3 for e in self.read_events(i)
                  if e["ev"] == "member" and e.get("peer") == self.names[r]
                  and e.get("state") == "alive" and e["t_ms"] / 1e3 > back]
            seen.append(min(ts) if ts else None)
        got = sorted(t for t in seen if t is not None)
        half = got[len(self.survivors) // 2 - 1] \
            if len(got) >= len(self.survivors) // 2 else None
        first_step = [e["t_ms"] / 1e3 for e in since_start(
            self.read_events(r)) if e["ev"] == "step"]
        return {
            "how": "systemctl stop" if r in STOPPED else "SIGKILL",
            "state_at_start": self.t_in[r][1],
            "back_from": "kill" if r in KILLED else "systemctl start",
            "trainer_started_s": starts[0] - back if starts else None,
            "alive_half_s": half - back if half else None,
            "alive_all_s": got[-1] - back if len(got) == len(
                self.survivors) else None,
            "first_step_s": first_step[0] - back if first_step else None,
        }

    def served(self, r):
        """The state a restarted device took (its `join` event): from
        whom, and that survivor's longest step within STATE_SPAN_S of it
        (the snapshot is copied on the server's training thread, sealed
        there over the next steps, framed and sent by its loop, all from
        the same device's CPU budget: design.md, "A state served costs
        one step")."""
        # the join comes before the run's `start` event: after the churn
        joins = [e for e in self.read_events(r) if e["ev"] == "join" and
                 e["t_ms"] / 1e3 > self.t_out[r]]
        if not joins:
            return None
        j = joins[0]
        srv = self.names.index(j["peer"]) if j["peer"] in self.names \
            else None
        if srv is None:
            return {"peer": j["peer"], "step": j["step"]}
        t = j["t_ms"] / 1e3
        near = [e for e in self.read_events(srv) if e["ev"] == "step" and
                abs(e["t_ms"] / 1e3 - t) <= STATE_SPAN_S]
        mx = max((e.get("max_ms") or 0 for e in near), default=0)
        pace = self.pace_before.get(srv)
        return {"peer": j["peer"], "step": j["step"], "server_max_ms": mx,
                "server_x_pace": mx / pace if mx and pace else None}

    def result(self, train, logs):
        for i in range(self.n):
            if self.a.keep:
                with open(os.path.join(self.workdir,
                                       f"{self.names[i]}.log"), "w") as f:
                    f.write(logs[i])
                with open(os.path.join(self.workdir,
                                       f"{self.names[i]}.events.jsonl"),
                          "w") as f, open(self.events_path(i)) as g:
                    f.write(g.read())
        surv = [self.survivor(i, train[i]) for i in self.survivors]
        med_acc = bc.median([s["final_test_acc"] for s in surv])
        back = {}
        for r in () if self.control else self.gone:
            d = self.rejoined(r)
            d["final_test_acc"] = last_acc(self.read_events(r))
            d["acc_gap"] = (d["final_test_acc"] - med_acc
                            if d["final_test_acc"] is not None and
                            med_acc is not None else None)
            d["took_state"] = self.served(r)
            d["restarts_by_systemd"] = sum(
                1 for ln in logs[r].splitlines()
                if "Scheduled restart job" in ln)
            back[self.names[r]] = d
        worst = max(surv, key=lambda s: s["during"]["max_over_pace"] or 0)
        base = max(surv, key=lambda s: s["before"]["max_over_pace"] or 0)
        return {
            "round": self.rnd, "control": self.control, "size": SIZE,
            "quota_pct": self.a.quota,
            "epochs": self.a.epochs, "wall_s": self.wall_s,
            "boot_s": self.boot_s, "setup_s": self.setup_s,
            "churn_out_s": min(self.t_out.values()) - self.t_start,
            "churn_in_s": max(t for t, _ in self.t_in.values()) -
            self.t_start,
            "survivors": surv, "restarted": back,
            "times": {"t_start": self.t_start, "t_out": self.t_out,
                      "t_in": self.t_in, "t_end": self.t_end,
                      "pace_before": self.pace_before,
                      "wall_s": self.wall_s, "boot_s": self.boot_s,
                      "setup_s": self.setup_s},
            "survivor_median_acc": med_acc,
            "worst_during": {"name": worst["name"],
                             **worst["during"]},
            "worst_before": {"name": base["name"], **base["before"]},
            "worst_start": max((s["start"]["max_over_pace"] or 0
                                for s in surv), default=None),
            "slow_per_min": {ph: bc.median([s[ph]["slow_per_min"]
                                            for s in surv])
                             for ph in ("before", "during", "after")},
        }

    # the round's lifecycle is bf.Row.go's; these are what differs

    def workdir_of(self):
        return os.path.join(self.a.out, self.tag)

    def head(self):
        return {"round": self.rnd}

    def tell(self, row):
        """No line: the caller prints the round's table."""


def last_acc(evs):
    ac = [e["test_acc"] for e in since_start(evs) if e["ev"] == "eval"
          and e.get("test_acc") is not None]
    return ac[-1] if ac else None


def f1(x, fmt="{:.1f}"):
    return "-" if x is None else fmt.format(x)


def served_cell(d):
    t = d.get("took_state")
    if not t:
        return "-"
    return (f"{t['peer']} (step {t['step']}): "
            f"{f1(t.get('server_max_ms'), '{:.0f}')} ms, "
            f"{f1(t.get('server_x_pace'), '{:.1f}')}x")


def table(r):
    out = [f"{'control (no churn) ' if r.get('control') else ''}"
           f"round {r['round']}: 16 devices at {r['quota_pct']:g} % of a "
           f"core, uncapped, {r['epochs']} passes; out at "
           f"{r['churn_out_s']:.0f} s, back at {r['churn_in_s']:.0f} s, "
           f"{r['wall_s']:.0f} s in all, load {r['load_start']:.2f} -> "
           f"{r['load_end']:.2f}",
           "| survivor | pace ms | before: longest ms, x pace (slow) | "
           "during: longest ms, x pace (slow) | after: longest ms, x pace "
           "(slow) | final acc % |",
           "|---|---|---|---|---|---|"]

    def cell(p):
        return (f"{f1(p['max_ms'], '{:.0f}')}, "
                f"{f1(p['max_over_pace'], '{:.1f}')}x ({p['slow']})")
    for s in r["survivors"]:
        out.append(f"| {s['name']} | {f1(s['pace_before_ms'])} | "
                   f"{cell(s['before'])} | {cell(s['during'])} | "
                   f"{cell(s['after'])} | "
                   f"{f1(s['final_test_acc'], '{:.2f}')} |")
    spm = r["slow_per_min"]
    out.append("slow steps per survivor per minute (median): before "
               f"{f1(spm['before'])}, during {f1(spm['during'])}, after "
               f"{f1(spm['after'])}")
    out.append(f"start-up (before the 30 s before the churn), worst "
               f"survivor: {f1(r.get('worst_start'))} x its pace")
    b = r["worst_before"]
    out.append(f"worst survivor before the churn: {b['name']}, longest "
               f"step {f1(b['max_ms'], '{:.0f}')} ms = "
               f"{f1(b['max_over_pace'], '{:.1f}')} x its pace")
    w = r["worst_during"]
    out.append(f"worst survivor during the churn: {w['name']}, longest "
               f"step {f1(w['max_ms'], '{:.0f}')} ms = "
               f"{f1(w['max_over_pace'], '{:.1f}')} x its pace "
               f"{f1(w['pace_ms'])} ms (target <= 2), {w['slow']} slow "
               f"steps; worst told: {w['worst_told']}")
    if r.get("control"):
        return "\n".join(out)
    out += ["| restarted | how | back by | rejoin: alive in half / all "
            "survivors' views, s | first step, s | state from: its longest "
            "step near it | final acc % | vs survivors' median |",
            "|---|---|---|---|---|---|---|---|"]
    for name, d in r["restarted"].items():
        out.append(f"| {name} | {d['how']} | {d['back_from']}"
                   f"{' (systemd restarted it: ' + str(d['restarts_by_systemd']) + ')' if d['restarts_by_systemd'] else ''}"
                   f" | {f1(d['alive_half_s'])} / {f1(d['alive_all_s'])} | "
                   f"{f1(d['first_step_s'])} | {served_cell(d)} | "
                   f"{f1(d['final_test_acc'], '{:.2f}')} | "
                   f"{f1(d['acc_gap'], '{:+.2f}')} |")
    out.append(f"survivors' median final accuracy "
               f"{f1(r['survivor_median_acc'], '{:.2f}')} %")
    return "\n".join(out)


def medians(rows, control=False):
    ok = [r for r in rows if not r.get("error") and
          bool(r.get("control")) == control]
    if not ok:
        return ""
    spm = {ph: bc.median([r["slow_per_min"][ph] for r in ok])
           for ph in ("before", "during", "after")}
    rate = (f"slow steps per survivor per minute, before / during / after: "
            f"{spm['before']:.1f} / {spm['during']:.1f} / "
            f"{spm['after']:.1f}")
    wo = [r["worst_during"]["max_over_pace"] for r in ok]
    wb = [r["worst_before"]["max_over_pace"] for r in ok]
    if control:
        return (f"control, medians over {len(ok)} rounds: worst survivor's "
                f"longest step in the 'during' window {bc.median(wo):.1f} x "
                f"its pace ({min(wo):.1f}-{max(wo):.1f}), in 'before' "
                f"{bc.median(wb):.1f} x; {rate}")
    wo = [r["worst_during"]["max_over_pace"] for r in ok]
    slow = [sum(s["during"]["slow"] for s in r["survivors"]) for r in ok]
    gap = [max((d["acc_gap"] for d in r["restarted"].values()
                if d["acc_gap"] is not None), key=abs) for r in ok]
    rj = [bc.median([d["alive_all_s"] for d in r["restarted"].values()])
          for r in ok]
    return (f"churn, medians over {len(ok)} rounds: worst survivor's "
            f"longest step during the churn {bc.median(wo):.1f} x its pace "
            f"({min(wo):.1f}-{max(wo):.1f}); slow steps during, all "
            f"survivors: {bc.median(slow)} ({min(slow)}-{max(slow)}); "
            f"restarted device furthest from the survivors' median "
            f"{bc.median(gap):+.2f} points; rejoin (alive to all) "
            f"{bc.median(rj):.1f} s; before the churn the worst was "
            f"{bc.median(wb):.1f} x; {rate}")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deb", default=None)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=64)
    ap.add_argument("--quota", type=float, default=6.0)
    ap.add_argument("--stop-at", type=float, default=0.27,
                    help="the churn starts when the survivors' median "
                    "step passes this share of the run")
    ap.add_argument("--down-s", type=float, default=35.0)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-load", type=float, default=1.5)
    ap.add_argument("--max-wait", type=float, default=7200)
    ap.add_argument("--row-timeout", type=float, default=1800)
    ap.add_argument("--conf", action="append", default=[],
                    dest="extra_conf", metavar="LINE")
    ap.add_argument("--delayer", default=None)
    ap.add_argument("--out", default="churn-fleet")
    ap.add_argument("--control", type=int, default=0, metavar="N",
                    help="also N control rounds: the same run, nothing "
                    "stopped, the phases at the same times (the slow "
                    "steps a run has without churn)")
    ap.add_argument("--first-round", type=int, default=1,
                    help="number the rounds from this one (to add rounds "
                    "to an earlier run's --out)")
    ap.add_argument("--report", default=None, metavar="DIR",
                    help="no run: the tables from a --keep run's DIR")
    ap.add_argument("--keep", action="store_true",
                    help="keep journals and event logs under OUT/")
    a = ap.parse_args()
    # what bench_fleet.Row reads
    a.steps, a.eval_every, a.iso_steps, a.variants = None, None, 0, {}
    if a.deb is None and not a.report:  # --report reads files only
        debs = sorted(f for f in os.listdir(a.build)
                      if f.startswith("gossipnode_") and
                      f.endswith("_amd64.deb")) \
            if os.path.isdir(a.build) else []
        if not debs:
            ap.error(f"no --deb and no gossipnode_*_amd64.deb in {a.build}")
        a.deb = os.path.join(a.build, debs[-1])
    a.deb = a.deb and os.path.abspath(a.deb)
    a.delayer = linklab.find_delayer(a.delayer or os.path.join(
        a.build, "tests", "lab", "lab_delay"))
    a.out = os.path.abspath(a.out)
    a.eval_every_for = lambda n, iso: max(10, a.epochs * 60000 //
                                          (100 * n) // 30)
    return a


def report(a):
    """--report DIR: the tables again from DIR/rounds.jsonl and the event
    logs and journals --keep left in DIR."""
    rows = []
    with open(os.path.join(a.report, "rounds.jsonl")) as f:
        for ln in f:
            old = json.loads(ln)
            if old.get("error") or "times" not in old:
                continue
            r = ChurnRow(a, old["round"], old.get("control", False))
            d = os.path.join(a.report, r.tag)
            r.events_path = lambda i, d=d: os.path.join(
                d, f"dev{i}.events.jsonl")
            tm = old["times"]
            r.t_start, r.t_end = tm["t_start"], tm["t_end"]
            r.t_out = {int(k): v for k, v in tm["t_out"].items()}
            r.t_in = {int(k): tuple(v) for k, v in tm["t_in"].items()}
            r.pace_before = {int(k): v for k, v in
                             tm["pace_before"].items()}
            r.wall_s, r.boot_s, r.setup_s = (tm["wall_s"], tm["boot_s"],
                                             tm["setup_s"])
            logs = []
            for i in range(SIZE):
                try:
                    with open(os.path.join(d, f"dev{i}.log")) as g:
                        logs.append(g.read())
                except OSError:
                    logs.append("")
            train = [{} for _ in range(SIZE)]
            for sv in old["survivors"]:  # what gossipctl said at the end
                train[r.names.index(sv["name"])] = {
                    "step_pace_ms": sv["pace_end_ms"],
                    "step_max_ms": sv["run_max_ms"],
                    "steps_slow": sv["run_slow"]}
            new = r.result(train, logs)
            new.update(load_start=old["load_start"],
                       load_end=old["load_end"])
            rows.append(new)
            print(table(new), flush=True)
    print(medians(rows))
    print(medians(rows, control=True))
    return 0


def main():
    a = parse_args()
    if a.report:
        a.keep = False
        return report(a)
    if os.geteuid() != 0:
        print("churn-fleet: needs root (the fleet lab)", file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    fleet.rootfs_add_deps("amd64", a.deb)
    linklab.trap_signals()
    rows, status = [], 0
    jl = open(os.path.join(a.out, "rounds.jsonl"), "a")
    say(f"{a.deb}; {a.rounds} round(s), 16 devices at {a.quota:g} %, "
        f"{a.epochs} passes, out at {a.stop_at:.0%} of the run, back "
        f"after {a.down_s:.0f} s; out {a.out}")
    try:
        if fleet.Fleet(bf.NAME).leftovers() or os.path.isdir(
                os.path.join(fleet.STATE_ROOT, bf.NAME)):
            say(f"a fleet {bf.NAME} is left from an earlier run: down")
            fleet.Fleet(bf.NAME).down(quiet=True)
        # interleaved: churn 1, control 1, churn 2, ... (the host drifts)
        plan = [(rnd + a.first_round - 1, ctl)
                for rnd in range(1, max(a.rounds, a.control) + 1)
                for ctl in (False, True)
                if rnd <= (a.control if ctl else a.rounds)]
        for rnd, control in plan:
            r = ChurnRow(a, rnd, control).go()
            rows.append(r)
            jl.write(json.dumps(r) + "\n")
            jl.flush()
            if r.get("error"):
                status = 1
            else:
                print(table(r), flush=True)
    except linklab.LabSignal as e:
        say(f"{e}: stopping, partial results")
        status = 1
    finally:
        try:
            fleet.Fleet(bf.NAME).down(quiet=True)
        except fleet.FleetError as e:
            say(f"teardown: {e}")
        jl.close()
    for ctl in (False, True):
        m = medians(rows, ctl)
        if m:
            print(m)
    return status


if __name__ == "__main__":
    sys.exit(main())
