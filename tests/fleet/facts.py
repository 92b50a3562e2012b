#!/usr/bin/python3
"""facts.py - the operator's facts of docs/benchmarks.md "Fleet lab",
measured on the fleet lab under the unit as shipped.

  facts.py --deb AMD64_DEB [--quota PCT] [--steps N] [--window S]

Two clusters of three amd64 devices, each device held to --quota % of a
core (the Pi 4 class of calibrate.py), the package installed with apt and
started with `systemctl enable --now gossipnode`:
  - "guide": the settings of operations.md step 4 (checkpoint-every 1000,
    event log under /var/lib/gossipnode, metrics), `steps = N`;
  - "defaults": only the peers file and the shard, everything else the
    shipped /etc/gossipnode/gossipnode.conf's defaults (one checkpoint
    at exit, no event log), `steps = N`.
For every device: the container's boot time (nspawn to `running`); the
unit's start to READY (systemd's own timestamps: InactiveExit to
ActiveEnter); peak and current RSS of the daemon (VmHWM, VmRSS); bytes it
wrote to storage (/proc/PID/io write_bytes, what reaches the block layer)
over --window seconds of training, per hour, and the journal's growth over
the same window; after its N steps, while it serves: the CPU the whole
device used over --window seconds (cpuacct of its cgroup: systemd,
journald and the daemon), as % of one core. Prints one table per cluster
and the medians.
"""
import argparse
import importlib.machinery
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
guide = importlib.machinery.SourceFileLoader(
    "guide", os.path.join(HERE, "test_fleet_guide.py")).load_module()
fleet = guide.fleet

GROUPS = ("guide", "defaults")


def conf(group, shard, steps):
    if group == "guide":
        return (f"peers = /etc/gossipnode/peers.txt\n"
                f"listen = 0.0.0.0:{guide.PORT}\nshard = {shard}/3\n"
                f"steps = {steps}\ncheckpoint-every = 1000\n"
                "metrics = 127.0.0.1:7956\n"
                "event-log = /var/lib/gossipnode/events.jsonl\n")
    return (f"peers = /etc/gossipnode/peers.txt\n"
            f"listen = 0.0.0.0:{guide.PORT}\nshard = {shard}/3\n"
            f"steps = {steps}\n")


def proc_field(g, i, pid, path, key):
    out = g.sh(i, f"cat /proc/{pid}/{path}", check=False)
    for ln in out.splitlines():
        if ln.startswith(key):
            return int(ln.split()[1])
    return None


