#!/usr/bin/python3
"""grad_diag.py - why a 4-node exchange mode does or does not beat isolated
nodes: runs gossip-cluster once per mode (interleaved, --repeat R) and
reports, per mode, from the same run:

  acc      final test accuracy of each node, and of the MEAN of the nodes'
           final parameters (the model the nodes would agree on): if the
           mean is much better than each node, the replicas drifted apart
  drift    RMS(x_i - mean) / RMS(mean) over the final parameters, mean
           over nodes
  ms/step  training-thread time per step (evaluations excluded), mean
           over nodes; tput = isolated ms/step / this (throughput
           efficiency, history/benchmarks-log.md 3.2)
  grads    gradients received / merged / late / stale / ahead (the
           node's summary line), summed over nodes
  compute  the training thread's compute share

Usage: /usr/bin/python3 tests/bench/cluster/grad_diag.py --build build
       [--repeat R] [--epochs E] MODE:ARGS ... (e.g. 'grad:--codec fp32
       --avg-every 0'); an 'isolated' mode is always added.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools"))
import gossip_numpy  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
ISOLATED = "--avg-every 0 --codec none --wait-ms 0"
SUMMARY = re.compile(r"received (\d+): (\d+) merged \((\d+) late\), dropped "
                     r"(\d+) stale, (\d+) ahead")
THREAD = re.compile(r"computing ([\d.]+) s of ([\d.]+) s")


def run(build, n, args, epochs, seed, extra):
    work = tempfile.mkdtemp(prefix="gn-diag-")
    cmd = [os.path.join(build, "tools", "gossip-cluster"), "--nodes", str(n),
           "--build", build, "--workdir", work, "--quiet", "--epochs",
           str(epochs), "--seed", str(seed), "--", "--eval-every", "50",
           "--lr", "0.1"] + extra + args.split()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    res = {"accs": [], "ms": [], "compute": [], "grads": np.zeros(5, int),
           "evals": []}
    params = []
    for i in range(n):
        d = os.path.join(work, "node%d" % i)
        evs = [json.loads(x) for x in open(os.path.join(d, "events.jsonl"))]
        ev = [e for e in evs if e["ev"] == "eval"]
        last = ev[-1]
        res["accs"].append(last["test_acc"])
        res["evals"].append({e["step"]: e["test_acc"] for e in ev})
        res["ms"].append(1e3 * last["train_s"] / last["step"])
        log = open(os.path.join(d, "node.log")).read()
        m = SUMMARY.search(log)
        if m:
            res["grads"] += np.array([int(g) for g in m.groups()])
        m = THREAD.search(log)
        if m:
            res["compute"].append(float(m.group(1)) / float(m.group(2)))
        npz = os.path.join(work, "m%d.npz" % i)
        subprocess.run([os.path.join(build, "tools", "gossip-model"), "export",
                        os.path.join(d, "ckpt", "model.ckpt"), npz],
                       check=True, stdout=subprocess.DEVNULL)
        params.append(gossip_numpy.load(npz))
    layers, first = params[0]
    keys = [k for k in first if k.startswith("l")]
    mean = {k: np.mean([p[1][k] for p in params], axis=0) for k in keys}
    flat = np.concatenate([mean[k].ravel() for k in keys])
    rms = np.sqrt(np.mean(flat ** 2))
    res["drift"] = float(np.mean([
        np.sqrt(np.mean(np.concatenate([(p[1][k] - mean[k]).ravel()
                                        for k in keys]) ** 2)) / rms
        for p in params]))
    avg = dict(first)
    avg.update(mean)
    x = gossip_numpy.read_idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz"))
    y = gossip_numpy.read_idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz"))
    pred = gossip_numpy.forward((layers, avg), x).argmax(1)
    res["mean_acc"] = 100.0 * float(np.mean(pred == y))
    shutil.rmtree(work, ignore_errors=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--extra", default="", help="args for every mode")
    ap.add_argument("modes", nargs="+", metavar="LABEL:ARGS")
    a = ap.parse_args()
    modes = [("isolated", ISOLATED)] + [tuple(m.split(":", 1))
                                        for m in a.modes]
    out = {m[0]: [] for m in modes}
    for rep in range(a.repeat):
        for label, args in modes:
            r = run(a.build, a.nodes, args, a.epochs, a.seed + rep,
                    a.extra.split())
            out[label].append(r)
            print(json.dumps({"mode": label, "rep": rep, "accs": r["accs"],
                              "mean_acc": r["mean_acc"], "drift": r["drift"],
                              "ms": r["ms"], "compute": r["compute"],
                              "grads": r["grads"].tolist()}),
                  file=sys.stderr, flush=True)
    iso = np.mean([np.mean(r["ms"]) for r in out["isolated"]])
    print("%-12s %-22s %9s %8s %8s %6s %8s  %s" % (
        "mode", "args", "acc", "mean-of", "drift", "ms/st", "tput",
        "grads recv/merged/late/stale/ahead"))
    for label, args in modes:
        rs = out[label]
        accs = [x for r in rs for x in r["accs"]]
        ms = np.mean([np.mean(r["ms"]) for r in rs])
        g = sum(r["grads"] for r in rs)
        print("%-12s %-22s %4.2f-%4.2f %8.2f %8.4f %6.2f %7.1f%%  %s" % (
            label, args[:22], min(accs), max(accs),
            np.mean([r["mean_acc"] for r in rs]),
            np.mean([r["drift"] for r in rs]), ms, 100 * iso / ms,
            "/".join(str(v) for v in g)))


if __name__ == "__main__":
    main()
