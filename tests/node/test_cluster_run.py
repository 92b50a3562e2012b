#!/usr/bin/python3
"""test_cluster_run.py GOSSIPNODE KEYGEN SCENARIO [GOSSIPCTL] - real gossipnode processes
training together on 127.0.0.1 (ephemeral ports, a temporary directory, one
Fashion-MNIST shard per node). Scenarios:

  three  three nodes train a fixed number of steps: all exit 0, every model
         reaches TARGET test accuracy, and the three are within SPREAD
         percentage points of each other; a node that starts at most 8
         steps after another takes only its step, one further behind its
         model (never both, never a model from that close).
  churn  four nodes; one is killed with SIGKILL mid-training: the others
         never stall (no gap between progress events longer than the
         suspicion timeout bound, and no step longer than it by their
         own measure: the longest step and the slow ones in their event
         logs, consistent between step, slow_step and stop events) and
         mark it dead; it is restarted, rejoins,
         takes the model from a peer, and is within SPREAD points of the
         others; another gets SIGTERM and is seen as `left`; all exit 0.
  join   two nodes train; a third starts late: it takes the model from a
         peer (a join event at a step > 0) and its first evaluation is near
         the cluster's accuracy, far above a fresh model's.
  stop   the cluster-wide stop: all three have --target-acc, only n0
         evaluates on its own during the run; when n0 reaches the target
         it leaves with the reason, n1 and n2 evaluate at once (the only
         evaluation they make before the end, gossip/stop.h) and, within
         a point of the target, finish their step, write their checkpoint,
         log "stopped: n0 reached target ..." (or, when that evaluation
         reached their own target, stop as `target`) and exit 0, long
         before their --steps.
  shuffle --shuffle-samples R on n0 and n1, not on n2: n0's and n1's
         gossipctl stats show SAMPLES frames sent and received
         (authenticated: none refused), bytes = samples x (1 + 784), a
         reservoir at its bound and never over it, and reservoir samples
         trained on; n2 refuses the frames they send it and counts them
         (node samples_refused, protocol.md 3.8).
  hup    n0 and n1 trust only each other; n2 (trusting all) cannot get in;
         its key is added to their peers files and SIGHUP makes them
         accept it live; removing it again and SIGHUP drops it (dead).
  cert   joining with a certificate (issue 33 item 1): n0 and n1 trust
         each other by peers file and hold certificates of one authority;
         n2 has no peers file, only --authority, --cert and --seed-addr
         (n0's address): it is alive at n0 and n1 and they at n2, it
         trains and exchanges with them, and `gossipctl certs` at n0 shows
         its serial; n3, whose certificate another authority signed, is
         never a member and n0 counts it (stats: certs wrong_authority);
         n3 warns once, 30 s after its start, that no member answers and
         names its authority.
         Needs GOSSIPCTL.
  revoke revoking a device (issue 33 item 1): n0 and n1 trust each other
         by peers file, n2 joins on its certificate alone; its serial is
         revoked with gossip-keygen --revoke into n0's --crl file and n0
         gets SIGHUP: n0 and n1 drop n2 within REVOKE_S (measured from
         the SIGHUP to each one's `member n2 dead` event), n1 saves the
         list it was told in its --checkpoint-dir byte for byte, both
         list n2 as revoked and not a member in `gossipctl certs` and
         refuse its frames as `revoked`, and n2, told nothing, sees them
         dead: it no longer trains with them; n1 restarted alone holds
         the list it saved. Needs GOSSIPCTL.
  serve  n0 and n1 train with --after-train serve: after their last step
         they stay up (no exit within 3 s), list each other alive in
         `gossipctl members`, report running false at the last step in
         `gossipctl train` with their stall figures (longest step, pace,
         slow steps) as their stop events have them; n2 starts late, takes the model of the last
         step from one of them and evaluates near their final accuracy;
         all exit 0 (n0, n1 on SIGTERM). Needs GOSSIPCTL.
  wildcard three nodes bound to 0.0.0.0:PORT (--listen, as the guide's
         config), peers file with 127.0.0.1 lines: each lists the others
         at their 127.0.0.1 address in `gossipctl members` (never
         0.0.0.0: issue 30), no frame is refused as unknown_key or
         auth_failed, and each averaged parameters from its partners.
         Needs GOSSIPCTL.
  finished n0 and n1 train one epoch with checkpoints and --after-train
         serve; n0 is stopped (SIGTERM while serving is logged as such, not
         "stopping after this step") and restarted on its finished
         checkpoint, twice: it logs no NaN, the same epoch each time,
         `gossipctl train` shows its real step and epoch, and n1's
         `gossipctl members` shows n0 at that step, not 0 (issue 30 #8).
         Needs GOSSIPCTL.
  cpu    n0 and n1 run --adapt cpu, n2 the default: n0 and n1 log
         "adapting to the CPU" and need a longer period than K0 (with
         this file's int8 gradients every step besides the slices the
         exchange took 59-61 % of an x86 node's CPU), n2 follows that
         period ("as a partner's link or CPU needs"), every node shows
         the exchange's share in `gossipctl stats` and averaged slices.
         Needs GOSSIPCTL.
  paced  a slower device's samples at its partners' rate (issue 34 item
         3): three nodes with --shuffle-samples R; once all train, n2 is
         put in a CPU quota of PACED_QUOTA % of a core (cgroup v1, needs
         root), n0 and n1 in twice that, all averaging every 4 steps: n2
         skips steps to their pace and tells a pace ratio of at least
         1.5 in `gossipctl train` and its log, and from then on sends
         more than 1.25 R samples per frame (at most 8 R); n0 and n1, never
         behind, send exactly R a frame. Needs GOSSIPCTL.
  settings n2 runs another --seed than n0 and n1 (issue 33 item 2): the
         join is refused on both sides within 1 s, the setting named with
         both values, once per member life; n2 exits 78 (EX_CONFIG); n0 and
         n1 train to their end, show n2 `refused` by `seed` in `gossipctl
         members`, and refuse no stream of slices as not_partner.
         Needs GOSSIPCTL.
  joinfirst a node is a member before its data is loaded (issue 33,
         "join first"): n2's training labels come through a named pipe
         the test holds (a loader that does not finish until the test
         says so: no hook in the product); while held, n2
         is `alive` in n0's and n1's `gossipctl members` within
         JOINFIRST_ALIVE_S of its start and says `loading` in `gossipctl
         train`; once the rest flows it takes the model from a peer and
         trains. Prints what n0 averaged per round while n2 loaded and
         after. Needs GOSSIPCTL.

  far    a node far behind takes a peer's state (design.md, "Far behind:
         take a peer's state"): n0 and n1 trust only each other and run
         ahead; n2 starts late, refused, and trains alone; SIGHUP makes
         n0 and n1 accept it while it is hundreds of steps behind: it
         takes a peer's state (refetches 1 in `gossipctl train`, its step
         jumps to theirs), and n0 and n1 then take its slices (robust
         accepted or clipped in `gossipctl stats`). Before, it stayed
         behind for good with every slice refused both ways.
         Needs GOSSIPCTL.

Python 3 standard library only. Exit 0 pass, 1 fail, 77 skip (no data).
Every node's log is printed on failure. GN_SEED sets the run's --seed.
"""
import json
import os
import re
import struct
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

DATA = "/usr/share/datasets/fashion-mnist"
TARGET = 80.0          # test accuracy every model must reach, %
SPREAD = 1.0           # max difference between replicas, percentage points
STALL_BOUND_S = 6.0    # suspicion timeout bound for 4 nodes: probe 1 s +
                       # min suspicion 4*log10(4)*1 s = 2.4 s, with margin
DEAD_WITHIN_S = 40.0   # probe + max suspicion (6 x 2.4 s) + dissemination
# Every scenario trains with the settings the README recommends for a
# cluster: int8 gradients (4x fewer bytes than fp32 on a shared link), a
# cosine schedule (replicas settle as the rate falls) and model averaging
# every 10 steps. n0..n(N-1) all get the same --steps, so they finish
# together and the cosine schedules agree.
MLP_PARAMS = 407050    # the default 784-512-10 MLP's floats
JOIN_ADOPT_STEPS = 8    # gossip/plan.h: GOSSIP_PLAN_JOIN_ADOPT_STEPS
COMMON = ["--codec", "int8", "--lr-schedule", "cosine", "--avg-every", "10"]


RND = random.Random(os.getpid() ^ time.time_ns())


