#!/usr/bin/python3
"""hostile_bench.py GOSSIPNODE KEYGEN HOSTILE GOSSIPCTL [--sizes 3,4,8]
[--attacks LIST] [--steps N] [--repeat K] [--out FILE] [--log FILE] - the
attacks designed for the defence (tests/node/hostile_peer.c, issue 32)
against today's robust merge, as a table.
hostile_bench.py --table LOG [LOG...] - the table of runs already logged
(--log files; several: their runs count as repeats).

For each repeat and each cluster size n: n - 1 honest gossipnode processes
on 127.0.0.1 and, in attacked runs, tests/node/hostile_peer as the n-th
trusted key, lying with one attack for the whole run. Each repeat trains
clean first and then each attack in turn, so clean and attacked runs
interleave over the bench's time (the host's load drifts). Every run
trains the same --steps with the same seed and keys
(test_hostile_run.run(), tc.COMMON settings, robust merge on).

Measured, per (n, attack), over the honest nodes and repeats:
  acc      each honest node's test accuracy, the mean of its last three
           evaluations (test_hostile_run.LAST_EVALS); mean, min, max
  delta    attacked - clean per node, against the mean of that node's
           clean runs of the same n: the median over runs of each run's
           mean over its honest nodes, and the worst node of any run
  marked at end  honest nodes whose leave summary marks the liar
           suspect_model, of all honest nodes in all repeats
  judged when first marked  the liar's judged contributions at one
           node (accepted + clipped + far + nonfinite, from `gossipctl
           --json stats`, polled every POLL_S) when that node first showed
           it suspect_model, the least over nodes ("-": never seen marked
           while polling); with NAME*C each turn is judged C times
  honest marked  honest nodes marked suspect_model by any honest node,
           in a poll or a leave summary
  rollbacks      model-health rollbacks, all honest nodes
  verdicts the liar's contributions as the honest nodes counted them,
           summed: accepted / clipped / swayed / far / named (refused,
           its evidence named it) / not_partner
  sway, evidence  (JSON log only) each honest node's figures for the
           liar and for its honest senders at the end: consistency,
           Welch t and (_d) the least mean difference (gossip/robust.h)
  offset   the liar's own mean RMS(lie - base)/RMS(base) (its summary)

Prints a markdown table (and writes it to --out); --log keeps every
run's figures as JSON lines. Python 3 standard library only. Exit 0, or
77 when the data set is missing. GN_SEED sets --seed. Long: run by hand
(docs/history/liar-attacks.md), not by ctest.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster_run as tc  # noqa: E402
import test_hostile_run as th  # noqa: E402

ATTACKS = ["drift", "drift_adapt", "cliprider", "shrink", "alie", "ipm",
           "dissensus", "echo"]
POLL_S = 3.0  # between `gossipctl stats` polls of every honest node


class Watch:
    """Polls every honest node's `gossipctl --json stats` for the peers
    it marks suspect_model, and the liar's judged count when first
    marked."""

    def __init__(self, gossipctl, liar):
        self.ctl, self.liar = gossipctl, liar
        self.first = {}         # node -> liar's judged count when marked
        self.honest_marked = set()
        self.last = 0.0

    def __call__(self, c):
        if time.time() - self.last < POLL_S:
            return
        self.last = time.time()
        for i in range(c.n - 1):
            if c.procs[i].poll() is not None:
                continue
            try:
                r = subprocess.run([self.ctl, "--socket", c.sock(i),
                                    "--json", "stats"], capture_output=True,
                                   text=True, timeout=10)
                peers = json.loads(r.stdout).get("peers", [])
            except (subprocess.TimeoutExpired, ValueError, OSError):
                continue
            for p in peers:
                if not p.get("suspect_model"):
                    continue
                if p.get("name") == self.liar:
                    if i not in self.first:
                        rb = p.get("robust", {})
                        self.first[i] = sum(rb.get(k, 0) for k in (
                            "accepted", "clipped", "far", "nonfinite"))
                else:
                    self.honest_marked.add(p.get("name"))


def one_run(c, hostile, ctl, tmp, label, steps, attack, seed):
    liar = "n%d" % (c.n - 1)
    w = Watch(ctl, liar)
    t0 = time.time()
    accs, logs, out = th.run(c, hostile, tmp, label, steps, "on", attack,
                             seed, node_args=lambda i: ["--control",
                                                        c.sock(i)],
                             watch=w, timeout=max(600, steps * 2))
    rec = {"n": c.n, "attack": attack or "clean", "steps": steps,
           "wall_s": round(time.time() - t0, 1), "acc": {}, "rollbacks": 0,
           "marked": 0, "first_turns": sorted(w.first.values()),
           "honest_marked": sorted(w.honest_marked), "verdicts": {},
           "liar": out.strip().splitlines()[-2:] if out else []}
    for i in range(c.n - 1):
        rec["acc"]["n%d" % i] = round(accs[i], 2)
        rec["rollbacks"] += th.rollbacks(logs[i])
        marks = th.summary_marks(logs[i])
        rec["marked"] += liar in marks
        rec["honest_marked"] = sorted(set(rec["honest_marked"])
                                      | (marks - {liar}))
        rc = th.robust_counts(logs[i], liar)
        for k, v in (rc or {}).items():
            if k not in ("suspect_model", "sway", "evidence",
                         "evidence_pull", "evidence_push",
                         "evidence_pull_d", "evidence_push_d"):
                rec["verdicts"][k] = rec["verdicts"].get(k, 0) + v
        # every sender's sway and evidence at this node: the liar's, the
        # honest ones'
        for j in range(c.n):
            rj = th.robust_counts(logs[i], "n%d" % j) if j != i else None
            who = "liar" if j == c.n - 1 else "honest"
            for f in ("sway", "evidence", "evidence_pull", "evidence_push",
                      "evidence_pull_d", "evidence_push_d"):
                if rj and rj[f] == rj[f]:
                    rec.setdefault("%s_%s" % (f, who), []).append(rj[f])
    m = re.search(r"offset ([0-9.]+) x RMS", out or "")
    rec["offset"] = float(m.group(1)) if m else None
    return rec


def table(recs, sizes, attacks):
    rows = ["| n | attack | acc mean (min-max) % | delta: median of runs "
            "(worst node) | "
            "liar marked at end | judged when first marked | honest marked | "
            "rollbacks | liar acc/clip/sway/far/named/not_partner | offset |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for n in sizes:
        clean = [r for r in recs if r["n"] == n and r["attack"] == "clean"]
        base = {}
        for r in clean:
            for k, v in r["acc"].items():
                base.setdefault(k, []).append(v)
        base = {k: sum(v) / len(v) for k, v in base.items()}
        for a in ["clean"] + attacks:
            rs = [r for r in recs if r["n"] == n and r["attack"] == a]
            if not rs:
                continue
            accs = [v for r in rs for v in r["acc"].values()]
            deltas = [v - base[k] for r in rs for k, v in r["acc"].items()
                      if k in base]
            # per run, the honest nodes' mean delta; the median of runs
            run_d = sorted(sum(v - base[k] for k, v in r["acc"].items()
                               if k in base) / max(len(r["acc"]), 1)
                           for r in rs)
            med = (run_d[len(run_d) // 2] if len(run_d) % 2 else
                   0.5 * (run_d[len(run_d) // 2 - 1] +
                          run_d[len(run_d) // 2]))
            turns = [t for r in rs for t in r["first_turns"]]
            vd = {}
            for r in rs:
                for k, v in r["verdicts"].items():
                    vd[k] = vd.get(k, 0) + v
            hm = sorted({x for r in rs for x in r["honest_marked"]})
            offs = [r["offset"] for r in rs if r["offset"] is not None]
            rows.append("| %d | %s | %.2f (%.2f-%.2f) | %s | %s | %s | %s "
                        "| %d | %s | %s |" % (
                            n, a, sum(accs) / len(accs), min(accs),
                            max(accs),
                            "%+.2f (%+.2f; %d runs)" % (med, min(deltas),
                                                        len(rs))
                            if a != "clean" else "%d runs" % len(rs),
                            "%d/%d" % (sum(r["marked"] for r in rs),
                                       len(rs) * (n - 1))
                            if a != "clean" else "-",
                            min(turns) if turns else "-",
                            ",".join(hm) or "none",
                            sum(r["rollbacks"] for r in rs),
                            "%d/%d/%d/%d/%d/%d" % (vd.get("accepted", 0),
                                                   vd.get("clipped", 0),
                                                   vd.get("swayed", 0),
                                                   vd.get("far", 0),
                                                   vd.get("named", 0),
                                                   vd.get("not_partner", 0))
                            if a != "clean" else "-",
                            "%.4f" % (sum(offs) / len(offs)) if offs
                            else "-"))
    return "\n".join(rows)


def from_logs(paths):
    recs = [json.loads(line) for p in paths for line in open(p)
            if line.strip()]
    sizes = sorted({r["n"] for r in recs})
    attacks = []
    for r in recs:
        if r["attack"] != "clean" and r["attack"] not in attacks:
            attacks.append(r["attack"])
    print(table(recs, sizes, attacks))
    return 0


def main():
    args = sys.argv[1:]
    if args[:1] == ["--table"]:
        return from_logs(args[1:])
    if len(args) < 4:
        print(__doc__)
        return 2
    binary, keygen, hostile, ctl = args[:4]
    opts = {"--sizes": "3,4,8", "--attacks": ",".join(ATTACKS),
            "--steps": "300", "--repeat": "1", "--out": "", "--log": ""}
    rest = args[4:]
    for k, v in zip(rest[::2], rest[1::2]):
        opts[k] = v
    if not os.path.isdir(tc.DATA):
        print("SKIP: no %s" % tc.DATA)
        return 77
    seed = int(os.environ.get("GN_SEED", "1"))
    sizes = [int(x) for x in opts["--sizes"].split(",")]
    attacks = [a for a in opts["--attacks"].split(",") if a]
    steps = int(opts["--steps"])
    print("# GN_SEED=%d steps=%d sizes=%s attacks=%s repeat=%s load=%s"
          % (seed, steps, sizes, attacks, opts["--repeat"],
             open("/proc/loadavg").read().split()[:3]))
    recs = []
    logf = open(opts["--log"], "a") if opts["--log"] else None
    for rep in range(int(opts["--repeat"])):
        for n in sizes:
            tmp = tempfile.mkdtemp(prefix="gn-liar-")
            c = tc.Cluster(binary, keygen, n, tmp, seed)
            try:
                for j, a in enumerate([None] + attacks):
                    label = "r%d-%s" % (rep, a or "clean")
                    rec = one_run(c, hostile, ctl, tmp, label, steps, a,
                                  seed)
                    rec["repeat"] = rep
                    rec["load"] = open("/proc/loadavg").read().split()[0]
                    recs.append(rec)
                    print(json.dumps(rec), flush=True)
                    if logf:
                        logf.write(json.dumps(rec) + "\n")
                        logf.flush()
            finally:
                c.kill_all()
                shutil.rmtree(tmp, ignore_errors=True)
    out = table(recs, sizes, attacks)
    print(out)
    if opts["--out"]:
        with open(opts["--out"], "w") as f:
            f.write(out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
