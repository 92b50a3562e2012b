#!/usr/bin/python3
"""bench_start.py - how long a node takes from its exec to `alive` in a
running peer's view, at a Pi's pace, for one or more builds, runs
interleaved (issue 33's "start -> alive", without systemd's own start).

  bench_start.py --bin LABEL=PATH [--bin LABEL=PATH ...] [--quota PCT]
                 [--runs N] [--data DIR]

Each run starts a peer (the first --bin's build, no quota, `--steps 1
--after-train serve`: a member that no longer trains) on 127.0.0.1, waits
until it serves, then starts PATH in a cgroup v1 CPU quota of PCT % of a
core (bench_probe.py's: period 16.7 ms, as the fleet lab's devices) and
reads the peer's event log for the `member ... alive` of the new node: the
seconds from the exec to that event are the run's figure. The node gets a
cached kernel choice (`--blis-arch` of the host's set, so no probe runs:
the probe runs after the join anyway). Prints each run and, per label,
the median (min-max). Root for the quota. Not a test: it asserts
nothing; results go in docs/benchmarks.md.
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_probe as bp  # noqa: E402  (its cgroup and keygen helpers)

PEER, NODE = ("127.0.0.1:7991", "peer"), ("127.0.0.1:7992", "node")


def keys(binpath, work):
    """Both members' keys and the peers file, once."""
    peers = os.path.join(work, "peers.txt")
    if not os.path.exists(peers):
        with open(peers, "w") as f:
            for addr, name in (PEER, NODE):
                subprocess.run([bp.keygen_for(binpath), "--addr", addr,
                                "--name", name, "--out",
                                os.path.join(work, name + ".key")],
                               stdout=f, stderr=subprocess.DEVNULL,
                               check=True)
    return peers


def argv(binpath, work, who, peers, data, extra):
    addr, name = who
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    v = [binpath, "--peers", peers, "--key", os.path.join(work, name +
                                                           ".key"),
         "--listen", addr, "--name", name, "--fresh",
         "--checkpoint-dir", os.path.join(d, "ck"),
         "--control", os.path.join(d, "ctl.sock"),
         "--event-log", os.path.join(d, "events.jsonl")] + extra
    return v + (["--data", data] if data else [])


def events(work, name):
    try:
        with open(os.path.join(work, name, "events.jsonl")) as f:
            return [json.loads(ln) for ln in f if ln.strip()]
    except (OSError, ValueError):
        return []


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.01)
    sys.exit("bench_start: no %s within %g s" % (what, timeout))


def run_one(peer_bin, binpath, quota, work, data, arch):
    peers = keys(peer_bin, work)
    for name in (PEER[1], NODE[1]):
        shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    peer = subprocess.Popen(argv(peer_bin, work, PEER, peers, data,
                                 ["--steps", "1", "--after-train", "serve",
                                  "--blis-arch", arch]),
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    node, cg = None, None
    try:
        wait_for(lambda: any(e.get("ev") == "stop"
                             for e in events(work, PEER[1])), 60,
                 "peer serving")
        cg = bp.quota_cgroup(quota)
        t0 = time.time()
        node = subprocess.Popen(argv(binpath, work, NODE, peers, data,
                                     ["--steps", "100000", "--blis-arch",
                                      arch]),
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL,
                                preexec_fn=bp.enter_cgroup(cg))
        t = wait_for(lambda: next(
            (e["t_ms"] / 1000.0 for e in events(work, PEER[1])
             if e.get("ev") == "member" and e.get("peer") == NODE[1] and
             e.get("state") == "alive"), None), 60, "alive event")
        return t - t0
    finally:
        for p in (node, peer):
            if p and p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        bp.remove_cgroup(cg)


def host_arch(binpath):
    out = subprocess.run([binpath, "--version"], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    # "BLIS 0.9.0, kernels skx (cached)"
    return out.split("kernels ", 1)[1].split()[0]


def main():
    a, bins = bp.parse_builds(__doc__, 8, "bench_start")
    arch = host_arch(bins[0][1])
    res = {label: [] for label, _ in bins}
    work = tempfile.mkdtemp(prefix="bench_start.")
    try:
        for r in range(a.runs):
            for label, path in bins:
                s = run_one(bins[0][1], path, a.quota, work, a.data, arch)
                res[label].append(s)
                print("run %d %s: alive in the peer's view %.3f s after "
                      "the exec" % (r + 1, label, s), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("quota %.1f %% of a core, %d runs each, interleaved, kernels %s"
          % (a.quota, a.runs, arch))
    for label, _ in bins:
        t = res[label]
        print("%s: exec -> alive %.3f s (%.3f-%.3f)" %
              (label, statistics.median(t), min(t), max(t)))


if __name__ == "__main__":
    main()