def free_port():
    """A port free for both UDP and TCP on 127.0.0.1, drawn below the
    ephemeral range: no outgoing connection of a test running beside us can
    take it between this check and the node's bind."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            hi = int(f.read().split()[0]) - 1
    except (OSError, ValueError, IndexError):
        hi = 32767
    for _ in range(2000):
        port = RND.randrange(10000, max(hi, 10001))
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        t = socket.socket()
        try:
            u.bind(("127.0.0.1", port))
            t.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            t.close()
            u.close()
    raise RuntimeError("no free port")


class Cluster:
    def __init__(self, binary, keygen, n, tmp, seed):
        self.bin, self.n, self.tmp, self.seed = binary, n, tmp, seed
        self.keygen = keygen
        self.procs = {}
        lines = []
        self.ports = []
        for i in range(n):
            key = os.path.join(tmp, "k%d" % i)
            port = free_port()
            self.ports.append(port)
            subprocess.run([keygen, "--out", key, "--addr",
                            "127.0.0.1:%d" % port, "--name", "n%d" % i],
                           check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            lines.append(open(key + ".pub").read())
        self.lines = lines
        self.peers = os.path.join(tmp, "peers")
        with open(self.peers, "w") as f:
            f.write("".join(lines))

    def write_peers(self, i, members):
        """Give node i its own peers file listing only `members`."""
        path = os.path.join(self.tmp, "peers%d" % i)
        with open(path, "w") as f:
            f.write("".join(self.lines[m] for m in members))
        return path

    def ev_path(self, i):
        return os.path.join(self.tmp, "ev%d.jsonl" % i)

    def sock(self, i):
        return os.path.join(self.tmp, "ctl%d.sock" % i)

    def log_path(self, i):
        return os.path.join(self.tmp, "log%d" % i)

    def start(self, i, extra, peers=None):
        """Start node i with the shared peers file, its own (peers), or
        none (peers=False)."""
        p = [] if peers is False else ["--peers", peers or self.peers]
        args = [self.bin] + p + ["--key",
                os.path.join(self.tmp, "k%d" % i), "--shard",
                "%d/%d" % (i, self.n), "--seed", str(self.seed),
                "--threads", "1", "--event-log", self.ev_path(i),
                "--progress-every", "500"] + COMMON + extra
        log = open(self.log_path(i), "a")
        self.procs[i] = subprocess.Popen(args, stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL)

    def events(self, i, kind=None):
        out = []
        try:
            with open(self.ev_path(i)) as f:
                for line in f:
                    if not line.endswith("\n"):
                        break
                    e = json.loads(line)
                    if kind is None or e["ev"] == kind:
                        out.append(e)
        except FileNotFoundError:
            pass
        return out

    def step(self, i):
        s = [e["step"] for e in self.events(i) if "step" in e]
        return max(s) if s else 0

    def wait_for(self, what, pred, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if pred():
                return True
            time.sleep(0.2)
        raise AssertionError("timed out after %.0f s waiting for %s"
                             % (timeout, what))

    def member_state(self, i, peer, state):
        return any(e["peer"] == peer and e["state"] == state
                   for e in self.events(i, "member"))

    def stop(self, i, sig=signal.SIGTERM, timeout=60):
        p = self.procs[i]
        if p.poll() is None:
            p.send_signal(sig)
        return p.wait(timeout)

    def kill_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    def dump(self):
        for i in range(self.n):
            if os.path.exists(self.log_path(i)):
                print("---- log of n%d" % i)
                print(open(self.log_path(i)).read()[-4000:])


def final_acc(c, i):
    stops = c.events(i, "stop")
    assert stops, "n%d wrote no stop event" % i
    return stops[-1]["test_acc"]


def max_gap(c, i, t_from, t_to):
    """Longest time between consecutive step/eval events of node i inside
    [t_from, t_to] (ms)."""
    ts = [e["t_ms"] for e in c.events(i) if e["ev"] in ("step", "eval")
          and t_from <= e["t_ms"] <= t_to]
    return max((b - a for a, b in zip(ts, ts[1:])), default=0)


def check_stalls(c, i, bound_ms=None):
    """Node i's stall measure (node/train/stall.h) in its event log, read
    after its stop: every `step` event says the longest step of its window
    and the slow ones, every `slow_step` event is over twice its pace and
    waited no longer than it took, and the stop event's figures hold them
    all (the run's longest is at least each window's, its slow count at
    least their sum). Returns the run's longest step (ms) and slow count."""
    steps = c.events(i, "step")
    assert steps and all("max_ms" in e and "slow" in e for e in steps), \
        "n%d: step events without max_ms/slow" % i
    stop = c.events(i, "stop")[-1]
    run_max, run_slow = stop.get("max_ms"), stop.get("slow")
    assert run_max is not None and run_max > 0, stop
    assert isinstance(run_slow, int) and run_slow >= 0, stop
    # the last run's events only (a restarted node's file has two)
    k = max(j for j, e in enumerate(c.events(i)) if e["ev"] == "start")
    mine = c.events(i)[k:]
    win = [e for e in mine if e["ev"] == "step" and e["max_ms"] is not None]
    assert all(e["max_ms"] <= run_max + 0.05 for e in win), (run_max, win)
    assert sum(e["slow"] for e in mine if e["ev"] == "step") <= run_slow
    for e in (e for e in mine if e["ev"] == "slow_step"):
        # both rounded to 0.1 ms in the event
        assert e["pace_ms"] > 0 and e["ms"] > 2 * e["pace_ms"] - 0.2, e
        assert 0 <= e["wait_ms"] <= e["ms"] + 0.1, e
    if bound_ms is not None:
        assert run_max <= bound_ms, \
            "n%d: a step of %.0f ms (bound %.0f)" % (i, run_max, bound_ms)
    return run_max, run_slow


def scenario_three(c):
    steps = ["--steps", "300", "--eval-every", "100"]
    for i in range(3):
        c.start(i, steps)
    for i in range(3):
        rc = c.procs[i].wait(240)
        assert rc == 0, "n%d exited %d" % (i, rc)
    accs = [final_acc(c, i) for i in range(3)]
    print("final test accuracies: %s" % ", ".join("%.2f" % a for a in accs))
    for i in range(3):
        stop = c.events(i, "stop")[-1]
        assert stop["reason"] == "steps" and stop["step"] == 300, stop
        # started together: a node that began a few steps after another
        # takes its step, not its model; further behind, the model
        # (gossip_plan_join; a state transfer is seconds of a slow uplink)
        start = c.events(i, "start")[0]["step"]
        joins = [e["step"] for e in c.events(i, "join")]
        print("n%d started at step %d, took a model at %s"
              % (i, start, joins or "no step"))
        assert start <= JOIN_ADOPT_STEPS or joins, (i, start)
        assert all(s > JOIN_ADOPT_STEPS for s in joins), \
            "n%d took a model %s steps into the run" % (i, joins)
    assert min(accs) >= TARGET, "a model is below %.0f%%" % TARGET
    assert max(accs) - min(accs) <= SPREAD, \
        "replicas differ by %.2f points" % (max(accs) - min(accs))


