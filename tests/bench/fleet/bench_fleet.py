#!/usr/bin/python3
"""bench_fleet.py - the fleet benchmark (issue 34 item 1): gossipnode on
Pi-class devices of the fleet lab (tests/fleet/fleet: Debian 12 containers
booted with systemd, the .deb installed with apt, the unit started by
systemd, each device held to --quota % of a core, 6 % stepping like a
Pi 4: docs/benchmarks.md "Fleet lab"), over three links, for several
fleet sizes:

  uncapped   the lab's veth links, no cap, no delay
  100mbit    100 Mbit/s, 20 ms RTT
  wifi       10 Mbit/s, 40 ms RTT base, jitter 4 ms per direction (mean of
             an exponential, never overtaking: lab_delay.c), 1 % loss in
             bursts of 3 packets on average

Rows: every (size, link) pair, and per size an `isolated` row (the same
devices on an uncapped link, exchanging nothing: bench_cluster.py's
ISOLATED flags) and once per round one device alone at the same quota.
Each round runs every row, in an order rotated from round to round, each
on a fresh fleet (`fleet up`, install, keys, peers file, config, quota,
`systemctl start`), torn down after it (`fleet down`, also on an error or
a signal). Before each row the bench waits until no other fleet is up and
the 1-minute load average is below --max-load (printing that it waits),
and it records the load at the row's start and end. A link named
LINK+LABEL adds --variant LABEL's config lines; LINK+slow holds the last
device at --quota / --slow once every device has stepped (mixed device
classes: the row adds the fast devices' mean final accuracy and the slow
one's).

The training is bench_cluster.py's: MLP 784-512-10, batch 100, SGD
momentum 0.9, lr 0.1, cosine over --epochs passes of each device's shard
(device i of N trains on shard i/N), evaluation on the whole test set
every --eval-every steps (default: about 30 evaluations per run), target
88 %. Per row (bench_cluster.py's and bench_lab.py's functions, imported):
  - time to 88 %: the LAST device's training time (the event log's
    train_s: steps, hand-off, merging, waits; evaluations excluded) at
    its first evaluation at or above the target;
  - final accuracy (every device's last evaluation: min and median);
  - bytes per device per step: what each device's link sent (interface
    counter, headers included) over its steps, split into UDP datagrams
    (SWIM probes, acks, piggybacked membership: an iptables counter in
    the device's namespace) and the rest (TCP: slices, gradients, and the
    membership's anti-entropy SYNC, which rides the stream channel);
  - the share of received parameter slices averaged (each device's
    `exchange: ... averaged A ... of R received` line at its stop);
  - what the adaptation chose (its `adaptation: ... ending with C` line:
    codec and period K) and how often it changed;
  - throughput efficiency: ms per trained step of the isolated row of the
    same size and round (same devices, same quota, same host) over the
    real one; and the same against the device alone;
  - membership: isolated rows' protocol bytes sent per device per second
    (`gossipctl stats` node.bytes_out over a window while they train: with
    nothing exchanged that is all membership), and every row's UDP bytes
    per device per second.

PyTorch is not in the devices' rootfs, so DDP is a PROJECTION, printed as
such: its steps to 88 % for N processes (ddp_baseline.py --procs N on this
host's loopback; synchronous, so the step count does not depend on the
link or the CPU), times a projected step time
    t_step = c + 2 (N-1)/N x M / B + 2 (N-1) x L
(ring allreduce of M = 4 x 407,050 bytes over a link of B bytes/s and
one-way latency L), c being ddp_baseline.py's own step time with one
process in a cgroup at --quota (the fleet's cgroup code). B and L per link
are in LINKS below.

Plots (gnuplot, through tools/gossip-plot's helpers): accuracy against
training time per link (one line per size) and per size (one line per
link), the last device's curve of the median round, DDP's projection
dashed.

Usage (root; with --smoke a < 2 min check that the pieces work):
  /usr/bin/python3 tests/bench/fleet/bench_fleet.py --deb DEB
      [--sizes 4,16] [--links uncapped,wifi] [--rounds 3] [--epochs 10 |
      --steps N] [--quota 6] [--out DIR] [--keep] [--no-ddp]
  /usr/bin/python3 tests/bench/fleet/bench_fleet.py --deb DEB --smoke
Prints progress, a table (medians over rounds) and one JSON line per row
to OUT/rows.jsonl as it completes. Exit status: 0, 1 when a row failed (or
with --smoke, the check failed), 2 on bad usage.
"""
import argparse
import concurrent.futures
import importlib.machinery
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench", "cluster"))
sys.path.insert(0, os.path.join(ROOT, "tests", "lab"))
import bench_cluster as bc  # noqa: E402
import bench_lab as bl  # noqa: E402

fleet = importlib.machinery.SourceFileLoader(
    "fleet", os.path.join(ROOT, "tests", "fleet", "fleet")).load_module()
linklab = bl.linklab
gplot = bl.gplot

