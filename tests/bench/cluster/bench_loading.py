#!/usr/bin/env python3
"""What a loading member costs the others (design.md, "Join first").

4 nodes on 127.0.0.1: n0-n2 train; n3 starts once they are past step 100
with its training labels held (a named pipe, as test_cluster_joinfirst),
so it is a member that loads for --hold seconds. Over that hold the bench
reads, from each node's /metrics: slices averaged per step by the three
trainers (one round a step: the defaults, K = 1, no gradients), their
ms per step and
extra batches per step, and the bytes the loading node received. Each
--bin is one build's gossipnode; rounds interleave the builds, and the
medians and the after/before ratios are printed.

usage: bench_loading.py --bin NAME=GOSSIPNODE [--bin ...] --keygen KEYGEN
                        [--rounds 3] [--hold 20]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "node"))
import test_cluster_run as tcr  # noqa: E402  (Cluster, HeldFile, metric)

TRAINERS = (0, 1, 2)
LOADER = 3


def snapshot(ports):
    """Per node: steps, averaged slices, extra batches, bytes in."""
    out = {}
    for i, p in ports.items():
        out[i] = {k: tcr.metric(p, k) for k in (
            "train_steps_total", "params_averaged_total",
            "train_extra_batches_total", "gossip_bytes_in_total")}
    out["t"] = time.time()
    return out


def one_round(binary, keygen, hold, seed):
    tmp = tempfile.mkdtemp(prefix="gn-bench-loading-")
    c = tcr.Cluster(binary, keygen, 4, tmp, seed)
    ports = {i: tcr.free_port() for i in range(4)}
    # the product's exchange (the tests' COMMON sets int8 gradients and
    # K = 10; given later, these win)
    run = ["--steps", "100000", "--eval-every", "100000", "--codec", "none",
           "--avg-every", "1"]
    try:
        for i in TRAINERS:
            c.start(i, run + ["--metrics", "127.0.0.1:%d" % ports[i],
                              "--control", c.sock(i)])
        c.wait_for("the trainers at step 100",
                   lambda: all(c.step(i) >= 100 for i in TRAINERS), 180)
        held_name = "train-labels-idx1-ubyte.gz"
        slow = os.path.join(tmp, "slowdata")
        os.mkdir(slow)
        for f in os.listdir(tcr.DATA):
            if f != held_name:
                os.symlink(os.path.join(tcr.DATA, f), os.path.join(slow, f))
        held = tcr.HeldFile(os.path.join(slow, held_name),
                            os.path.join(tcr.DATA, held_name))
        c.start(LOADER, run + ["--data", slow, "--metrics",
                               "127.0.0.1:%d" % ports[LOADER]])
        c.wait_for("n3 alive at every trainer",
                   lambda: all(c.member_state(i, "n3", "alive")
                               for i in TRAINERS), 60)
        time.sleep(1.0)  # its news spread, the schedule settled
        a = snapshot(ports)
        time.sleep(hold)
        b = snapshot(ports)
        if os.environ.get("GN_BENCH_DUMP"):  # what the trainers saw
            ctl = os.path.join(os.path.dirname(keygen), "gossipctl")
            for i in TRAINERS:
                subprocess.run([ctl, "--socket", c.sock(i), "members"])
        held.release()
        r = {"avg_per_step": [], "ms_per_step": [], "extra_per_step": []}
        for i in TRAINERS:
            steps = b[i]["train_steps_total"] - a[i]["train_steps_total"]
            steps = max(steps, 1)
            r["avg_per_step"].append(
                (b[i]["params_averaged_total"]
                 - a[i]["params_averaged_total"]) / steps)
            r["ms_per_step"].append(1000.0 * (b["t"] - a["t"]) / steps)
            r["extra_per_step"].append(
                (b[i]["train_extra_batches_total"]
                 - a[i]["train_extra_batches_total"]) / steps)
        r["loader_kB_in"] = (b[LOADER]["gossip_bytes_in_total"]
                             - a[LOADER]["gossip_bytes_in_total"]) / 1e3
        return {k: (statistics.mean(v) if isinstance(v, list) else v)
                for k, v in r.items()}
    finally:
        c.kill_all()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", action="append", required=True,
                    help="NAME=path to a build's gossipnode")
    ap.add_argument("--keygen", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hold", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.bin]
    if not os.path.isdir(tcr.DATA):
        print("no data set at %s" % tcr.DATA)
        return 2
    res = {name: [] for name, _ in bins}
    for r in range(a.rounds):
        for name, path in bins:
            t0 = time.time()
            x = one_round(path, a.keygen, a.hold, a.seed)
            res[name].append(x)
            print("round %d %-8s averaged/step %.3f, %.1f ms/step, extra "
                  "batches/step %.3f, loader received %.0f kB (%.0f s)"
                  % (r + 1, name, x["avg_per_step"], x["ms_per_step"],
                     x["extra_per_step"], x["loader_kB_in"],
                     time.time() - t0), flush=True)
    print("\nmedians over %d rounds, %.0f s of n3 loading:" % (a.rounds,
                                                              a.hold))
    med = {}
    for name, _ in bins:
        med[name] = {k: statistics.median(x[k] for x in res[name])
                     for k in res[name][0]}
        m = med[name]
        print("%-8s averaged/step %.3f, %.1f ms/step, extra batches/step "
              "%.3f, loader received %.0f kB"
              % (name, m["avg_per_step"], m["ms_per_step"],
                 m["extra_per_step"], m["loader_kB_in"]))
    if len(bins) == 2:
        b0, b1 = bins[0][0], bins[1][0]
        print("%s/%s: averaged/step %.2fx, ms/step %.2fx"
              % (b1, b0, med[b1]["avg_per_step"]
                 / max(med[b0]["avg_per_step"], 1e-9),
                 med[b1]["ms_per_step"] / med[b0]["ms_per_step"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