def scenario_churn(c):
    # enough steps that the SIGTERM at the end lands while every node is
    # still training: detection, restart and one epoch took ~1000 steps on
    # BLIS's reference kernels and take ~2000 on the probed ones (3x faster
    # per step, the same seconds of detection and restart)
    run = ["--steps", "5000", "--eval-every", "50"]
    for i in range(4):
        c.start(i, run)
    c.wait_for("all four at step 100",
               lambda: all(c.step(i) >= 100 for i in range(4)), 120)
    # kill -9 n3 mid-training
    t_kill = int(time.time() * 1000)
    c.procs[3].kill()
    c.procs[3].wait()
    c.wait_for("n3 dead at n0, n1, n2",
               lambda: all(c.member_state(i, "n3", "dead")
                           for i in range(3)), DEAD_WITHIN_S)
    print("n3 killed at step ~%d; seen dead after %.1f s"
          % (c.step(0), time.time() - t_kill / 1000.0))
    s0 = [c.step(i) for i in range(3)]
    c.wait_for("survivors advance 30 steps",
               lambda: all(c.step(i) >= s0[i] + 30 for i in range(3)), 60)
    t_now = int(time.time() * 1000)
    for i in range(3):
        gap = max_gap(c, i, t_kill - 1000, t_now) / 1000.0
        print("n%d: longest pause after the kill: %.2f s" % (i, gap))
        assert gap <= STALL_BOUND_S, "n%d stalled %.2f s" % (i, gap)
    # restart n3: it rejoins and takes the model
    n_join_before = len(c.events(3, "join"))
    c.start(3, run)
    c.wait_for("n3 takes state",
               lambda: len(c.events(3, "join")) > n_join_before, 60)
    join = c.events(3, "join")[-1]
    print("n3 rejoined: took the model of %s at step %d"
          % (join["peer"], join["step"]))
    assert join["step"] > 100, join
    c.wait_for("n3 alive again at n0",
               lambda: [e["state"] for e in c.events(0, "member")
                        if e["peer"] == "n3"][-1] == "alive", 30)
    # within one epoch of its shard (15000 samples = 150 steps), n3 is
    # within SPREAD points of the others at the same evaluation step
    s3 = c.step(3)

    def shared():
        """Evaluation steps n3 shares with n0 and n1 past one epoch of
        n3 after rejoining, and the three nodes' {step: test_acc}."""
        ev = [{e["step"]: e["test_acc"] for e in c.events(i, "eval")}
              for i in (0, 1, 3)]
        common = sorted(set(ev[0]) & set(ev[1]) & set(ev[2]))
        return [st for st in common if st > s3 + 150], ev

    # Compare n3 with n0 and n1 over the first three evaluation steps they
    # share once n3 has trained one epoch (one evaluation of one model
    # moves by about a point from one to the next while the rate is high).
    # Not a fixed window of steps: a rejoiner still behind every partner
    # skips steps (catch_up) or takes a model again (far behind), and its
    # evaluations in that window are then skipped with them.
    c.wait_for("n3 trains one epoch after rejoining and shares 3 "
               "evaluations with n0 and n1",
               lambda: len(shared()[0]) >= 3, 150)
    skips = [(e["step"], e["skipped"]) for e in c.events(3, "catch_up")]
    joins = [e["step"] for e in c.events(3, "join")]
    print("n3 after rejoining: skipped (step, steps) %s; took a model at "
          "steps %s" % (skips or "none", joins))
    common, ev = shared()
    last = common[:3]
    acc3 = sum(ev[2][s] for s in last) / len(last)
    acc_others = sum(ev[k][s] for k in (0, 1) for s in last) / (2 * len(last))
    print("steps %s: n0/n1 mean %.2f%%, n3 mean %.2f%%"
          % (last, acc_others, acc3))
    # SIGTERM n2: seen as left (by nodes still running: check they are)
    assert all(c.procs[i].poll() is None for i in (0, 1, 3)), \
        "a node finished before the SIGTERM phase: raise --steps"
    assert c.stop(2) == 0, "n2 did not exit 0 on SIGTERM"
    c.wait_for("n2 left at n0, n1, n3",
               lambda: all(c.member_state(i, "n2", "left")
                           for i in (0, 1, 3)), 30)
    for i in (0, 1, 3):
        rc = c.procs[i].wait(240)
        assert rc == 0, "n%d exited %d" % (i, rc)
    accs = {"n%d" % i: final_acc(c, i) for i in (0, 1, 3)}
    print("final test accuracies: %s" % accs)
    # the survivors of the kill measured their stalls: no step longer
    # than the pause bound above (a step's time is within a pause)
    for i in (0, 1):
        mx, slow = check_stalls(c, i, STALL_BOUND_S * 1000)
        told = c.events(i, "slow_step")
        print("n%d: longest step %.0f ms, %d slow (%d told); worst told: "
              "%s" % (i, mx, slow, len(told),
                      max(told, key=lambda e: e["ms"]) if told else "-"))
    check_stalls(c, 3)
    assert abs(acc_others - acc3) <= SPREAD, \
        "n3 is %.2f points from n0/n1 one epoch after rejoining" \
        % abs(acc_others - acc3)
    assert min(accs.values()) >= TARGET, accs
    assert max(accs.values()) - min(accs.values()) <= SPREAD, accs


def scenario_join(c):
    # n2 starts at step 300 and needs a few seconds (data, membership):
    # leave the others enough steps to still be there
    run = ["--steps", "1200", "--eval-every", "20"]
    c.start(0, run)
    c.start(1, run)
    c.wait_for("n0 and n1 at step 300",
               lambda: c.step(0) >= 300 and c.step(1) >= 300, 150)
    cluster_acc = max(e["test_acc"] for i in (0, 1)
                      for e in c.events(i, "eval")[-2:])
    c.start(2, run)
    c.wait_for("n2's first evaluation",
               lambda: len(c.events(2, "eval")) >= 1, 90)
    join = c.events(2, "join")
    first = c.events(2, "eval")[0]
    start = c.events(2, "start")[0]
    print("cluster accuracy %.2f%%; late joiner: start step %d, first eval "
          "at step %d: %.2f%%" % (cluster_acc, start["step"], first["step"],
                                  first["test_acc"]))
    assert join and join[0]["step"] >= 300, "n2 did not take the model"
    assert start["step"] >= 300, start
    # the state crossed as parameters and one buffer per parameter (the
    # quasi-global m as a velocity, node_trainer_encode_state), not three
    took = re.search(r"took the model from n\d at step \d+ \((\d+) bytes\)",
                     open(c.log_path(2)).read())
    assert took, "n2's log does not say what it took"
    state_bytes = int(took.group(1))
    print("state transfer: %d bytes" % state_bytes)
    assert 2 * 4 * MLP_PARAMS < state_bytes < 2 * 4 * MLP_PARAMS + 65536, \
        state_bytes
    # a fresh model after 20 steps is near 65-70%; the cluster is at ~83%
    assert first["test_acc"] >= cluster_acc - 3.0, \
        "late joiner's first eval %.2f%% vs cluster %.2f%%" \
        % (first["test_acc"], cluster_acc)
    for i in range(3):
        rc = c.procs[i].wait(240)
        assert rc == 0, "n%d exited %d" % (i, rc)


STOP_TARGET = 75.0     # % - reached in ~100-200 steps with 3 nodes
# n1 and n2 exit within this many seconds of n0's exit: a few steps, a
# final evaluation over 10,000 test images and a checkpoint. Under an
# emulator (GN_TEST_SLOWDOWN, cmake/Emulator.cmake) that evaluation alone
# takes tens of seconds on a busy machine (CI twice: over 30 s, the second
# time with the bound unscaled, so GN_TEST_SLOWDOWN did not reach the test
# there), so the bound scales, capped at 10x, and is never under 180 s
# (natively the exit takes ~3 s); STOP_STEPS_AFTER below is the property.
STOP_SLOWDOWN = max(1.0, float(os.environ.get("GN_TEST_SLOWDOWN") or 1))
STOP_EXIT_WITHIN_S = max(180.0, 30.0 * min(STOP_SLOWDOWN, 10.0))
# n0 reaches the target within this: natively in seconds; emulated, its
# evaluations every 20 steps dominate, and on a Zen 3 host the whole test
# took 246 s in one CI run and n0 timed out at 240 s in the next, so the
# bound scales too
# (600 s emulated; the test's ctest TIMEOUT is scaled 4x there, to 1600).
STOP_REACH_WITHIN_S = max(240.0, 60.0 * min(STOP_SLOWDOWN, 10.0))
STOP_QUORUM_SPREAD = 5.0  # points a quorum-stopped node may be below
STOP_STEPS_AFTER = 300 # the others stop within this many steps of n0's stop
                       # (one LEAVE datagram on loopback, a step of ~5 ms,
                       # n0's final checkpoint written before it leaves)