# name: lab options, label, and the link DDP's projection assumes
# (bandwidth bytes/s, one-way latency s). The uncapped lab link has no
# figure of its own: the projection takes a wired gigabit LAN (a Pi 4's
# port) at 0.1 ms. Wi-Fi: 20 ms one way plus the 4 ms mean jitter; its
# loss is left out (TCP would get less than 10 Mbit/s through 1 % loss,
# so the projection is DDP's best case).
LINKS = {
    "uncapped": (dict(rate=None, rtt=0.0, loss=0.0, jitter=0.0,
                      loss_burst=0.0), "uncapped (veth)", 1e9 / 8, 1e-4),
    "100mbit": (dict(rate=100e6, rtt=0.020, loss=0.0, jitter=0.0,
                     loss_burst=0.0), "100 Mbit/s, 20 ms", 100e6 / 8, 0.010),
    "wifi": (dict(rate=10e6, rtt=0.040, loss=0.01, jitter=0.004,
                  loss_burst=3.0),
             "Wi-Fi-like: 10 Mbit/s, 40 ms + jitter, 1 % bursty loss",
             10e6 / 8, 0.024),
}
ISO = "isolated"
PORT = 7955
MODEL_BYTES = 4 * 407050   # the MLP's parameters, fp32
SUBNET = "10.81.0"
NAME = "fbench"
POLL_S = 2.0               # event logs read from the host every POLL_S
PROGRESS_S = 20.0          # a progress line at most this often
MEMB_WINDOW_S = 20.0       # isolated rows: membership bytes over this
ADAPT_RE = re.compile(r"adaptation: (\d+) changes, ending with (.+?) "
                      r"\(our link needs every (\d+)")
INSTALL_WORKERS = 4        # parallel apt installs (2 cores)


def say(msg):
    print(f"bench-fleet: {msg}", flush=True)


def load1():
    return os.getloadavg()[0]


def wait_quiet(a):
    """Until no fleet but none of ours is up and the load is low."""
    t0 = time.monotonic()
    last = 0.0
    while True:
        others = [n for n in fleet.fleet_names() if n != NAME]
        ld = load1()
        if not others and ld < a.max_load:
            return time.monotonic() - t0
        waited = time.monotonic() - t0
        if waited > a.max_wait:
            say(f"waited {waited:.0f} s, going on (fleets {others}, load "
                f"{ld:.2f})")
            return waited
        if time.monotonic() - last > 60:
            say(f"waiting: other fleets {others or 'none'}, load {ld:.2f} "
                f"(want none and < {a.max_load})")
            last = time.monotonic()
        time.sleep(5)


