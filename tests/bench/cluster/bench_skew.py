#!/usr/bin/python3
"""bench_skew.py - 4 gossipnode nodes on skewed data (issue 14), against
PyTorch DDP-4 in the same run.

For each partition (--partitions, default iid, dirichlet:0.5,
dirichlet:0.1, classes:2, shards:2) it runs, interleaved, 4-node gossipnode clusters
with each system:

  default    the node's defaults (model averaging, one fp16 quarter/step)
  shuffle    default + --shuffle-samples R (raw samples to the partner)
  gradient   --codec fp32 --avg-every 0 (GossipGraD's gradient exchange)
  isolated   --avg-every 0 --codec none --wait-ms 0 (no exchange)

and once per repetition PyTorch DDP-4 (ddp_baseline.py: allreduce over
all 4 ranks' gradients, so the partition does not change what it learns;
it runs on its own strided shards). Same model (MLP 784-512-10), batch
100 per process, SGD momentum 0.9, lr 0.1, evaluation on the full test
set every 50 steps (time excluded). Every gossip node runs 1500 steps
(cosine over them: 10 passes of an IID quarter), not `--epochs`: skewed
parts differ in size (dirichlet:0.1 from ~3000 to ~30000 samples), and
with --epochs a node with a small part would finish and leave early,
its partners training on alone. DDP-4 runs 10 passes of its quarter:
the same 1500 steps.

Reports per (partition, system): final test accuracy (mean over nodes,
min-max), time to 85% and to 88% (training seconds of the LAST node to
get there; '-' = never), and writes per partition acc_time_<part>.png
(test accuracy of node 0 of each system and of DDP against training
time) through tools/gossip-plot. A cluster in which a node exits with an
error is reported (exit status, and the model-health rollbacks counted
in the nodes' logs), not fatal.

--system LABEL:ARGS defines one more system (gossipnode arguments) for
--systems to name; --build-variant LABEL:DIR runs every gossip system
also with the binaries of build directory DIR (e.g. the code before a
change), interleaved, reported as "system[LABEL]".

Usage: /usr/bin/python3 tests/bench/cluster/bench_skew.py --build build
       [--partitions P,...] [--systems S,...] [--shuffle R] [--repeat R]
       [--system LABEL:ARGS ...] [--build-variant LABEL:DIR ...]
       [--plots DIR]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEMS = {
    "default": [],
    "shuffle": None,  # filled from --shuffle
    "gradient": ["--codec", "fp32", "--avg-every", "0"],
    "isolated": ["--avg-every", "0", "--codec", "none", "--wait-ms", "0"],
}
TARGETS = (85.0, 88.0)


def evals_of(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.endswith("\n"):
                e = json.loads(line)
                if e["ev"] == "eval":
                    out.append((e["step"], e["train_s"], e["test_acc"]))
    return out


def first_at(evals, target):
    return next((t for _, t, a in evals if a >= target), None)


def run_gossip(a, part, extra, build=None):
    build = build or a.build
    work = tempfile.mkdtemp(prefix="gn-skew-")
    cmd = [os.path.join(build, "tools", "gossip-cluster"), "--nodes", "4",
           "--build", build, "--workdir", work, "--quiet", "--steps", "1500",
           "--seed", str(a.seed), "--", "--eval-every", "50", "--lr", "0.1",
           "--partition", part] + extra
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode
    evs = [evals_of(os.path.join(work, "node%d" % i, "events.jsonl"))
           for i in range(4)]
    # model-health rollbacks (node/train/trainer.c), counted from the logs
    rb = 0
    for i in range(4):
        try:
            with open(os.path.join(work, "node%d" % i, "node.log")) as f:
                rb += sum("model health:" in line for line in f)
        except FileNotFoundError:
            pass
    shutil.rmtree(work, ignore_errors=True)
    return {"evals": evs, "rc": rc, "rollbacks": rb}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ddp(a):
    cmd = ["/usr/bin/python3", os.path.join(HERE, "ddp_baseline.py"),
           "--procs", "4", "--target", "1.01", "--eval-every", "50",
           "--seed", str(a.seed), "--port", str(free_port()), "--lr", "0.1"]
    for _ in range(2):  # a gloo rendezvous may hang on a busy host
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=a.torch_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            print("ddp-4: timed out, retrying", file=sys.stderr)
            continue
        r = json.loads(out.strip().splitlines()[-1])
        return [[(s, t, 100.0 * acc) for s, t, acc in r["evals"]]]
    return None


def summary(evs):
    finals = [e[-1][2] for e in evs if e] or [0.0]
    res = {"final": sum(finals) / len(finals), "min": min(finals),
           "max": max(finals)}
    for tg in TARGETS:
        ts = [first_at(e, tg) for e in evs]
        res["t%d" % tg] = None if any(t is None for t in ts) else max(ts)
    return res


def plot(a, part, curves):
    """acc_time_<part>.png via tools/gossip-plot: one 'node' per system."""
    tmp = tempfile.mkdtemp(prefix="gn-skew-plot-")
    log = os.path.join(tmp, "curves.jsonl")
    with open(log, "w") as f:
        for name, ev in curves.items():
            f.write(json.dumps({"t_ms": 0, "node": name, "ev": "start"}) + "\n")
            for step, t, acc in ev:
                f.write(json.dumps({"t_ms": int(t * 1000), "node": name,
                                    "ev": "eval", "step": step,
                                    "test_acc": acc}) + "\n")
    subprocess.run([os.path.join(a.build, "tools", "gossip-plot"), "--out",
                    tmp, log], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    src = os.path.join(tmp, "acc_time.png")
    os.makedirs(a.plots, exist_ok=True)
    if os.path.exists(src):
        safe = part.replace(":", "").replace(".", "")
        shutil.copy(src, os.path.join(a.plots, "acc_time_%s.png" % safe))
    shutil.rmtree(tmp, ignore_errors=True)


def fmt(v, f="{:.1f}"):
    return "-" if v is None else f.format(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--partitions",
                    default="iid,dirichlet:0.5,dirichlet:0.1,classes:2,"
                            "shards:2")
    ap.add_argument("--systems", default="default,shuffle,gradient,isolated")
    ap.add_argument("--shuffle", type=int, default=10,
                    help="R of the shuffle system (samples per step)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--torch-timeout", type=float, default=300)
    ap.add_argument("--plots", help="write acc_time_<partition>.png here")
    ap.add_argument("--save", help="write every eval curve here (JSON)")
    ap.add_argument("--system", action="append", default=[],
                    metavar="LABEL:ARGS",
                    help="one more system: gossipnode arguments")
    ap.add_argument("--build-variant", action="append", default=[],
                    metavar="LABEL:DIR",
                    help="also run every gossip system with the binaries "
                         "of build directory DIR, interleaved")
    a = ap.parse_args()
    SYSTEMS["shuffle"] = ["--shuffle-samples", str(a.shuffle)]
    for v in a.system:
        label, _, args = v.partition(":")
        SYSTEMS[label] = args.split()
    parts = a.partitions.split(",")
    builds = [("", None)] + [tuple(v.split(":", 1)) for v in a.build_variant]
    systems = [s + ("[%s]" % b if b else "")
               for s in a.systems.split(",") for b, _ in builds]
    build_of = {s + ("[%s]" % b if b else ""): (s, d)
                for s in a.systems.split(",") for b, d in builds}
    rows = {}
    ddp = []
    for rep in range(a.repeat):
        if not a.no_torch:
            r = run_ddp(a)
            if r:
                ddp.append(r)
                print(json.dumps({"system": "ddp-4", "rep": rep,
                                  **summary(r)}), file=sys.stderr, flush=True)
        for part in parts:
            for s in systems:
                base, build = build_of[s]
                r = run_gossip(a, part, SYSTEMS[base], build)
                rows.setdefault((part, s), []).append(r)
                print(json.dumps({"partition": part, "system": s, "rep": rep,
                                  "rc": r["rc"], "rollbacks": r["rollbacks"],
                                  **summary(r["evals"])}), file=sys.stderr,
                      flush=True)
    if a.save:
        with open(a.save, "w") as f:
            json.dump({"ddp": ddp, "rows": [
                {"partition": k[0], "system": k[1], "runs": v}
                for k, v in rows.items()]}, f)
    print("partition        system     final acc (min-max)     s to 85%  "
          "s to 88%  exit rollbacks")
    if ddp:
        sm = [summary(r) for r in ddp]
        print("%-16s %-10s %6.2f (%5.2f-%5.2f) %12s %9s" % (
            "(any)", "ddp-4", sm[0]["final"], sm[0]["min"], sm[0]["max"],
            fmt(sm[0]["t85"]), fmt(sm[0]["t88"])))
    for part in parts:
        curves = {}
        for s in systems:
            for r in rows[(part, s)]:
                sm = summary(r["evals"])
                print("%-16s %-10s %6.2f (%5.2f-%5.2f) %12s %9s %5d %9d" % (
                    part, s, sm["final"], sm["min"], sm["max"],
                    fmt(sm["t85"]), fmt(sm["t88"]), r["rc"], r["rollbacks"]))
            curves[s] = rows[(part, s)][0]["evals"][0]
        if ddp:
            curves["ddp-4"] = ddp[0][0]
        if a.plots:
            plot(a, part, curves)


if __name__ == "__main__":
    main()