def ckpt_step(path):
    """The step field of a checkpoint (docs/formats.md: u64 LE at 16)."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:4] == b"GNCK", "%s is not a checkpoint" % path
    return struct.unpack("<Q", head[16:24])[0]


def scenario_stop(c):
    total = 100000
    for i in range(3):
        ev = "20" if i == 0 else str(total)  # n1, n2 never evaluate
        c.start(i, ["--steps", str(total), "--eval-every", ev,
                    "--target-acc", "%.1f" % STOP_TARGET,
                    "--checkpoint-dir", os.path.join(c.tmp, "ck%d" % i)])
    try:
        rc = c.procs[0].wait(STOP_REACH_WITHIN_S)
    except subprocess.TimeoutExpired:
        raise AssertionError("n0 did not reach %.1f%% within %.0f s"
                             % (STOP_TARGET, STOP_REACH_WITHIN_S))
    assert rc == 0, "n0 exited %d" % rc
    for i in (1, 2):  # a few steps, a final evaluation and a checkpoint
        try:
            rc = c.procs[i].wait(STOP_EXIT_WITHIN_S)
        except subprocess.TimeoutExpired:
            raise AssertionError("n%d still running %.0f s after n0 left"
                                 % (i, STOP_EXIT_WITHIN_S))
        assert rc == 0, "n%d exited %d" % (i, rc)
    stops = [c.events(i, "stop")[-1] for i in range(3)]
    print("stops: %s" % stops)
    s0 = stops[0]["step"]
    assert stops[0]["reason"] == "target", stops[0]
    assert stops[0]["test_acc"] >= STOP_TARGET, stops[0]
    want = "stopped: n0 reached target %.1f%% at step %d" % (STOP_TARGET, s0)
    for i in (1, 2):
        assert stops[i]["reason"] in ("cluster", "target"), stops[i]
        assert stops[i]["step"] <= s0 + STOP_STEPS_AFTER, \
            "n%d stopped at step %d, n0 at %d" % (i, stops[i]["step"], s0)
        log = open(c.log_path(i)).read()
        if stops[i]["reason"] == "target":  # its own target
            assert stops[i]["test_acc"] >= STOP_TARGET, stops[i]
        else:
            # on n0's reason: by its own evaluation within the 1-point
            # margin, or by the quorum (both others, with 3 members)
            # whatever its own accuracy (gossip/stop.h): near the stop,
            # 40-80 steps in, the models still differ by a few points (CI
            # stop 41: n2 at 72.88% stopped on n0's 75.86% and n1's 77.42%)
            assert want in log, "n%d's log lacks '%s'" % (i, want)
            assert stops[i]["test_acc"] >= STOP_TARGET - 1.0 or \
                "2 of 2 votes" in log, "n%d: below the margin without a " \
                "quorum: %s" % (i, stops[i])
            assert stops[i]["test_acc"] >= STOP_TARGET - STOP_QUORUM_SPREAD, \
                stops[i]
    for i in range(3):
        got = ckpt_step(os.path.join(c.tmp, "ck%d" % i, "model.ckpt"))
        assert got == stops[i]["step"], \
            "n%d's checkpoint is of step %d, it stopped at %d" \
            % (i, got, stops[i]["step"])
    # each node saw n0 leave (the LEAVE, not a failure detection)
    for i in (1, 2):
        assert c.member_state(i, "n0", "left"), "n%d never saw n0 leave" % i


SHUF_R = 8      # samples per step
SHUF_CAP = 100  # reservoir bound, samples; filled after ~13 steps


def scenario_shuffle(c):
    ctl = os.path.join(os.path.dirname(c.keygen), "gossipctl")
    socks = [os.path.join(c.tmp, "c%d.sock" % i) for i in range(3)]
    for i in range(3):
        shuf = ["--shuffle-samples", str(SHUF_R), "--shuffle-reservoir",
                str(SHUF_CAP)] if i < 2 else []
        c.start(i, ["--steps", "100000", "--eval-every", "100",
                    "--control", socks[i]] + shuf)
    c.wait_for("all three at step 300",
               lambda: all(c.step(i) >= 300 for i in range(3)), 120)
    for i in range(3):
        r = subprocess.run([ctl, "--socket", socks[i], "stats", "--json"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout)
        node = st["node"]
        print("n%d samples_refused %s" % (i, node.get("samples_refused")))
        if i == 2:
            # no --shuffle-samples: every SAMPLES frame refused, counted;
            # n2 is n0's and n1's partner at half their steps (n = 3)
            assert "shuffle" not in st, st
            assert node["samples_refused"] >= 50, node
            continue
        assert node["samples_refused"] == 0, node
        sh = st["shuffle"]
        print("n%d shuffle: %s" % (i, sh))
        rec = 1 + 28 * 28
        assert sh["per_step"] == SHUF_R, sh
        assert sh["frames_sent"] >= 100, sh
        # R a frame, times the pace ratio on a node that skipped steps to
        # its partners' pace (NODE_SHUFFLE_PACE_MAX = 8 at most)
        tr = json.loads(subprocess.run(
            [ctl, "--socket", socks[i], "train", "--json"],
            capture_output=True, text=True, timeout=30).stdout)
        print("n%d skipped %d, pace ratio %.2f" % (
            i, tr["steps_skipped"], tr["pace_ratio"]))
        if tr["steps_skipped"] == 0:
            assert tr["pace_ratio"] == 1.0, tr
            assert sh["samples_sent"] == SHUF_R * sh["frames_sent"], sh
        else:
            assert SHUF_R * sh["frames_sent"] <= sh["samples_sent"] <= \
                8 * SHUF_R * sh["frames_sent"], sh
        assert sh["bytes_sent"] == rec * sh["samples_sent"], sh
        # only the other shuffler sends it samples: half its steps' senders
        assert sh["frames_received"] >= 50, sh
        assert sh["frames_refused"] == 0, sh
        assert sh["bytes_received"] == rec * sh["samples_received"], sh
        assert sh["samples_received"] > SHUF_CAP, sh
        assert sh["reservoir_cap"] == SHUF_CAP, sh
        assert sh["reservoir_samples"] == SHUF_CAP, sh  # full, not over
        assert sh["reservoir_bytes"] == SHUF_CAP * rec, sh
        assert sh["samples_kept"] < sh["samples_received"], sh
        assert sh["samples_trained"] >= 100 * SHUF_R, sh
    for i in range(3):
        assert c.stop(i) == 0, "n%d did not exit 0 on SIGTERM" % i


def scenario_hup(c):
    run = ["--steps", "1000000", "--eval-every", "100"]
    p0 = c.write_peers(0, [0, 1])
    p1 = c.write_peers(1, [0, 1])
    c.start(0, run, p0)
    c.start(1, run, p1)
    c.wait_for("n0 and n1 see each other",
               lambda: c.member_state(0, "n1", "alive")
               and c.member_state(1, "n0", "alive"), 60)
    c.start(2, run)
    c.wait_for("n2 training", lambda: c.step(2) >= 20, 60)
    time.sleep(4)  # two join retries of n2
    assert not any(e["peer"] == "n2" for e in c.events(0, "member")), \
        "n0 accepted n2, which is not in its peers file"
    print("n2 refused while untrusted")
    c.write_peers(0, [0, 1, 2])
    c.write_peers(1, [0, 1, 2])
    c.procs[0].send_signal(signal.SIGHUP)
    c.procs[1].send_signal(signal.SIGHUP)
    c.wait_for("n2 alive at n0 and n1 after SIGHUP",
               lambda: c.member_state(0, "n2", "alive")
               and c.member_state(1, "n2", "alive"), 30)
    print("n2 accepted after SIGHUP")
    c.write_peers(0, [0, 1])
    c.procs[0].send_signal(signal.SIGHUP)
    c.wait_for("n2 dropped at n0 after the second SIGHUP",
               lambda: [e["state"] for e in c.events(0, "member")
                        if e["peer"] == "n2"][-1] in ("dead", "left"), 30)
    print("n2 dropped after its key was removed")
    for i in range(3):
        assert c.stop(i) == 0, "n%d did not exit 0 on SIGTERM" % i


def peer_taken(c, i, peer):
    """Slices node i took from peer (robust accepted + clipped)."""
    for p in ctl_json(c, i, "stats").get("peers", []):
        if p.get("name") == peer:
            r = p.get("robust") or {}
            return r.get("accepted", 0) + r.get("clipped", 0)
    return 0


def scenario_far(c):
    run = ["--steps", "1000000", "--eval-every", "1000"]
    for i in range(2):
        c.start(i, run + ["--control", c.sock(i)],
                c.write_peers(i, [0, 1]))
    c.wait_for("n0 and n1 at step 1500",
               lambda: c.step(0) >= 1500 and c.step(1) >= 1500, 150)
    c.start(2, run + ["--control", c.sock(2)])
    def n2_step():
        try:
            return ctl_json(c, 2, "train").get("step", 0)
        except AssertionError:  # its control socket is not up yet
            return 0
    c.wait_for("n2 training alone", lambda: n2_step() >= 20, 90)
    assert "no live peer yet" in open(c.log_path(2)).read(), \
        "n2 was not alone at its start"
    behind = c.step(0) - ctl_json(c, 2, "train")["step"]
    print("n2 trains alone, %d steps behind n0" % behind)
    for i in range(2):
        c.write_peers(i, [0, 1, 2])
        c.procs[i].send_signal(signal.SIGHUP)
    c.wait_for("n2 alive at n0 and n1 after SIGHUP",
               lambda: c.member_state(0, "n2", "alive")
               and c.member_state(1, "n2", "alive"), 30)
    ahead = min(c.step(0), c.step(1))
    c.wait_for("n2 takes a peer's state",
               lambda: ctl_json(c, 2, "train").get("refetches", 0) >= 1, 60)
    tr = ctl_json(c, 2, "train")
    print("n2 took a peer's state: at step %d (n0 and n1 were at %d when "
          "they accepted it)" % (tr["step"], ahead))
    assert tr["step"] >= ahead, (tr["step"], ahead)
    c.wait_for("n0 and n1 take n2's slices",
               lambda: peer_taken(c, 0, "n2") > 0
               and peer_taken(c, 1, "n2") > 0, 60)
    print("n0 took %d of n2's slices, n1 %d" % (
        peer_taken(c, 0, "n2"), peer_taken(c, 1, "n2")))
    assert ctl_json(c, 2, "train")["refetches"] == 1, \
        "n2 asked again after catching up"
    for i in range(3):
        assert c.stop(i) == 0, "n%d did not exit 0 on SIGTERM" % i


def scenario_cert(c):
    run = ["--steps", "1000000", "--eval-every", "100"]
    kg = lambda *a: subprocess.run([c.keygen] + list(a), check=True,
                                   capture_output=True, text=True)
    ca, other = os.path.join(c.tmp, "ca.key"), os.path.join(c.tmp, "x.key")
    kg("--ca", "--out", ca)
    kg("--ca", "--out", other)
    certs = []
    for i in range(4):
        cert = os.path.join(c.tmp, "n%d.cert" % i)
        kg("--sign", "--ca-key", other if i == 3 else ca, "--pub",
           os.path.join(c.tmp, "k%d.pub" % i), "--name", "n%d" % i,
           "--serial", "%x" % (0xc0 + i), "--out", cert)
        certs.append(cert)
    pub = {ca: os.path.join(c.tmp, "ca.pub"),
           other: os.path.join(c.tmp, "x.pub")}
    p01 = c.write_peers(0, [0, 1])
    for i in (0, 1):
        c.start(i, run + ["--authority", pub[ca], "--cert", certs[i],
                          "--control", c.sock(i)], p01)
    c.wait_for("n0 and n1 see each other",
               lambda: c.member_state(0, "n1", "alive")
               and c.member_state(1, "n0", "alive"), 60)
    seed = ["--seed-addr", "127.0.0.1:%d" % c.ports[0]]
    for i in (2, 3):
        c.start(i, run + seed + [
            "--authority", pub[other if i == 3 else ca], "--cert", certs[i],
            "--listen", "127.0.0.1:%d" % c.ports[i],
            "--control", c.sock(i)], peers=False)
    t0 = time.time()
    c.wait_for("n2 alive at n0 and n1, and they at n2",
               lambda: all(c.member_state(a, b, "alive") for a, b in
                           ((0, "n2"), (1, "n2"), (2, "n0"), (2, "n1"))),
               30)
    print("n2 joined with its certificate in %.1f s" % (time.time() - t0))
    s2 = c.step(2)
    c.wait_for("n2 trains 100 more steps", lambda: c.step(2) >= s2 + 100,
               120)
    for i in (0, 1):
        peers = {p["name"]: p for p in ctl_json(c, i, "stats")["peers"]}
        assert peers.get("n2", {}).get("msgs_in", 0) > 0, peers.get("n2")
    members = {m["name"]: m for m in ctl_json(c, 0, "members")}
    assert members["n2"]["cert"]["serial"] == "%016x" % 0xc2, members["n2"]
    out = subprocess.run([c.gossipctl, "--socket", c.sock(0), "certs"],
                         capture_output=True, text=True, timeout=30).stdout
    assert re.search(r"^n2\s+%016x\s" % 0xc2, out, re.M), out
    print(out.rstrip())
    assert not any(e["peer"] == "n3" for i in (0, 1, 2)
                   for e in c.events(i, "member")), "n3 became a member"
    node = ctl_json(c, 0, "stats")["node"]
    assert node["certs"].get("wrong_authority", 0) >= 1, node["certs"]
    print("n0 refused n3: certs %s, rejects %s"
          % (node["certs"], node["rejects"]))
    # n3 is told nothing by the member that refuses it: it says itself,
    # once, after NODE_CLUSTER_ALONE_WARN_MS alone, what to check
    alone = re.compile(r"no member has answered in 30 s \(seed "
                       r"127\.0\.0\.1:%d\): is one up and reachable; is it "
                       r"of authority [0-9a-f]+ " % c.ports[0])
    c.wait_for("n3's warning that no member answers",
               lambda: alone.search(open(c.log_path(3)).read()),
               max(0.0, 90 - (time.time() - t0)))
    assert len(alone.findall(open(c.log_path(3)).read())) == 1
    assert not alone.search(open(c.log_path(2)).read()), \
        "n2, a member, said it was alone"
    # join first, then load (gossip/plan.h, gossip_plan_may_load): n2's
    # load waited for the seed's answer and its greetings, not for the
    # hold's end; n3's, whom no member answers, for the hold and no longer
    held = {i: re.findall(r"loading the data, ([0-9.]+) s after the join "
                          r"began", open(c.log_path(i)).read())
            for i in (2, 3)}
    assert len(held[2]) == 1 and float(held[2][0]) < LOAD_HOLD_S, held
    assert len(held[3]) == 1 and \
        LOAD_HOLD_S <= float(held[3][0]) < LOAD_HOLD_S + 5, held
    print("load held while joining: n2 %s s (answered), n3 %s s (no "
          "answer)" % (held[2][0], held[3][0]))
    for i in range(4):
        assert c.stop(i) == 0, "n%d did not exit 0 on SIGTERM" % i


def scenario_revoke(c):
    REVOKE_S = 5.0
    run = ["--steps", "1000000", "--eval-every", "100"]
    kg = lambda *a: subprocess.run([c.keygen] + list(a), check=True,
                                   capture_output=True, text=True)
    ca = os.path.join(c.tmp, "ca.key")
    kg("--ca", "--out", ca)
    certs = []
    for i in range(3):
        cert = os.path.join(c.tmp, "n%d.cert" % i)
        kg("--sign", "--ca-key", ca, "--pub", os.path.join(c.tmp, "k%d.pub" % i),
           "--name", "n%d" % i, "--serial", "%x" % (0xd0 + i), "--out", cert)
        certs.append(cert)
    pub = os.path.join(c.tmp, "ca.pub")
    crl0 = os.path.join(c.tmp, "n0.crl")  # does not exist yet: no list
    ck1 = os.path.join(c.tmp, "ck1")
    os.makedirs(ck1)
    p01 = c.write_peers(0, [0, 1])
    c.start(0, run + ["--authority", pub, "--cert", certs[0], "--crl", crl0,
                      "--control", c.sock(0)], p01)
    run1 = run + ["--authority", pub, "--cert", certs[1], "--checkpoint-dir",
                  ck1, "--control", c.sock(1), "--peers", p01]
    c.start(1, run1, peers=False)
    c.wait_for("n0 and n1 see each other",
               lambda: c.member_state(0, "n1", "alive")
               and c.member_state(1, "n0", "alive"), 60)
    c.start(2, run + ["--authority", pub, "--cert", certs[2],
                      "--seed-addr", "127.0.0.1:%d" % c.ports[0],
                      "--listen", "127.0.0.1:%d" % c.ports[2],
                      "--control", c.sock(2)], peers=False)
    c.wait_for("n2 alive at n0 and n1, and they at n2",
               lambda: all(c.member_state(a, b, "alive") for a, b in
                           ((0, "n2"), (1, "n2"), (2, "n0"), (2, "n1"))), 30)
    s2 = c.step(2)
    c.wait_for("n2 trains 50 steps with them", lambda: c.step(2) >= s2 + 50,
               120)
    kg("--revoke", "--ca-key", ca, "--serial", "%x" % 0xd2, "--crl", crl0)
    listed = open(crl0, "rb").read()
    t0 = time.time()
    c.procs[0].send_signal(signal.SIGHUP)
    dead = {}
    for i in (0, 1):
        c.wait_for("n%d drops n2" % i,
                   lambda i=i: c.member_state(i, "n2", "dead"), 30)
        dead[i] = [e["t_ms"] for e in c.events(i, "member")
                   if e["peer"] == "n2" and e["state"] == "dead"][-1] / 1000.0
    print("n2 dropped %.3f s (n0) and %.3f s (n1) after the SIGHUP to n0"
          % (dead[0] - t0, dead[1] - t0))
    for i in (0, 1):
        assert dead[i] - t0 < REVOKE_S, "n%d dropped n2 after %.2f s" % (
            i, dead[i] - t0)
        assert re.search(r"member n2 \w+ -> dead \(.*\): dropped, its "
                         r"certificate is revoked", log_text(c, i)), \
            log_text(c, i)[-2000:]
    saved = os.path.join(ck1, "authority.crl")
    c.wait_for("n1 saves the list", lambda: os.path.exists(saved), 10)
    assert open(saved, "rb").read() == listed, "n1 saved other bytes"
    assert open(crl0, "rb").read() == listed, "n0's --crl file changed"
    # n2 keeps talking (probes, gradients): refused as revoked at both
    c.wait_for("n0 and n1 refuse n2's frames as revoked",
               lambda: all(ctl_json(c, i, "stats")["node"]["rejects"]
                           .get("revoked", 0) > 0 for i in (0, 1)), 20)
    for i in (0, 1):
        names = [m["name"] for m in ctl_json(c, i, "members")]
        assert "n2" not in names, "n%d still lists n2: %s" % (i, names)
        certs_i = ctl_json(c, i, "certs")
        assert certs_i["crl"]["seq"] == 1 and \
            certs_i["crl"]["serials"] == ["%016x" % 0xd2], certs_i["crl"]
        row = [r for r in certs_i["certs"] if r["name"] == "n2"]
        assert row and row[0]["status"] == "revoked" and \
            not row[0]["member"] and row[0]["refused"] > 0, certs_i
        node = ctl_json(c, i, "stats")["node"]
        assert node["crl"] == {"seq": 1, "issued_at": node["crl"]["issued_at"],
                               "serials": 1}, node["crl"]
        print("n%d: certs %s, crls %s, rejects %s"
              % (i, node["certs"], node["crls"], node["rejects"]))
    out = subprocess.run([c.gossipctl, "--socket", c.sock(1), "certs"],
                         capture_output=True, text=True, timeout=30).stdout
    print(out.rstrip())
    assert re.search(r"^n2\s+%016x\s.*\srevoked\s+no, dropped" % 0xd2,
                     out, re.M), out
    assert re.search(r"^revocation list: sequence 1, .*1 serial$", out,
                     re.M), out
    # told nothing, n2 sees its partners stop answering: no more training
    # with them
    c.wait_for("n2 sees n0 and n1 dead",
               lambda: c.member_state(2, "n0", "dead")
               and c.member_state(2, "n1", "dead"), DEAD_WITHIN_S)
    assert not os.path.exists(os.path.join(c.tmp, "n2.crl"))
    for i in range(3):
        assert c.stop(i) == 0, "n%d did not exit 0 on SIGTERM" % i
    # n1 again, alone: the list it saved is read at start (not told)
    c.start(1, run1)
    def up():
        try:
            return ctl_json(c, 1, "certs") is not None
        except AssertionError:
            return c.procs[1].poll() is not None
    c.wait_for("n1 up again", up, 60)
    crl = ctl_json(c, 1, "certs")["crl"]
    assert crl and crl["seq"] == 1, "n1 restarted without its list: %s" % crl
    assert ctl_json(c, 1, "stats")["node"]["crls"] == {}, "told, not read"
    print("n1 restarted alone holds sequence %d from its disk" % crl["seq"])
    assert c.stop(1) == 0, "n1 did not exit 0 on SIGTERM"


def ctl_json(c, i, *cmd):
    """`gossipctl --json CMD` against node i's control socket."""
    r = subprocess.run([c.gossipctl, "--socket", c.sock(i), "--json"]
                       + list(cmd), capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, "gossipctl %s at n%d: exit %d, %s" % (
        cmd, i, r.returncode, r.stderr.strip())
    return json.loads(r.stdout)


def scenario_serve(c):
    steps = 150
    run = ["--steps", str(steps), "--eval-every", "50",
           "--after-train", "serve"]
    for i in (0, 1):
        c.start(i, run + ["--control", c.sock(i)])
    c.wait_for("n0 and n1 finish training",
               lambda: c.events(0, "stop") and c.events(1, "stop"), 180)
    finals = [final_acc(c, i) for i in (0, 1)]
    # a finished node without --after-train serve exits within the leave
    # linger (0.6 s); 3 s later both must still be up
    time.sleep(3)
    for i in (0, 1):
        assert c.procs[i].poll() is None, \
            "n%d exited %s after training" % (i, c.procs[i].returncode)
        tr = ctl_json(c, i, "train")
        assert tr["running"] is False and tr["step"] == steps, tr
        # the stall measure (node/train/stall.h), as the stop event has it
        mx, slow = check_stalls(c, i)
        assert abs(tr["step_max_ms"] - mx) <= 0.05 and \
            tr["steps_slow"] == slow, (tr, mx, slow)
        assert 0 < tr["step_pace_ms"] <= tr["step_max_ms"], tr
        assert 0 < tr["step_max_at"] <= steps, tr
        assert 0 <= tr["step_max_wait_ms"] <= tr["step_max_ms"], tr
        assert 0 <= tr["slow_wait_ms"] <= tr["slow_ms"] + 0.1, tr
        assert (tr["slow_ms"] > 0) == (slow > 0), tr
        members = ctl_json(c, i, "members")
        alive = sorted(m["name"] for m in members if m["state"] == "alive")
        assert alive == ["n0", "n1"], "n%d lists alive %s" % (i, alive)
        # each member's version, ours told through membership (protocol.md
        # 3.2, update element 6)
        versions = {m["name"]: m.get("version") for m in members}
        assert versions == {"n0": c.version, "n1": c.version}, versions
    print("finished nodes still members; final accuracies %s" % finals)
    c.start(2, ["--steps", str(steps + 40), "--eval-every", "10"])
    c.wait_for("n2's first evaluation",
               lambda: len(c.events(2, "eval")) >= 1, 90)
    join = c.events(2, "join")
    assert join, "n2 did not take a model"
    assert join[0]["peer"] in ("n0", "n1") and join[0]["step"] == steps, \
        join[0]
    first = c.events(2, "eval")[0]
    print("n2 took the model of %s at step %d; first eval %.2f%% at step "
          "%d" % (join[0]["peer"], join[0]["step"], first["test_acc"],
                  first["step"]))
    # a fresh model after 10 steps is near 60-65%; the served one is at
    # the finished nodes' accuracy, which 10 more steps move by < 3 points
    assert first["test_acc"] >= min(finals) - 3.0, (first, finals)
    rc = c.procs[2].wait(120)
    assert rc == 0, "n2 exited %d" % rc
    c.wait_for("n2 left at n0",
               lambda: c.member_state(0, "n2", "left"), 30)
    for i in (0, 1):
        assert c.stop(i) == 0, "n%d did not exit 0 on SIGTERM" % i
    assert c.member_state(1, "n0", "left") or \
        c.member_state(0, "n1", "left"), "no leave seen after SIGTERM"


def scenario_wildcard(c):
    steps = 300
    run = ["--steps", str(steps), "--eval-every", "100",
           "--after-train", "serve"]
    for i in range(3):
        c.start(i, run + ["--listen", "0.0.0.0:%d" % c.ports[i],
                          "--control", c.sock(i)])
    c.wait_for("all three finish training",
               lambda: all(c.events(i, "stop") for i in range(3)), 240)
    want = {"n%d" % i: "127.0.0.1:%d" % c.ports[i] for i in range(3)}
    for i in range(3):
        members = ctl_json(c, i, "members")
        addrs = {m["name"]: m["addr"] for m in members}
        states = {m["name"]: m["state"] for m in members}
        print("n%d sees %s" % (i, addrs))
        assert addrs == want, "n%d lists %s, want %s" % (i, addrs, want)
        assert all(s == "alive" for s in states.values()), states
        node = ctl_json(c, i, "stats")["node"]
        for bad in ("unknown_key", "auth_failed", "addrs_refused"):
            assert node.get(bad, 0) == 0, "n%d: %s %s" % (i, bad, node)
    for i in range(3):
        assert c.stop(i) == 0, "n%d did not exit 0 on SIGTERM" % i
    for i in range(3):
        log = open(c.log_path(i)).read()
        m = re.search(r"averaged (\d+) \(", log)
        assert m, "n%d logged no exchange summary" % i
        print("n%d averaged %s parameter slices" % (i, m.group(1)))
        assert int(m.group(1)) > 0, "n%d never averaged" % i
        told = "listening on 0.0.0.0:%d; peers are told 127.0.0.1:%d" % (
            c.ports[i], c.ports[i])
        assert told in log, "n%d did not log '%s'" % (i, told)


def scenario_finished(c):
    # 30000 samples per shard at batch 1000: 30 steps, one epoch
    steps, ck = 30, [os.path.join(c.tmp, "ck%d" % i) for i in range(2)]

    def run(i):
        return ["--epochs", "1", "--batch", "1000", "--eval-every", "10",
                "--after-train", "serve", "--checkpoint-dir", ck[i],
                "--control", c.sock(i)]
    for i in range(2):
        c.start(i, run(i))
    c.wait_for("n0 and n1 finish training",
               lambda: c.events(0, "stop") and c.events(1, "stop"), 180)
    first = ctl_json(c, 0, "train")
    assert first["step"] == steps, first
    print("n0 finished: step %d, epoch %d" % (first["step"], first["epoch"]))
    # the log's epoch is the 1-based epoch of the last batch; gossipctl's
    # counts completed passes (control.md): they differ when skipped steps
    # (a node behind its partner) left the pass short at step 30
    shown = re.findall(r" eval epoch (\d+) step %d " % steps,
                       open(c.log_path(0)).read())
    assert shown, "n0 logged no evaluation at step %d" % steps
    shown = int(shown[-1])
    for restart in range(2):
        mark = len(open(c.log_path(0)).read())
        assert c.stop(0) == 0, "n0 did not exit 0 on SIGTERM"
        log = open(c.log_path(0)).read()[mark:]
        assert "SIGTERM: stopping after this step" not in log, log
        assert "SIGTERM: stopping (training was over" in log, log
        mark = len(open(c.log_path(0)).read())
        c.start(0, run(0))
        c.wait_for("n0 serving again",
                   lambda: "serving the model until SIGTERM"
                   in open(c.log_path(0)).read()[mark:], 60)
        tr = ctl_json(c, 0, "train")
        print("n0 restarted: step %d, epoch %d" % (tr["step"], tr["epoch"]))
        assert tr["step"] == steps and tr["epoch"] == first["epoch"], \
            (tr, first)
        log = open(c.log_path(0)).read()[mark:]
        assert "nan" not in log, log
        evals = [l for l in log.splitlines() if " eval epoch " in l]
        assert evals and all(" eval epoch %d step %d " % (
            shown, steps) in l for l in evals), (shown, evals)
        c.wait_for("n1 lists n0 at step %d" % steps,
                   lambda: {m["name"]: m["step"] for m in
                            ctl_json(c, 1, "members")}.get("n0") == steps,
                   20)
    for i in range(2):
        assert c.stop(i) == 0, "n%d did not exit 0 on SIGTERM" % i


def scenario_cpu(c):
    # n0 and n1 adapt to the CPU, n2 to the link only (the default)
    steps = 900
    run = ["--steps", str(steps), "--eval-every", "300",
           "--after-train", "serve"]
    for i in range(3):
        c.start(i, run + ["--control", c.sock(i)]
                + (["--adapt", "cpu"] if i < 2 else []))
    c.wait_for("all three finish training",
               lambda: all(c.events(i, "stop") for i in range(3)), 300)
    nodes = [ctl_json(c, i, "stats")["node"] for i in range(3)]
    for i, node in enumerate(nodes):
        print("n%d: exchange %.1f%% of the CPU, CPU needs every %d, "
              "averaging every %d" % (i, node["exchange_cpu_pct"] or -1,
                                      node["cpu_needs_every"],
                                      node["avg_every"]))
        pct = node["exchange_cpu_pct"]
        assert pct is not None and 0 < pct < 100, (i, node)
    k0 = 10  # Cluster's --avg-every
    for i in range(2):
        assert nodes[i]["cpu_needs_every"] >= 2 * k0, (i, nodes[i])
    assert nodes[2]["cpu_needs_every"] == 0, nodes[2]
    # one period for all: n2 follows its partners' need
    assert nodes[2]["avg_every"] >= 2 * k0, nodes[2]
    for i in range(3):
        assert c.stop(i) == 0, "n%d did not exit 0 on SIGTERM" % i
    for i in range(3):
        log = open(c.log_path(i)).read()
        if i < 2:
            m = re.findall(r"adapting to the CPU: the exchange took "
                           r"[0-9.]+% of it averaging every \d+ steps? .*"
                           r"our CPU needs every (\d+)", log)
            assert m and int(m[0]) >= 2 * k0, "n%d: %s" % (i, m)
        else:
            assert "adapting to the CPU" not in log, "n2 adapted to its CPU"
            assert re.search(r"averaging every \d+ steps, as a partner's "
                             r"link or CPU needs", log), "n2 never followed"
        m = re.search(r"averaged (\d+) \(", log)
        assert m and int(m.group(1)) > 0, "n%d never averaged" % i


PACED_QUOTA = 10
CPU_CGROUP = "/sys/fs/cgroup/cpu"


def scenario_paced(c):
    cgs = [os.path.join(CPU_CGROUP, "gn-paced-%d-n%d" % (os.getpid(), i))
           for i in range(3)]
    shuf = ["--shuffle-samples", str(SHUF_R), "--shuffle-reservoir",
            str(SHUF_CAP)]
    # averaging every 4 steps: at every step n2, at a tenth of a core,
    # spent its CPU receiving the slices of partners 4 times as fast and
    # stalled (its loop did not answer gossipctl); --adapt cpu is the
    # product's answer to that (design.md, "Adapting to the CPU")
    for i in range(3):
        c.start(i, ["--steps", "100000", "--eval-every", "500",
                    "--avg-every", "4", "--control", c.sock(i)] + shuf)
    c.wait_for("all three training",
               lambda: all(c.step(i) >= 20 for i in range(3)), 120)
    try:
        # n0 and n1 at twice n2's quota (unbounded, they stepped 20
        # times as fast on 2 cores; at 4 times, n2's share of receiving
        # their slices made it 9 times slower)
        for i, cg in enumerate(cgs):
            os.mkdir(cg)
            with open(os.path.join(cg, "cpu.cfs_period_us"), "w") as f:
                f.write("20000")
            with open(os.path.join(cg, "cpu.cfs_quota_us"), "w") as f:
                f.write(str(200 * PACED_QUOTA * (1 if i == 2 else 2)))
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(c.procs[i].pid))
        c.wait_for("n2 behind its partners' pace",
                   lambda: ctl_json(c, 2, "train")["pace_ratio"] >= 1.5, 120)
        before = ctl_json(c, 2, "stats")["shuffle"]
        time.sleep(5)  # frames at that pace
        for i in range(3):
            tr = ctl_json(c, i, "train")
            sh = ctl_json(c, i, "stats")["shuffle"]
            if i == 2:  # per frame since it was behind
                frames = sh["frames_sent"] - before["frames_sent"]
                per = (sh["samples_sent"] - before["samples_sent"]) / \
                    max(1, frames)
                assert frames >= 10, (before, sh)
            else:
                per = sh["samples_sent"] / max(1, sh["frames_sent"])
            print("n%d: step %d, skipped %d, pace ratio %.2f; shuffle sent "
                  "%d samples in %d frames (%.1f a frame)" % (
                      i, tr["step"], tr["steps_skipped"], tr["pace_ratio"],
                      sh["samples_sent"], sh["frames_sent"], per))
            assert sh["frames_sent"] >= 20, sh
            if i < 2:
                assert tr["pace_ratio"] < 1.5, (i, tr)
                if tr["steps_skipped"] == 0:
                    assert sh["samples_sent"] == \
                        SHUF_R * sh["frames_sent"], (i, sh)
            else:
                assert tr["steps_skipped"] > 0 and \
                    tr["pace_ratio"] >= 1.5, tr
                assert 1.25 * SHUF_R < per <= 8 * SHUF_R, sh
        assert re.search(r"a pace ratio of [0-9.]+: partners step faster\); "
                         r"the sample shuffle sends", log_text(c, 2)), \
            "n2 never logged its pace"
        for i in range(3):
            assert c.stop(i) == 0, "n%d did not exit 0 on SIGTERM" % i
    finally:
        c.kill_all()
        for cg in cgs:
            if os.path.isdir(cg):
                os.rmdir(cg)