class Row:
    """One (size, link) run on a fresh fleet."""

    def __init__(self, a, rnd, size, link):
        self.a, self.rnd, self.n, self.link = a, rnd, size, link
        # LINK+LABEL: the link with --variant LABEL's config lines
        self.base, _, self.var = link.partition("+")
        self.iso = link == ISO
        self.fl = fleet.Fleet(NAME)
        self.names = [f"dev{i}" for i in range(size)]
        self.tag = f"r{rnd}-n{size}-{link}"

    # --- devices ---------------------------------------------------------
    def sh(self, i, cmd, check=True, timeout=600, input=None):
        r = self.fl.run(i, ["sh", "-c", cmd], check=False, timeout=timeout,
                        input=input, limited=False)
        if check and r.returncode != 0:
            raise fleet.FleetError(f"dev{i}: `{cmd}`: exit {r.returncode}: "
                                   f"{(r.stderr + r.stdout).strip()[-500:]}")
        return r.stdout

    def each(self, fn, workers=None):
        with concurrent.futures.ThreadPoolExecutor(
                workers or self.n) as ex:
            return list(ex.map(fn, range(self.n)))

    def events_path(self, i):
        return os.path.join(self.fl.dev(i)["root"],
                            "var/lib/gossipnode/events.jsonl")

    def ctl(self, i, what):
        try:
            return json.loads(self.sh(i, f"gossipctl {what} --json",
                                      check=False))
        except ValueError:
            return {}

    def ns(self, i):
        return self.fl.dev(i)["ns"]

    def udp_bytes(self, i):
        """Bytes of UDP datagrams device i sent on its link (the counting
        rule added at setup)."""
        r = subprocess.run(["ip", "netns", "exec", self.ns(i), "iptables",
                            "-w", "-L", "OUTPUT", "-v", "-x", "-n"],
                           capture_output=True, text=True)
        for ln in r.stdout.splitlines():
            f = ln.split()
            if len(f) > 3 and f[2] in ("udp", "17"):
                return int(f[1])
        return None

    def conf(self, i):
        a = self.a
        lines = [
            "peers = /etc/gossipnode/peers.txt",
            f"listen = 0.0.0.0:{PORT}",
            f"name = {self.names[i]}",
            f"shard = {i}/{self.n}",
            f"seed = {a.seed}",
            f"lr = {a.lr}",
            f"eval-every = {a.eval_every_for(self.n, self.iso)}",
            "event-log = /var/lib/gossipnode/events.jsonl",
            "fresh = yes",
        ]
        if self.iso:
            lines.append(f"steps = {a.iso_steps}")
            lines += ["avg-every = 0", "codec = none", "wait-ms = 0"]
        elif a.steps:
            lines.append(f"steps = {a.steps}")
        else:
            lines.append(f"epochs = {a.epochs}")
        var = a.variants.get(self.var, []) if self.var else []
        return "\n".join(lines + a.extra_conf + var) + "\n"

    def setup(self):
        prof = LINKS["uncapped" if self.iso else self.base][0]
        ns = types.SimpleNamespace(
            devices=[("amd64", None)] * self.n, burst=None,
            queue_latency=0.05, seed=self.a.seed, subnet=SUBNET,
            delayer=self.a.delayer, tcp_cc=self.a.tcp_cc, **prof)
        t0 = time.monotonic()
        self.fl.up(ns)
        self.boot_s = time.monotonic() - t0

        def install(i):
            self.fl.put(i, self.a.deb, "/root/gossipnode.deb")
            self.sh(i, "apt-get install -y -q /root/gossipnode.deb",
                    timeout=900)
            return self.sh(i, "gossip-keygen --show /etc/gossipnode/node.key "
                           f"--addr {self.fl.dev(i)['addr']}:{PORT} "
                           f"--name {self.names[i]}").strip()
        lines = self.each(install, INSTALL_WORKERS)
        peers = "\n".join(lines) + "\n"
        for i in range(self.n):
            self.sh(i, "cat > /etc/gossipnode/peers.txt", input=peers)
            self.sh(i, "cat > /etc/gossipnode/gossipnode.conf",
                    input=self.conf(i))
            subprocess.run(["ip", "netns", "exec", self.ns(i), "iptables",
                            "-w", "-A", "OUTPUT", "-o", linklab.IFACE, "-p",
                            "udp"], check=True)
        self.setup_s = time.monotonic() - t0

    # --- the run ---------------------------------------------------------
    def read_events(self, i):
        return bc.events(self.events_path(i))

    def stopped(self, i):
        return any(e["ev"] == "stop" for e in self.read_events(i))

    def progress(self, t0):
        steps, accs = [], []
        for i in range(self.n):
            evs = self.read_events(i)
            st = [e["step"] for e in evs if e["ev"] in ("step", "eval")]
            ac = [e["test_acc"] for e in evs if e["ev"] == "eval"
                  and e.get("test_acc") is not None]
            steps.append(st[-1] if st else 0)
            accs.append(ac[-1] if ac else None)
        got = [x for x in accs if x is not None]
        say(f"{self.tag}: {time.monotonic() - t0:.0f} s, steps "
            f"{min(steps)}..{max(steps)}, test acc "
            + (f"{min(got):.1f}..{max(got):.1f} %" if got else "-")
            + f", load {load1():.2f}")

    def run(self):
        a = self.a
        for i in range(self.n):
            self.fl.quota(i, a.quota)
        tx0 = [c["tx_bytes"] for c in self.fl.lab.counters()]
        udp0 = [self.udp_bytes(i) for i in range(self.n)]
        t0 = time.monotonic()
        self.each(lambda i: self.sh(i, "systemctl start --no-block "
                                    "gossipnode"))
        memb = None
        last = t0
        deadline = t0 + a.row_timeout
        self.slowed_s = None
        while True:
            time.sleep(POLL_S)
            done = [self.stopped(i) for i in range(self.n)]
            if self.var == "slow" and self.slowed_s is None and all(
                    any(e["ev"] == "step" for e in self.read_events(i))
                    for i in range(self.n)):
                self.fl.quota(self.n - 1, a.quota / a.slow)
                self.slowed_s = time.monotonic() - t0
                say(f"{self.tag}: {self.names[-1]} at "
                    f"{a.quota / a.slow:g} % of a core from "
                    f"{self.slowed_s:.0f} s")
            if self.iso and memb is None and self.n > 1:
                memb = self.membership_window()
            if all(done):
                break
            if time.monotonic() > deadline:
                raise fleet.FleetError(f"{self.tag}: not done in "
                                       f"{a.row_timeout:.0f} s")
            if time.monotonic() - last > PROGRESS_S:
                self.progress(t0)
                last = time.monotonic()
        self.wall_s = time.monotonic() - t0
        self.udp_s = self.wall_s
        stats = self.each(lambda i: self.ctl(i, "stats"))
        train = self.each(lambda i: self.ctl(i, "train"))
        tx = [c["tx_bytes"] - b for c, b in
              zip(self.fl.lab.counters(), tx0)]
        udp = [(u - b) if u is not None and b is not None else None
               for u, b in zip([self.udp_bytes(i) for i in range(self.n)],
                               udp0)]
        # stopping at full speed: the leave and the checkpoint are not
        # measured
        for i in range(self.n):
            self.fl.quota(i, None)
        self.each(lambda i: self.sh(i, "systemctl stop gossipnode",
                                    check=False, timeout=300))
        logs = self.each(lambda i: self.sh(
            i, "journalctl -u gossipnode --no-pager -q -o cat", check=False))
        return self.result(stats, train, tx, udp, logs, memb)

    def membership_window(self):
        """Isolated rows: node.bytes_out per device per second over
        MEMB_WINDOW_S once every device trains (None if they end
        before)."""
        if not all(any(e["ev"] == "step" for e in self.read_events(i))
                   for i in range(self.n)):
            return None
        b0 = self.each(lambda i: self.ctl(i, "stats"))
        t0 = time.monotonic()
        time.sleep(MEMB_WINDOW_S)
        if any(self.stopped(i) for i in range(self.n)):
            return {"error": "a device ended inside the window"}
        b1 = self.each(lambda i: self.ctl(i, "stats"))
        dt = time.monotonic() - t0
        per = [(y.get("node", {}).get("bytes_out", 0) -
                x.get("node", {}).get("bytes_out", 0)) / dt
               for x, y in zip(b0, b1)]
        return {"window_s": dt, "Bps": per}

    # --- what it gave ----------------------------------------------------
    def result(self, stats, train, tx, udp, logs, memb):
        a = self.a
        devs = []
        evals = {}
        for i in range(self.n):
            evs = self.read_events(i)
            reached, eff, acc, step, msps = bc.node_result(evs, a.target)
            last_eval = [e for e in evs if e["ev"] == "eval"][-1:]
            skipped = last_eval[0].get("skipped", 0) if last_eval else 0
            logf = os.path.join(self.workdir, f"{self.names[i]}.log")
            with open(logf, "w") as f:
                f.write(logs[i])
            shutil.copyfile(self.events_path(i), os.path.join(
                self.workdir, f"{self.names[i]}.events.jsonl"))
            avg, rec, waits, tout = bl.exchange_stats(logf)
            ad = ADAPT_RE.findall(logs[i])
            trained = (step or 0) - (skipped or 0)
            devs.append({
                "name": self.names[i], "seconds_to_target": reached,
                "compute_efficiency": eff, "final_test_acc": acc,
                "step": step, "skipped": skipped, "ms_per_step": msps,
                "averaged": avg, "received": rec, "waits": waits,
                "waits_timed_out": tout,
                "adapt_changes": int(ad[-1][0]) if ad else None,
                "adapt_final": ad[-1][1] if ad else None,
                "adapt_own_k": int(ad[-1][2]) if ad else None,
                "tx_bytes": tx[i], "udp_bytes": udp[i],
                "bytes_out": stats[i].get("node", {}).get("bytes_out"),
                "extra_batches": train[i].get("extra_batches"),
                "exchange": train[i].get("exchange"),
                "tx_per_step": tx[i] / trained if trained > 0 else None,
                "udp_per_step": udp[i] / trained if udp[i] is not None
                and trained > 0 else None,
            })
            evals[self.names[i]] = [(e["step"], e["train_s"], e["test_acc"])
                                    for e in evs if e["ev"] == "eval"
                                    and e.get("test_acc") is not None]
        times = [d["seconds_to_target"] for d in devs]
        accs = [d["final_test_acc"] for d in devs
                if d["final_test_acc"] is not None]
        rec = sum(d["received"] or 0 for d in devs)
        row = {
            "round": self.rnd, "size": self.n, "link": self.link,
            "tcp_cc": self.a.tcp_cc or fleet.DEVICE_TCP_CC,
            "quota_pct": a.quota, "epochs": a.epochs, "steps": a.steps,
            "seconds_to_target": None if any(t is None for t in times)
            else max(times),
            "final_acc_min": min(accs) if accs else None,
            "final_acc_median": bc.median(accs),
            "ms_per_step": bc.mean([d["ms_per_step"] for d in devs]),
            "compute_efficiency": bc.mean([d["compute_efficiency"]
                                           for d in devs]),
            "extra_batches_per_step": bc.mean([
                d["extra_batches"] / d["step"] for d in devs
                if d["extra_batches"] is not None and d["step"]]),
            "tx_per_step": bc.mean([d["tx_per_step"] for d in devs]),
            "udp_per_step": bc.mean([d["udp_per_step"] for d in devs]),
            "udp_Bps": bc.mean([d["udp_bytes"] / self.udp_s
                                for d in devs if d["udp_bytes"] is not None]),
            "share_averaged": sum(d["averaged"] or 0 for d in devs) / rec
            if rec else None,
            "adapt": sorted({d["adapt_final"] for d in devs
                             if d["adapt_final"]}),
            "adapt_changes": [d["adapt_changes"] for d in devs],
            "membership": memb,
            "membership_Bps": bc.mean(memb["Bps"]) if memb and
            memb.get("Bps") else None,
            "boot_s": self.boot_s, "setup_s": self.setup_s,
            "wall_s": self.wall_s, "devices": devs, "evals": evals,
        }
        if self.var == "slow":
            # the last device slowed: the others' figures apart from it
            fast = [d["final_test_acc"] for d in devs[:-1]
                    if d["final_test_acc"] is not None]
            row["slow"] = {"ratio": a.slow, "from_s": self.slowed_s,
                           "device": self.names[-1]}
            row["fast_final_acc"] = bc.mean(fast)
            row["slow_final_acc"] = devs[-1]["final_test_acc"]
        return row

    # --- one round: the lifecycle ChurnRow (churn_fleet.py) shares ------

    def workdir_of(self):
        """Where this row's logs go (under --out)."""
        return os.path.join(self.a.out, "rows", self.tag)

    def head(self):
        """The keys a row starts with, before its results."""
        return {"round": self.rnd, "size": self.n, "link": self.link}

    def tell(self, row):
        """The row's line once it is done."""
        say(f"{self.tag}: done: {brief(row)}, load {row['load_start']:.2f}"
            f" -> {row['load_end']:.2f}")

    def go(self):
        """Wait for a quiet host, set up, run, tear down; the row (or one
        with an error)."""
        self.workdir = self.workdir_of()
        os.makedirs(self.workdir, exist_ok=True)
        row = self.head()
        row["waited_s"] = wait_quiet(self.a)
        row["load_start"] = load1()
        say(f"{self.tag}: start, load {row['load_start']:.2f}")
        try:
            self.setup()
            row.update(self.run())
        except (fleet.FleetError, linklab.LabError,
                subprocess.SubprocessError, OSError) as e:
            row["error"] = str(e)[-600:]
            say(f"{self.tag}: FAILED: {row['error']}")
        finally:
            try:
                self.fl.down(quiet=True)
            except fleet.FleetError as e:
                row.setdefault("error", f"teardown: {e}")
        row["load_end"] = load1()
        if not self.a.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.tell(row)
        return row


