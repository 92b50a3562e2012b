#!/usr/bin/python3
"""bench_mixed.py - mixed device classes on loopback (issue 34, item 3):
4 gossipnode nodes of which one runs at a quarter of the others' speed,
against the same cluster without it and with it at full speed, in one
run, interleaved.

Each node runs in a cgroup v1 CPU quota of its own (--quota percent of a
core; the slow one at quota / --ratio once every node has stepped: a
slow start is a late join, another matter), so the ratio of speeds is
the quotas', not the host's load. The systems, in each round:

  fast3     3 nodes at the quota (the cluster without the slow device)
  fast4     4 nodes at the quota (the slow device at full speed)
  mixed     4 nodes, node3 at quota / ratio, the defaults
  mixed+s   the same with --shuffle-samples R (raw samples to the
            partner; a node behind its partners' pace sends R times its
            pace ratio per step trained)

and any --system LABEL:N:SLOW:ARGS more (N nodes, SLOW: 1 if the last
node is the slow one). Every node trains --steps steps (cosine over
them), evaluates every --eval-every steps on the full test set, and the
partition is --partition (default iid). Reported per system, medians over
--rounds: the fast nodes' final test accuracy (mean, min, max over them),
the slow node's, its steps trained and passed, the pace ratio it last
told and the samples it sent by the shuffle (from its log), and the wall
time. One JSON line per run.

--skew A,B gives the last node every training sample of classes A and B
and nothing else, the others the rest split evenly (label skew: those
classes are learned only from the last node), and reports each final
model's test accuracy on A and B (`gossip-model infer`); 4-node systems
only (fast3 has no node to hold them).

Needs root (cgroup v1 cpu controller at /sys/fs/cgroup/cpu).

Usage: /usr/bin/python3 tests/bench/cluster/bench_mixed.py --build build
       [--rounds R] [--steps S] [--quota PCT] [--ratio X] [--shuffle R]
       [--systems fast3,fast4,mixed,mixed+s] [--partition P]
       [--skew A,B]
       [-- extra gossipnode args]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_cluster import events, node_result  # noqa: E402

CG = "/sys/fs/cgroup/cpu"
PERIOD_US = 20000

WRAPPER = """#!/bin/sh
# bench_mixed.py: run gossipnode in the cgroup of its --name
prev=""
for a in "$@"; do
        [ "$prev" = "--name" ] && name="$a"
        prev="$a"
done
cg="{cg}/{tag}-$name"
[ -d "$cg" ] && echo $$ > "$cg/cgroup.procs"
# --skew: this node's own data set, all of it (the last --shard wins)
data="{data}/$name"
[ -d "$data" ] && exec "{real}" "$@" --data "$data" --shard 0/1
exec "{real}" "$@"
"""


def fake_build(real, tag, work, label=""):
    """A build directory whose node/gossipnode enters its cgroup first
    (and, under --skew, takes the data set made for its name)."""
    d = os.path.join(work, "build" + label)
    os.makedirs(os.path.join(d, "node"))
    os.symlink(os.path.join(real, "tools"), os.path.join(d, "tools"))
    w = os.path.join(d, "node", "gossipnode")
    with open(w, "w") as f:
        f.write(WRAPPER.format(cg=CG, tag=tag, data=os.path.join(work, "data"),
                               real=os.path.join(real, "node", "gossipnode")))
    os.chmod(w, 0o755)
    return d


def read_idx(path):
    """tools/gossip_numpy.py's reader (needs python3-numpy)."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools"))
    import gossip_numpy
    return gossip_numpy.read_idx(path)


def write_idx(path, arr):
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 0x08, arr.ndim]))
        for d in arr.shape:
            f.write(int(d).to_bytes(4, "big"))
        f.write(arr.tobytes())