def log_text(c, i):
    try:
        with open(c.log_path(i)) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def when(c, what, pred, timeout, poll=0.02):
    """Wall time at which pred() first held (polled every `poll` s)."""
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return time.time()
        time.sleep(poll)
    raise AssertionError("timed out after %.0f s waiting for %s"
                         % (timeout, what))


def scenario_settings(c):
    """Issue 33 item 2: n2 runs --seed 2 (another partner schedule). Both
    sides refuse the join within REFUSE_S of n2 being up, naming `seed`
    and both values; n2, alone with members that refuse it, exits 78
    within EXIT_S of its refusal (1 s check + a step + the 0.6 s leave
    linger, and, since the node joins first, the rest of its data load,
    which a stop does not cut short: ~1-2 s of Fashion-MNIST here, hence
    3 s more); n0 and n1 train together to their end, list n2 as refused
    by `seed`, and refused none of each other's slices as not_partner
    beyond start-up (the issue's symptom: 664-1437 per node)."""
    REFUSE_S, EXIT_S, NOT_PARTNER_MAX, STEPS = 1.0, 6.0, 20, 600
    odd = c.seed + 1
    run = ["--steps", str(STEPS), "--eval-every", "200"]
    for i in (0, 1):
        c.start(i, run + ["--control", c.sock(i)])
    c.wait_for("n0 and n1 alive to each other",
               lambda: c.member_state(0, "n1", "alive")
               and c.member_state(1, "n0", "alive"), 60)
    c.start(2, run + ["--seed", str(odd)])
    up = when(c, "n2 up", lambda: "gossipnode " in log_text(c, 2), 60)
    good = "refused n2: setting seed is %d here, %d there" % (c.seed, odd)
    t_good = [when(c, "n%d's refusal of n2" % i,
                   lambda i=i: good in log_text(c, i), 10) for i in (0, 1)]
    t_odd = when(c, "n2's refusal",
                 lambda: re.search(r"refused n[01]: setting seed is %d "
                                   r"here, %d there" % (odd, c.seed),
                                   log_text(c, 2)), 10)
    rc = c.procs[2].wait(30)
    t_exit = time.time()
    print("after n2 was up: refused by n0 %.2f s, n1 %.2f s, refused them "
          "%.2f s; exited %d after %.2f s"
          % (t_good[0] - up, t_good[1] - up, t_odd - up, rc, t_exit - up))
    for t in t_good + [t_odd]:
        assert t - up <= REFUSE_S, "refusal %.2f s after n2 was up" % (t - up)
    assert rc == 78, "n2 exited %d, not 78 (EX_CONFIG)" % rc
    assert t_exit - t_odd <= EXIT_S, "n2 exited %.2f s after its refusal" \
        % (t_exit - t_odd)
    last = log_text(c, 2).strip().split("\n")[-1]
    assert re.search(r"gossipnode: refused by the cluster: setting seed is "
                     r"%d here, %d there" % (odd, c.seed), last), last
    for i in (0, 1):  # once per member life, however many JOINs
        assert log_text(c, i).count("refused n2:") == 1, \
            "n%d logged n2's refusal %d times" % (
                i, log_text(c, i).count("refused n2:"))
    members = {m["name"]: m for m in ctl_json(c, 0, "members")}
    assert "n2" in members, sorted(members)
    assert members["n2"]["state"] == "refused" and \
        members["n2"]["refused"] == {
            "setting": "seed", "here": str(c.seed), "there": str(odd)}, \
        members["n2"]
    assert members["n1"]["refused"] is None and \
        members["n1"]["state"] == "alive", members["n1"]
    table = subprocess.run([c.gossipctl, "--socket", c.sock(0), "members"],
                           capture_output=True, text=True, timeout=30).stdout
    assert re.search(r"^n2 .*refused:seed", table, re.M), table
    for i in (0, 1):
        rc = c.procs[i].wait(240)
        assert rc == 0, "n%d exited %d" % (i, rc)
        stop = c.events(i, "stop")[-1]
        assert stop["reason"] == "steps" and stop["step"] == STEPS, stop
        m = re.search(r"robust merge on: .* (\d+) not_partner",
                      log_text(c, i))
        assert m, "n%d wrote no robust merge summary" % i
        assert int(m.group(1)) <= NOT_PARTNER_MAX, \
            "n%d refused %s slices as not_partner" % (i, m.group(1))
    print("n0 and n1 reached step %d; not_partner refusals within %d"
          % (STEPS, NOT_PARTNER_MAX))