def brief(r):
    if r.get("error"):
        return "error"
    return (f"88 % at {bc.fmt(r.get('seconds_to_target'))} s, final "
            f"{bc.fmt(r.get('final_acc_min'), '{:.2f}')}-"
            f"{bc.fmt(r.get('final_acc_median'), '{:.2f}')} %, "
            f"{bc.fmt(r.get('ms_per_step'), '{:.1f}')} ms/step, "
            f"{bc.fmt((r.get('tx_per_step') or 0) / 1e3, '{:.1f}')} kB/step, "
            f"averaged {bc.fmt(r.get('share_averaged'), '{:.1%}')}, "
            f"adapt {','.join(r.get('adapt') or []) or '-'}, membership "
            f"{bc.fmt(r.get('membership_Bps'), '{:.0f}')} B/s"
            + (f"; fast devices {bc.fmt(r.get('fast_final_acc'), '{:.2f}')}"
               f" %, the slow one {bc.fmt(r.get('slow_final_acc'), '{:.2f}')}"
               f" %" if r.get("slow") else ""))


# --- DDP, projected --------------------------------------------------------

def ddp_cmd(a, procs, extra):
    return ["/usr/bin/python3", os.path.join(ROOT, "tests", "bench",
                                             "cluster", "ddp_baseline.py"),
            "--procs", str(procs), "--lr", str(a.lr), "--seed", str(a.seed),
            "--target", str(a.target / 100.0), "--port",
            str(bc.free_port())] + extra