def make_skew(src, work, n, classes, seed):
    """Data sets for n nodes: the last holds every training sample of
    `classes` and nothing else; the others split the rest evenly (seeded
    shuffle). Every node tests on the full test set."""
    import numpy as np
    x = read_idx(os.path.join(src, "train-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(src, "train-labels-idx1-ubyte.gz"))
    mine = np.isin(y, classes)
    rest = np.flatnonzero(~mine)
    np.random.default_rng(seed).shuffle(rest)
    sets = [np.sort(rest[i::n - 1]) for i in range(n - 1)]
    sets.append(np.flatnonzero(mine))
    for i, idx in enumerate(sets):
        d = os.path.join(work, "data", "node%d" % i)
        os.makedirs(d)
        write_idx(os.path.join(d, "train-images-idx3-ubyte"), x[idx])
        write_idx(os.path.join(d, "train-labels-idx1-ubyte"), y[idx])
        for f in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
            os.symlink(os.path.join(src, f), os.path.join(d, f))
    return [len(idx) for idx in sets]


def class_acc(build, src, ckpt, classes):
    """(test accuracy on `classes`, on all) of a checkpoint, in %, by
    gossip-model infer's predictions."""
    import numpy as np
    pred = ckpt + ".pred"
    r = subprocess.run([os.path.join(build, "tools", "gossip-model"), "infer",
                        ckpt, "--data", src, "--predictions", pred],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, None
    p = np.loadtxt(pred, dtype=np.int64)
    y = read_idx(os.path.join(src, "t10k-labels-idx1-ubyte.gz")).astype(
        np.int64)
    sel = np.isin(y, classes)
    return (100.0 * float((p[sel] == y[sel]).mean()),
            100.0 * float((p == y).mean()))


def set_quota(tag, i, pct):
    d = os.path.join(CG, "%s-node%d" % (tag, i))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "cpu.cfs_period_us"), "w") as f:
        f.write(str(PERIOD_US))
    with open(os.path.join(d, "cpu.cfs_quota_us"), "w") as f:
        f.write(str(int(PERIOD_US * pct / 100.0)))


def set_quotas(tag, quotas):
    for i, pct in enumerate(quotas):
        set_quota(tag, i, pct)


def drop_cgroups(tag):
    for name in os.listdir(CG):
        if name.startswith(tag + "-"):
            try:
                os.rmdir(os.path.join(CG, name))
            except OSError as e:
                print("bench_mixed: %s: %s" % (name, e), file=sys.stderr)


def verdicts(log, peer=None):
    """(accepted, clipped, far, suspect) of the robust merge's summary at
    the end of a node's log: of `peer`, or of every peer."""
    if peer:
        m = re.search(r"robust merge peer %s( suspect_model)?: (\d+) accepted, "
                      r"(\d+) clipped, (\d+) far" % re.escape(peer), log)
        return (int(m.group(2)), int(m.group(3)), int(m.group(4)),
                bool(m.group(1))) if m else None
    m = re.search(r"robust merge on: (\d+) accepted, (\d+) clipped, "
                  r"refused (\d+) far", log)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)),
            False) if m else None


def pace_of(log):
    """The last pace ratio the node's log told (1.0: none), and the samples
    it sent by the shuffle (None: no shuffle line)."""
    m = re.findall(r"a pace ratio of ([0-9.]+)", log)
    sent = re.search(r"sample shuffle: sent (\d+) samples", log)
    return (float(m[-1]) if m else 1.0,
            int(sent.group(1)) if sent else None)


def slow_down_when_training(a, tag, n, work, proc):
    """Every node starts at the fast quota (a slow start would be a late
    join, another problem); the last one is set to its slow quota once
    every node has logged its first step."""
    logs = [os.path.join(work, "node%d" % i, "node.log") for i in range(n)]
    while proc.poll() is None:
        ready = 0
        for path in logs:
            try:
                with open(path) as f:
                    ready += bool(re.search(r"\] epoch \d+ step", f.read()))
            except FileNotFoundError:
                pass
        if ready == n:
            set_quota(tag, n - 1, a.quota / a.ratio)
            return time.time()
        time.sleep(0.1)
    return None