class HeldFile:
    """A named pipe at `path` that serves the bytes of `src` to its first
    reader only once release() was called: a data file that loads as
    slowly as the test wants."""

    def __init__(self, path, src):
        import threading
        os.mkfifo(path)
        self.path, self.data = path, open(src, "rb").read()
        self.gate, self.opens = threading.Event(), 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        # once: reopened while the reader still reads, the pipe would
        # append a second copy to its stream
        with open(self.path, "wb") as f:  # blocks until a reader
            self.opens += 1
            self.gate.wait()
            try:
                f.write(self.data)
            except BrokenPipeError:
                pass

    def release(self):
        self.gate.set()


def metric(port, name):
    import urllib.request
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                  timeout=10).read().decode()
    m = re.search(r"^gossipnode_%s(?:\{[^}]*\})? ([0-9.e+]+)$" % name, text,
                  re.M)
    return float(m.group(1)) if m else 0.0


LOAD_HOLD_S = 2.0  # GOSSIP_PLAN_LOAD_HOLD_MS (gossip/plan.h)
JOINFIRST_ALIVE_S = 10.0  # issue 33: 3 probe periods (1 s) from the
                          # start; loopback adds no delay, a busy 2-core
                          # host a few seconds of process start
JOINFIRST_HOLD_S = 6.0    # n2 held while loading, after it is alive