def ddp_steps(a, n):
    """DDP-n on this host's loopback, unthrottled: the steps (and evals)
    to the target; the same at any speed."""
    wait_quiet(a)
    say(f"DDP-{n} on loopback: steps to {a.target} %")
    epochs = a.epochs if not a.steps else max(1, a.steps * n * 100 // 60000)
    cmd = ddp_cmd(a, n, ["--max-epochs", str(epochs), "--eval-every",
                         str(a.eval_every_for(n, False))])
    r = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=a.row_timeout)
    if r.returncode != 0:
        return {"error": f"exit {r.returncode}: {r.stderr.strip()[-300:]}"}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    reached = out["seconds_to_target"] is not None
    return {"procs": n, "steps": out["steps"], "reached": reached,
            "test_acc": out["test_acc"] * 100,
            "evals": [(s, acc * 100) for s, _, acc in out["evals"]]}


def ddp_compute(a):
    """ddp_baseline.py with one process in a cgroup at --quota: its steady
    ms per step."""
    wait_quiet(a)
    dev = "ddp"
    say(f"DDP compute: one process at {a.quota} % of a core")
    fleet.cg_make(NAME, dev, a.quota)
    try:
        cmd = ddp_cmd(a, 1, ["--max-steps", str(a.ddp_compute_steps),
                             "--eval-every", "1000000"])
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=3600, preexec_fn=lambda: fleet.cg_join(
                               NAME, dev, ("cpu", "cpuacct", "memory")))
    finally:
        for h in fleet.CG_HIER:
            fleet.cg_remove(fleet.cg_path(h, NAME))
    if r.returncode != 0:
        return {"error": f"exit {r.returncode}: {r.stderr.strip()[-300:]}"}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return {"ms_per_step": out.get("ms_per_step_steady") or
            out["ms_per_step"], "steps": out["steps"],
            "torch": out.get("torch")}


def ddp_project(n, link, compute_ms, steps):
    """Projected DDP-n step (ms) and time to target (s) on link."""
    _, _, bw, lat = LINKS[link.partition("+")[0]]
    comm = 2 * (n - 1) / n * MODEL_BYTES / bw + 2 * (n - 1) * lat
    step_ms = compute_ms + comm * 1e3
    t = steps["steps"] * step_ms / 1e3 if steps.get("reached") else None
    return {"step_ms": step_ms, "allreduce_ms": comm * 1e3,
            "seconds_to_target": t, "steps": steps.get("steps"),
            "final_acc": steps.get("test_acc"), "projected": True}


# --- report ----------------------------------------------------------------

def rows_of(rows, n, link):
    return [r for r in rows if r["size"] == n and r["link"] == link
            and not r.get("error")]


def tput(rows, rs, ref_n):
    """Throughput efficiency of rows rs: the median isolated ms/step of
    size ref_n over rs's median ms/step. Medians over all rounds, not
    round by round: a device's speed moves by some 15 % from row to row
    with what else runs on the shared host, more than within a round."""
    iso = bc.median([x["ms_per_step"] for x in rows_of(rows, ref_n, ISO)])
    ms = bc.median([r.get("ms_per_step") for r in rs])
    return iso / ms if iso and ms else None