def run_one(a, tag, build, label, n, slow, extra, rnd):
    quotas = [a.quota] * n
    set_quotas(tag, quotas)
    if slow:
        quotas[-1] = a.quota / a.ratio
    work = tempfile.mkdtemp(prefix="gn-mixed-")
    cmd = [os.path.join(build, "tools", "gossip-cluster"), "--nodes", str(n),
           "--build", build, "--workdir", work, "--quiet", "--",
           "--steps", str(a.steps), "--eval-every", str(a.eval_every),
           "--lr", str(a.lr), "--seed", str(a.seed), "--threads", "1",
           "--partition", a.partition] + extra + a.extra
    t0 = time.time()
    errf = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf,
                         text=True)
    slowed = slow_down_when_training(a, tag, n, work, p) if slow else None
    p.wait()
    wall = time.time() - t0
    errf.seek(0)
    p.stderr = errf.read()
    res, logs = [], []
    for i in range(n):
        d = os.path.join(work, "node%d" % i)
        res.append(node_result(events(os.path.join(d, "events.jsonl")),
                               a.target))
        try:
            logs.append(open(os.path.join(d, "node.log")).read())
        except FileNotFoundError:
            logs.append("")
    last = [e for e in events(os.path.join(work, "node%d" % (n - 1),
                                           "events.jsonl"))
            if e["ev"] == "eval"]
    fast = res[:-1] if slow else res
    skew = None
    if a.skew:
        # accuracy on the last node's classes, of each node's final model
        skew = [class_acc(build, a.data_dir,
                          os.path.join(work, "node%d" % i, "ckpt",
                                       "model.ckpt"), a.skew_classes)[0]
                for i in range(n)]
    out = {
        "system": label, "round": rnd, "nodes": n, "slow": bool(slow),
        "quotas": quotas, "exit": p.returncode,
        "fast_acc": [r[2] for r in fast],
        "slow_acc": res[-1][2] if slow else None,
        "slow_steps": last[-1]["step"] if last and slow else None,
        "slow_skipped": last[-1].get("skipped", 0) if last and slow else None,
        "slow_pace": pace_of(logs[-1])[0] if slow else None,
        "last_sent": pace_of(logs[-1])[1],
        "wall_s": round(wall, 1),
        "slowed_at_s": round(slowed - t0, 1) if slowed else None,
        "skew_acc": skew,
        # the robust merge: what the others made of the last node's
        # slices, and what it made of theirs (accepted, clipped, far,
        # marked suspect_model)
        "last_judged": [verdicts(lg, "node%d" % (n - 1)) for lg in logs[:-1]],
        "last_judging": verdicts(logs[-1]),
    }
    if p.returncode != 0:
        out["stderr"] = p.stderr[-2000:]
    if a.keep:
        out["workdir"] = work
    else:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out), flush=True)
    return out


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, f="%.2f"):
    return "-" if v is None else f % v


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", type=float, default=88.0)
    ap.add_argument("--quota", type=float, default=20.0,
                    help="percent of a core for a fast node")
    ap.add_argument("--ratio", type=float, default=4.0,
                    help="how many times slower the slow node is")
    ap.add_argument("--shuffle", type=int, default=25,
                    help="--shuffle-samples of the mixed+s system")
    ap.add_argument("--partition", default="iid")
    ap.add_argument("--skew", default="",
                    help="A,B: the last node holds every training sample "
                    "of classes A and B and nothing else (the others split "
                    "the rest); reports each model's test accuracy on them")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--systems", default="fast3,fast4,mixed,mixed+s")
    ap.add_argument("--system", action="append", default=[],
                    help="LABEL:N:SLOW:ARGS, one more system")
    ap.add_argument("--build-variant", action="append", default=[],
                    help="LABEL:DIR: every system also with the binaries of "
                    "build directory DIR (e.g. the code before a change), "
                    "interleaved, reported as system[LABEL]")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    if not os.access(os.path.join(CG, "cgroup.procs"), os.W_OK):
        sys.exit("bench_mixed: needs root and cgroup v1's cpu controller "
                 "at " + CG)
    systems = {
        "fast3": (3, 0, []),
        "fast4": (4, 0, []),
        "mixed": (4, 1, []),
        "mixed+s": (4, 1, ["--shuffle-samples", str(a.shuffle)]),
    }
    for s in a.system:
        label, n, slow, args = s.split(":", 3)
        systems[label] = (int(n), int(slow), args.split())
    names = a.systems.split(",")
    for name in names:
        if name not in systems:
            sys.exit("bench_mixed: unknown system %r" % name)
    tag = "gnmix%d" % os.getpid()
    work = tempfile.mkdtemp(prefix="gn-mixed-build-")
    builds = {"": fake_build(os.path.abspath(a.build), tag, work)}
    for v in a.build_variant:
        label, d = v.split(":", 1)
        builds[label] = fake_build(os.path.abspath(d), tag, work, label)
    runs = [(name, label) for name in names for label in builds]
    a.skew_classes = [int(c) for c in a.skew.split(",")] if a.skew else []
    if a.skew:
        if any(systems[name][0] != 4 for name in names):
            sys.exit("bench_mixed: --skew runs 4-node systems only")
        sizes = make_skew(a.data_dir, work, 4, a.skew_classes, a.seed)
        print("bench_mixed: --skew %s: node data sets of %s samples" % (
            a.skew, sizes), file=sys.stderr)
    key = {run: run[0] + ("[%s]" % run[1] if run[1] else "")
           for run in runs}
    rows = {key[run]: [] for run in runs}
    try:
        for rnd in range(a.rounds):
            order = runs if rnd % 2 == 0 else list(reversed(runs))
            for run in order:
                n, slow, extra = systems[run[0]]
                print("bench_mixed: round %d of %d, %s" % (
                    rnd + 1, a.rounds, key[run]), file=sys.stderr, flush=True)
                rows[key[run]].append(run_one(a, tag, builds[run[1]],
                                              key[run], n, slow, extra, rnd))
    finally:
        drop_cgroups(tag)
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("quota %.1f%% a fast node, slow node %.1fx slower, %d steps, "
          "partition %s, medians of %d rounds" % (
              a.quota, a.ratio, a.steps, a.partition, a.rounds))
    print("| system | fast nodes' final acc (mean, min-max) | slow node's "
          "final acc | slow: steps trained / passed | pace ratio | last node's "
          "samples sent | wall s |"
          + (" classes %s: fast nodes (mean) | last node |" % a.skew
             if a.skew else ""))
    print("|---|---|---|---|---|---|---|" + ("---|---|" if a.skew else ""))
    for name in rows:
        rs = rows[name]
        means = [statistics.mean(r["fast_acc"]) for r in rs
                 if all(x is not None for x in r["fast_acc"])]
        lo = med([min(r["fast_acc"]) for r in rs if None not in r["fast_acc"]])
        hi = med([max(r["fast_acc"]) for r in rs if None not in r["fast_acc"]])
        slow = rs[0]["slow"] if rs else False
        trained = med([r["slow_steps"] - r["slow_skipped"] for r in rs
                       if r["slow_steps"] is not None]) if slow else None
        passed = med([r["slow_steps"] for r in rs]) if slow else None
        print("| %s | %s (%s-%s) | %s | %s | %s | %s | %s |" % (
            name, fmt(med(means)), fmt(lo), fmt(hi),
            fmt(med([r["slow_acc"] for r in rs])),
            "-" if trained is None else "%d / %d" % (trained, passed),
            fmt(med([r["slow_pace"] for r in rs])) if slow else "-",
            fmt(med([r["last_sent"] for r in rs]), "%.0f"),
            fmt(med([r["wall_s"] for r in rs]), "%.0f"))
            + (" %s | %s |" % (
                fmt(med([statistics.mean(r["skew_acc"][:-1]) for r in rs
                         if None not in r["skew_acc"]])),
                fmt(med([r["skew_acc"][-1] for r in rs])))
               if a.skew else ""))
    print()
    print("The robust merge and the last node, summed over rounds: its slices "
          "refused as far by the others / judged, clipped; the others' "
          "refused by it / judged; rounds in which a node marked it "
          "suspect_model")
    for name in rows:
        rs = rows[name]
        judged = [v for r in rs for v in r["last_judged"] if v]
        own = [r["last_judging"] for r in rs if r["last_judging"]]
        print("  %-8s far %d / %d, clipped %d; it refused %d / %d; marked in "
              "%d of %d rounds" % (
                  name, sum(v[2] for v in judged),
                  sum(v[0] + v[1] + v[2] for v in judged),
                  sum(v[1] for v in judged), sum(v[2] for v in own),
                  sum(v[0] + v[1] + v[2] for v in own),
                  sum(any(v and v[3] for v in r["last_judged"]) for r in rs),
                  len(rs)))


if __name__ == "__main__":
    main()