def member(c, i, name):
    """Member `name` as node i's gossipctl members tells it."""
    return {x["name"]: x for x in ctl_json(c, i, "members")}[name]


def scenario_joinfirst(c):
    run = ["--steps", "6000", "--eval-every", "2000"]
    mport = free_port()
    c.start(0, run + ["--control", c.sock(0), "--metrics",
                      "127.0.0.1:%d" % mport])
    c.start(1, run + ["--control", c.sock(1)])
    c.wait_for("n0 and n1 at step 100",
               lambda: c.step(0) >= 100 and c.step(1) >= 100, 120)
    # the labels: the images' header is all the node reads before it
    # joins (nn_dataset_probe_dir), the labels it reads only to load
    held_name = "train-labels-idx1-ubyte.gz"
    slow = os.path.join(c.tmp, "slowdata")
    os.mkdir(slow)
    for f in os.listdir(DATA):
        if f != held_name:
            os.symlink(os.path.join(DATA, f), os.path.join(slow, f))
    held = HeldFile(os.path.join(slow, held_name),
                    os.path.join(DATA, held_name))
    t0 = time.time()
    c.start(2, ["--steps", "6100", "--eval-every", "2000", "--data", slow,
                "--control", c.sock(2)])
    alive = [when(c, "n2 alive at n%d while its data is held" % i,
                  lambda i=i: c.member_state(i, "n2", "alive"),
                  JOINFIRST_ALIVE_S) - t0 for i in (0, 1)]
    tr = ctl_json(c, 2, "train")
    assert tr["state"] == "loading" and tr["running"] is True, tr
    for i in (0, 1):
        m = {x["name"]: x for x in ctl_json(c, i, "members")}
        assert m["n2"]["state"] == "alive", (i, m["n2"])
    # it says it loads (protocol.md 3.2, element 8): no partner in it
    c.wait_for("n0 and n1 hold n2 loading",
               lambda: all(member(c, i, "n2")["loading"] for i in (0, 1)),
               JOINFIRST_ALIVE_S)
    a0, s0 = metric(mport, "params_averaged_total"), c.step(0)
    time.sleep(JOINFIRST_HOLD_S)
    a1, s1 = metric(mport, "params_averaged_total"), c.step(0)
    tr = ctl_json(c, 2, "train")
    assert tr["state"] == "loading" and tr["step"] == 0, tr
    assert held.opens == 1, "n2 opened its labels %d times" % held.opens
    print("n2 alive at n0 %.2f s, n1 %.2f s after its start, its training "
          "labels held" % (alive[0], alive[1]))
    held.release()
    assert all(member(c, i, "n2")["loading"] for i in (0, 1)), \
        "n2's loading ended at a member while it loaded"
    c.wait_for("n2's first step", lambda: ctl_json(c, 2, "train")["state"]
               == "training", 120)
    c.wait_for("n0 and n1 hold n2 exchanging",
               lambda: not any(member(c, i, "n2")["loading"] for i in (0, 1)),
               JOINFIRST_ALIVE_S)
    a2, s2 = metric(mport, "params_averaged_total"), c.step(0)
    time.sleep(JOINFIRST_HOLD_S)
    a3, s3 = metric(mport, "params_averaged_total"), c.step(0)
    per = (lambda a, b, x, y: (b - a) / max(1, (y - x) / 10.0))
    print("n0 averaged %.2f slices per round (10 steps) while n2 loaded "
          "(%d steps), %.2f while it trained (%d steps)"
          % (per(a0, a1, s0, s1), s1 - s0, per(a2, a3, s2, s3), s3 - s2))
    join = c.events(2, "join")
    assert join and join[0]["peer"] in ("n0", "n1") and \
        join[0]["step"] > 100, join
    for i in range(3):
        rc = c.procs[i].wait(300)
        assert rc == 0, "n%d exited %d" % (i, rc)


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        return 2
    binary, keygen, scenario = sys.argv[1:4]
    gossipctl = sys.argv[4] if len(sys.argv) == 5 else None
    if scenario in ("serve", "wildcard", "finished", "settings",
                    "cert", "revoke", "far", "joinfirst",
                    "cpu", "paced") and not gossipctl:
        print(__doc__)
        return 2
    if not os.path.isdir(DATA):
        print("SKIP: no %s" % DATA)
        return 77
    if not os.access(keygen, os.X_OK):
        print("SKIP: %s not built" % keygen)
        return 77
    if scenario == "paced" and not os.access(
            os.path.join(CPU_CGROUP, "cgroup.procs"), os.W_OK):
        print("SKIP: paced needs root and cgroup v1's cpu controller at %s"
              % CPU_CGROUP)
        return 77
    seed = int(os.environ.get("GN_SEED", "1"))
    print("# GN_SEED=%d" % seed)
    n = {"three": 3, "churn": 4, "join": 3, "hup": 3, "stop": 3,
         "shuffle": 3, "serve": 3, "wildcard": 3, "finished": 2,
         "settings": 3, "cert": 4, "revoke": 3, "far": 3,
         "joinfirst": 3, "cpu": 3, "paced": 3}[scenario]
    tmp = tempfile.mkdtemp(prefix="gn-cluster-")
    c = Cluster(binary, keygen, n, tmp, seed)
    c.gossipctl = gossipctl
    # "gossipnode X.Y.Z" on the first line of --version
    c.version = subprocess.run([binary, "--version"], capture_output=True,
                               text=True).stdout.split("\n")[0].split()[-1]
    ok = False
    try:
        {"three": scenario_three, "churn": scenario_churn,
         "join": scenario_join, "hup": scenario_hup,
         "stop": scenario_stop, "shuffle": scenario_shuffle,
         "serve": scenario_serve,
         "wildcard": scenario_wildcard,
         "finished": scenario_finished,
         "settings": scenario_settings, "cert": scenario_cert,
         "revoke": scenario_revoke, "far": scenario_far,
         "joinfirst": scenario_joinfirst,
         "cpu": scenario_cpu, "paced": scenario_paced}[scenario](c)
        ok = True
    except AssertionError as e:
        print("FAIL: %s" % e)
    finally:
        c.kill_all()
        if not ok:
            c.dump()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