def summary(a, rows, ddp):
    out = []
    out.append(f"MLP 784-512-10, batch 100, lr {a.lr}, "
               + (f"{a.steps} steps" if a.steps else
                  f"cosine over {a.epochs} passes of each shard")
               + f", devices at {a.quota:g} % of a core, target "
               f"{a.target} %; medians over rounds (min-max)")
    hdr = ("| devices | link | rounds | s to 88 % (last device) | final acc "
           "% (min device) | ms/step | kB/device/step (UDP) | UDP B/device/s "
           "| slices averaged | adaptation chose | tput eff. vs isolated "
           "N / alone (medians) | DDP-N projected s to 88 % |")
    out += [hdr, "|" + "---|" * (hdr.count("|") - 1)]

    def med(rs, key, f="{:.1f}", scale=1.0):
        xs = [r.get(key) for r in rs]
        if not xs:
            return "-"
        m = bc.median(xs)
        good = [x for x in xs if x is not None]
        rng = (f" ({f.format(min(good) * scale)}-"
               f"{f.format(max(good) * scale)})") if len(good) > 1 else ""
        return (bc.fmt(m * scale if m is not None else None, f) + rng +
                (f" [{len(xs) - len(good)} never]" if len(good) < len(xs)
                 else ""))
    for n in a.sizes:
        for link in a.links:
            rs = rows_of(rows, n, link)
            if not rs:
                continue
            adapt = sorted({c for r in rs for c in r.get("adapt") or []})
            d = ddp.get(f"{n}/{link}") or {}
            out.append(
                f"| {n} | {link} | {len(rs)} | "
                f"{med(rs, 'seconds_to_target')} | "
                f"{med(rs, 'final_acc_min', '{:.2f}')} | "
                f"{med(rs, 'ms_per_step')} | "
                f"{med(rs, 'tx_per_step', '{:.1f}', 1e-3)} "
                f"({med(rs, 'udp_per_step', '{:.2f}', 1e-3)}) | "
                f"{med(rs, 'udp_Bps', '{:.0f}')} | "
                f"{med(rs, 'share_averaged', '{:.1%}')} | "
                f"{'; '.join(adapt) or '-'} | "
                f"{bc.fmt(tput(rows, rs, n), '{:.1%}')} / "
                f"{bc.fmt(tput(rows, rs, 1), '{:.1%}')} | "
                f"~{bc.fmt(d.get('seconds_to_target'), '{:.0f}')} p |")
    out.append("")
    out.append("| devices | isolated: ms/step | membership B/device/s "
               "(gossipctl bytes_out, no exchange) |")
    out.append("|---|---|---|")
    for n in sorted(set(a.iso_sizes) | {1}):
        rs = rows_of(rows, n, ISO)
        if rs:
            out.append(f"| {n} | {med(rs, 'ms_per_step', '{:.2f}')} | "
                       f"{med(rs, 'membership_Bps', '{:.0f}')} |")
    if ddp:
        out.append("")
        out.append("DDP (projected, not run on the devices): t_step = c + "
                   "2(N-1)/N x M/B + 2(N-1) x L, M = "
                   f"{MODEL_BYTES} B, c = "
                   f"{bc.fmt(ddp.get('compute', {}).get('ms_per_step'), '{:.1f}')}"
                   f" ms (one process at {a.quota:g} %)")
        for k, v in sorted(ddp.items()):
            if "/" in k:
                out.append(f"  DDP-{k}: step {v['step_ms']:.1f} ms "
                           f"(allreduce {v['allreduce_ms']:.1f}), "
                           f"{v.get('steps')} steps, "
                           f"~{bc.fmt(v['seconds_to_target'], '{:.0f}')} s "
                           f"to target, final "
                           f"{bc.fmt(v.get('final_acc'), '{:.2f}')} %")
    return "\n".join(out)


def last_curve(row):
    """(train_s, acc) of the last device: at each evaluated step, the
    latest time and the lowest accuracy over devices."""
    by = {}
    for pts in row["evals"].values():
        for s, t, acc in pts:
            t0, a0 = by.get(s, (0.0, 101.0))
            by[s] = (max(t0, t), min(a0, acc))
    return [by[s] for s in sorted(by) if by[s][0] > 0]