def journal_bytes(g, i):
    out = g.sh(i, "du -sb /run/log/journal /var/log/journal 2>/dev/null",
               check=False)
    return sum(int(ln.split()[0]) for ln in out.splitlines() if ln.split())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deb", required=True)
    ap.add_argument("--quota", type=float, default=5.0)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--name", default="facts")
    a = ap.parse_args()
    fleet.rootfs_add_deps("amd64", a.deb)
    ga = argparse.Namespace(deb=os.path.abspath(a.deb), deb_next=None,
                            deb_arm64=None, name=a.name, quota=a.quota,
                            epochs=1, firewall=[], quick_check="true")
    g = guide.Guide(ga, guide.Checks())
    g.n = 6
    g.boards = [f"{grp}-{k}" for grp in GROUPS for k in range(3)]
    ns = argparse.Namespace(
        devices=fleet.parse_spec("amd64*6"), rate=None, burst=None,
        queue_latency=0.05, rtt=0.0, loss=0.0, seed=1, subnet="10.80.0",
        delayer=None)
    rows = {i: {} for i in range(6)}
    try:
        st = g.fl.up(ns)
        for i, d in enumerate(st["devices"]):
            rows[i]["boot_s"] = d["boot_s"]

        def install(i):
            g.fl.put(i, ga.deb, "/root/gn.deb")
            g.sh(i, "apt install -y /root/gn.deb", timeout=900)
        g.all(install)
        lines = g.all(lambda i: g.sh(
            i, "gossip-keygen --show /etc/gossipnode/node.key --addr "
            f"{g.addr(i)} --name {g.boards[i]}").strip())
        for gi, grp in enumerate(GROUPS):
            idx = range(3 * gi, 3 * gi + 3)
            peers = "\n".join(lines[j] for j in idx) + "\n"
            for k, j in enumerate(idx):
                g.sh(j, "cat > /etc/gossipnode/peers.txt", input=peers)
                if grp == "guide":
                    g.sh(j, "cat > /etc/gossipnode/gossipnode.conf",
                         input=conf(grp, k, a.steps))
                else:  # the shipped file, and the three lines a cluster needs
                    g.sh(j, "cat >> /etc/gossipnode/gossipnode.conf",
                         input=conf(grp, k, a.steps))
        for i in range(6):
            g.fl.quota(i, a.quota)
        g.all(lambda i: g.sh(i, "systemctl enable --now gossipnode",
                             timeout=600))
        for i in range(6):
            t0 = int(g.prop(i, "InactiveExitTimestampMonotonic"))
            t1 = int(g.prop(i, "ActiveEnterTimestampMonotonic"))
            rows[i]["start_to_ready_s"] = (t1 - t0) / 1e6
        time.sleep(10)  # past the first steps
        pids = {i: g.main_pid(i) for i in range(6)}
        w0 = {i: proc_field(g, i, pids[i], "io", "write_bytes")
              for i in range(6)}
        j0 = {i: journal_bytes(g, i) for i in range(6)}
        s0 = {i: g.step(i) for i in range(6)}
        t0 = time.monotonic()
        time.sleep(a.window)
        dt = time.monotonic() - t0
        for i in range(6):
            w1 = proc_field(g, i, pids[i], "io", "write_bytes")
            rows[i]["write_MB_per_h"] = (w1 - w0[i]) / dt * 3600 / 1e6
            rows[i]["journal_MB_per_h"] = ((journal_bytes(g, i) - j0[i])
                                           / dt * 3600 / 1e6)
            rows[i]["ms_per_step"] = 1000 * dt / max(1, g.step(i) - s0[i])
            rows[i]["rss_MB"] = proc_field(g, i, pids[i], "status",
                                           "VmRSS:") / 1024
        print(f"facts: training window {dt:.0f} s measured", flush=True)
        # until every device serves
        guide.wait_for(lambda: all(g.train(i).get("running") is False
                                   for i in range(6)), 3600, 5)
        time.sleep(5)
        c0 = {i: g.fl.cpu_seconds(i) for i in range(6)}
        t0 = time.monotonic()
        time.sleep(a.window)
        dt = time.monotonic() - t0
        for i in range(6):
            rows[i]["idle_cpu_pct"] = 100 * (g.fl.cpu_seconds(i) - c0[i]) / dt
            rows[i]["peak_rss_MB"] = proc_field(g, i, pids[i], "status",
                                                "VmHWM:") / 1024
    finally:
        g.fl.down(quiet=True)
    keys = ("boot_s", "start_to_ready_s", "ms_per_step", "rss_MB",
            "peak_rss_MB", "write_MB_per_h", "journal_MB_per_h",
            "idle_cpu_pct")
    for gi, grp in enumerate(GROUPS):
        print(f"\n{grp} (quota {a.quota:g} % of a core, {a.steps} steps):")
        print("| device | " + " | ".join(keys) + " |")
        print("|---" * (len(keys) + 1) + "|")
        for i in range(3 * gi, 3 * gi + 3):
            print(f"| {g.boards[i]} | " + " | ".join(
                f"{rows[i].get(k, float('nan')):.2f}" for k in keys) + " |")
        print("| median | " + " | ".join(
            f"{statistics.median(rows[i].get(k, float('nan')) for i in range(3 * gi, 3 * gi + 3)):.2f}"
            for k in keys) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
