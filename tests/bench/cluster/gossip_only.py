#!/usr/bin/python3
"""One gossip cluster configuration of the cluster benchmark, without the
PyTorch runs, with what tuning needs: time to target of the last node,
compute efficiency, ms/step, final accuracies, the slowest node's test
accuracy every 100 steps, and each node's "exchange:" summary line.

Usage: /usr/bin/python3 tests/bench/cluster/gossip_only.py --build B
       [--nodes 4] [--target 88] [--keep] [-- extra gossipnode args]
Same settings as bench_cluster.py (lr 0.1, 10 epochs of the shard, eval
every 50 steps, seed 1).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cluster as bc  # noqa: E402


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--target", type=float, default=88.0)
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    a = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="gn-tune-")
    load = os.getloadavg()[0]
    # no --target-acc: every node trains its whole schedule (see
    # bench_cluster.py); the time to target comes from the evaluations
    common = ["--eval-every", "50", "--lr", "0.1",
              "--epochs", "10", "--seed", "1"] + extra
    subprocess.run([os.path.join(a.build, "tools", "gossip-cluster"), "--nodes",
                    str(a.nodes), "--build", a.build, "--workdir", work, "--quiet",
                    "--"] + common, check=True, stdout=subprocess.DEVNULL)
    res, traj = [], {}
    for i in range(a.nodes):
        evs = bc.events(os.path.join(work, f"node{i}", "events.jsonl"))
        res.append(bc.node_result(evs, a.target))
        for e in evs:
            if e["ev"] == "eval":
                traj.setdefault(e["step"], []).append(e["test_acc"])
    times = [r[0] for r in res]
    effs = [r[1] for r in res if r[1] is not None]
    print("args:", " ".join(extra) or "(defaults)", f"load {load:.1f}")
    print("s to target: %s  efficiency %.3f  ms/step %s  final %s" % (
        None if None in times else round(max(times), 2),
        sum(effs) / len(effs) if effs else float("nan"),
        [round(r[4], 1) for r in res if r[4]], [r[2] for r in res]))
    print("min test acc by step: " + " ".join(
        "%d:%.1f" % (k, min(v)) for k, v in sorted(traj.items()) if k % 100 == 0))
    for i in range(a.nodes):
        p = os.path.join(work, f"node{i}", "node.log")
        if os.path.exists(p):
            for line in open(p):
                if ("exchange:" in line or "averaging waits" in line
                        or "training thread:" in line):
                    print(line.rstrip())
    if a.keep:
        print(work)
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