def median_row(rs):
    rs = sorted(rs, key=lambda r: float("inf") if r.get(
        "seconds_to_target") is None else r["seconds_to_target"])
    return rs[len(rs) // 2] if rs else None


def plot(a, rows, ddp, fixed, key):
    """acc_time_{key}.png: one line per value of the other dimension."""
    if shutil.which("gnuplot") is None:
        return None
    png = os.path.join(a.out, f"acc_time_{key}.png")
    term = gplot.terminal().format(w=1000, h=600)
    with tempfile.TemporaryDirectory(prefix="gn-fleetplot-") as tmp:
        cmds = []
        pairs = ([(fixed, link) for link in a.links] if isinstance(fixed, int)
                 else [(n, fixed) for n in a.sizes])
        for k, (n, link) in enumerate(pairs):
            r = median_row(rows_of(rows, n, link))
            if not r:
                continue
            d = gplot.write_data(tmp, "g", last_curve(r))
            cmds.append(f"{gplot.gp_quote(d)} using 1:2 with lines lw 2 "
                        f"lc {k + 1} title "
                        f"{gplot.gp_quote(f'gossipnode {n} devices, {link}')}")
            p = ddp.get(f"{n}/{link}")
            st = ddp.get(f"steps{n}")
            if p and st and st.get("evals"):
                d = gplot.write_data(tmp, "d", [
                    (s * p["step_ms"] / 1e3, acc) for s, acc in st["evals"]])
                cmds.append(f"{gplot.gp_quote(d)} using 1:2 with lines lw 1 "
                            f"dt 2 lc {k + 1} title "
                            f"{gplot.gp_quote(f'DDP-{n} {link} (projected)')}")
        if not cmds:
            return None
        title = (f"{fixed} devices at {a.quota:g} % of a core"
                 if isinstance(fixed, int) else
                 LINKS[fixed.partition("+")[0]][1] + (
                     f" [{fixed.partition('+')[2]}]" if "+" in fixed else ""))
        script = (f"{term}\nset output {gplot.gp_quote(png)}\n"
                  f"set title {gplot.gp_quote('last device test accuracy, ' + title)}\n"
                  "set xlabel 'training time (s, log scale)'\n"
                  "set ylabel 'test accuracy (%)'\nset logscale x\n"
                  "set yrange [70:90]\nset grid\nset key bottom right\n"
                  "set arrow from graph 0, first 88 to graph 1, first 88 "
                  "nohead dt 3 lc rgb 'red'\n"
                  "plot " + ", \\\n  ".join(cmds) + "\n")
        r = subprocess.run(["gnuplot"], input=script, text=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return png if r.returncode == 0 else None


# --- main ------------------------------------------------------------------

def plan(a):
    """Each round's rows, rotated from round to round."""
    rows = [(n, link) for n in a.sizes for link in a.links
            if f"{n}:{link}" not in a.skip]
    if a.isolated:
        rows += [(n, ISO) for n in a.iso_sizes if n > 1]
        rows.append((1, ISO))
    out = []
    for rnd in range(a.rounds):
        k = rnd % len(rows)
        out.append(rows[k:] + rows[:k])
    return out


def smoke_check(rows):
    """--smoke: the row ran, both devices trained and averaged."""
    r = rows[0] if rows else {}
    ok = (not r.get("error") and r.get("devices") and all(
        d["step"] == 200 and (d["averaged"] or 0) > 0 and
        d["final_test_acc"] is not None for d in r["devices"]))
    say("smoke: " + ("ok" if ok else "FAIL") + f": {brief(r) if r else '-'}")
    return 0 if ok else 1


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deb", default=None,
                    help="the amd64 package (default build/gossipnode_*.deb)")
    ap.add_argument("--build", default="build")
    ap.add_argument("--sizes", default="4,16")
    ap.add_argument("--links", default="uncapped,wifi")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=None,
                    help="train this many steps instead of --epochs passes")
    ap.add_argument("--iso-steps", type=int, default=2500,
                    help="steps of an isolated row (its ms/step and its "
                    "membership window)")
    ap.add_argument("--eval-every", type=int, default=None,
                    help="default: about 30 evaluations per run, >= 10")
    ap.add_argument("--quota", type=float, default=6.0)
    ap.add_argument("--target", type=float, default=88.0)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-load", type=float, default=1.5)
    ap.add_argument("--max-wait", type=float, default=7200,
                    help="seconds to wait for a quiet host before a row")
    ap.add_argument("--row-timeout", type=float, default=3600)
    ap.add_argument("--iso-sizes", default=None,
                    help="sizes of the isolated rows (default --sizes)")
    ap.add_argument("--no-isolated", dest="isolated", action="store_false")
    ap.add_argument("--skip", default="", metavar="N:LINK,...",
                    help="(size, link) rows not to run, e.g. 3:uncapped+slow")
    ap.add_argument("--no-ddp", dest="ddp", action="store_false")
    ap.add_argument("--ddp-compute-steps", type=int, default=100)
    ap.add_argument("--conf", action="append", default=[],
                    dest="extra_conf", metavar="LINE",
                    help="an extra line for every device's config file")
    ap.add_argument("--variant", action="append", default=[],
                    metavar="LABEL=LINE;LINE",
                    help="config lines for the links named LINK+LABEL in "
                    "--links, e.g. k8=avg-every = 8 with --links "
                    "uncapped,uncapped+k8")
    ap.add_argument("--slow", type=float, default=4.0, metavar="X",
                    help="the links named LINK+slow: the last device at "
                    "--quota / X once every device has stepped (mixed "
                    "device classes, issue 34 item 3; a slow start would "
                    "be a late join)")
    ap.add_argument("--delayer", default=None)
    ap.add_argument("--tcp-cc", default=None,
                    help="the devices' TCP congestion control (default: "
                    "the fleet's, cubic, as on a Debian or Raspberry Pi "
                    "OS device)")
    ap.add_argument("--out", default="fleet-bench")
    ap.add_argument("--keep", action="store_true",
                    help="keep each row's journals and event logs under "
                    "OUT/rows/")
    ap.add_argument("--report", default=None, metavar="ROWS",
                    help="no run: the table and plots (into --out) from "
                    "an earlier run's rows.jsonl")
    ap.add_argument("--smoke", action="store_true",
                    help="2 devices, 200 steps, uncapped, no isolated rows, "
                    "no DDP: exit 0 if they trained and averaged")
    a = ap.parse_args()
    if a.smoke:
        a.sizes, a.links, a.rounds, a.steps = "2", "uncapped", 1, 200
        a.eval_every = a.eval_every or 50
        a.isolated = a.ddp = False
        a.max_load, a.max_wait = 99.0, 0.0
    a.sizes = [int(x) for x in a.sizes.split(",")]
    a.skip = set(x for x in a.skip.split(",") if x)
    a.iso_sizes = [int(x) for x in a.iso_sizes.split(",")] \
        if a.iso_sizes else a.sizes
    a.links = a.links.split(",")
    a.variants = {"slow": []}
    for v in a.variant:
        label, _, lines = v.partition("=")
        a.variants[label] = [ln.strip() for ln in lines.split(";")]
    for link in a.links:
        base, _, var = link.partition("+")
        if base not in LINKS or (var and var not in a.variants):
            ap.error(f"unknown link {link} ({', '.join(LINKS)}, "
                     "+LABEL of a --variant)")
    if a.deb is None:
        debs = sorted(f for f in os.listdir(a.build)
                      if re.match(r"gossipnode_.*_amd64\.deb$", f)) \
            if os.path.isdir(a.build) else []
        if not debs:
            ap.error(f"no --deb and no gossipnode_*_amd64.deb in {a.build} "
                     "(cd build && cpack -G DEB)")
        a.deb = os.path.join(a.build, debs[-1])
    a.deb = os.path.abspath(a.deb)
    a.delayer = linklab.find_delayer(a.delayer or os.path.join(
        a.build, "tests", "lab", "lab_delay"))
    a.out = os.path.abspath(a.out)

    def eval_every_for(n, iso):
        if a.eval_every:
            return a.eval_every
        if iso:
            return a.iso_steps
        steps = a.steps or a.epochs * 60000 // (100 * n)
        return max(10, steps // 30)
    a.eval_every_for = eval_every_for
    return a


def report(a):
    """--report ROWS: the table and plots again from a rows.jsonl."""
    rows, ddp = [], {}
    with open(a.report) as f:
        for ln in f:
            r = json.loads(ln)
            if "ddp" in r:
                ddp = r["ddp"]
            else:
                rows.append(r)
    os.makedirs(a.out, exist_ok=True)
    ok = [r for r in rows if not r.get("error")]
    a.sizes = sorted({r["size"] for r in ok if r["link"] != ISO})
    a.iso_sizes = sorted({r["size"] for r in ok if r["link"] == ISO})
    a.links = sorted({r["link"] for r in ok if r["link"] != ISO},
                     key=lambda k: (list(LINKS).index(k.partition("+")[0]),
                                    k))
    if ok and ok[0].get("epochs"):
        a.epochs, a.steps = ok[0]["epochs"], ok[0].get("steps")
    text = summary(a, rows, ddp)
    print(text)
    for link in a.links:
        print(plot(a, rows, ddp, link, link) or f"(no plot for {link})")
    for n in a.sizes:
        print(plot(a, rows, ddp, n, f"n{n}") or f"(no plot for {n})")
    return 0


def main():
    a = parse_args()
    if a.report:
        return report(a)
    if os.geteuid() != 0:
        print("bench-fleet: needs root (the fleet lab)", file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    fleet.rootfs_add_deps("amd64", a.deb)
    linklab.trap_signals()
    rows, ddp = [], {}
    jl = open(os.path.join(a.out, "rows.jsonl"), "a")
    say(f"{a.deb}; sizes {a.sizes}, links {a.links}, {a.rounds} round(s), "
        f"quota {a.quota:g} %, out {a.out}")
    status = 0
    try:
        if fleet.Fleet(NAME).leftovers() or os.path.isdir(
                os.path.join(fleet.STATE_ROOT, NAME)):
            say(f"a fleet {NAME} is left from an earlier run: down")
            fleet.Fleet(NAME).down(quiet=True)
        if a.ddp:
            ddp["compute"] = ddp_compute(a)
            say(f"DDP compute: {ddp['compute']}")
            for n in a.sizes:
                ddp[f"steps{n}"] = ddp_steps(a, n)
                say(f"DDP-{n}: {ddp[f'steps{n}'].get('steps')} steps, "
                    f"reached {ddp[f'steps{n}'].get('reached')}, final "
                    f"{bc.fmt(ddp[f'steps{n}'].get('test_acc'), '{:.2f}')} %")
                for link in a.links:
                    if ddp["compute"].get("ms_per_step") and \
                            not ddp[f"steps{n}"].get("error"):
                        ddp[f"{n}/{link}"] = ddp_project(
                            n, link, ddp["compute"]["ms_per_step"],
                            ddp[f"steps{n}"])
            jl.write(json.dumps({"ddp": ddp}) + "\n")
            jl.flush()
        for rnd, order in enumerate(plan(a), 1):
            say(f"round {rnd}: " + " ".join(f"{n}/{link}"
                                            for n, link in order))
            for n, link in order:
                r = Row(a, rnd, n, link).go()
                rows.append(r)
                if r.get("error"):
                    status = 1
                jl.write(json.dumps(r) + "\n")
                jl.flush()
    except linklab.LabSignal as e:
        say(f"{e}: stopping, partial results")
        status = 1
    finally:
        try:
            fleet.Fleet(NAME).down(quiet=True)
        except fleet.FleetError as e:
            say(f"teardown: {e}")
        jl.close()
    text = summary(a, rows, ddp)
    print(text)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(text + "\n")
    for link in a.links:
        print(plot(a, rows, ddp, link, link) or f"(no plot for {link})")
    for n in a.sizes:
        print(plot(a, rows, ddp, n, f"n{n}") or f"(no plot for {n})")
    if a.smoke:
        return smoke_check(rows)
    return status


if __name__ == "__main__":
    sys.exit(main())
