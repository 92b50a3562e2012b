#!/usr/bin/python3
"""bench_lab.py - the slow-link benchmark (issue 12): 4 gossipnode nodes
and PyTorch DDP-4 (gloo), one process per host of the link lab
(tests/lab/linklab), over the same links, interleaved, for each profile:

  veth       no cap, no delay
  100m20     100 Mbit/s, 20 ms RTT
  10m40      10 Mbit/s, 40 ms RTT
  100m20l1   100 Mbit/s, 20 ms RTT, 1% loss each way

Same settings as tests/bench/cluster/bench_cluster.py (its pieces are
reused): MLP 784-512-10, batch 100 per process, SGD momentum 0.9, lr 0.1,
cosine over 10 passes of each process's shard (--epochs), process i of 4 on its own
quarter of Fashion-MNIST, evaluation on the full test set every 50 steps
(its time excluded), target 88%. gossipnode with the flags gossip-cluster
gives each node (peers file of the lab addresses, one key per node,
--shard i/4, --fresh, ...) plus any extra arguments after --.

Per run it reports: time to 88% (gossip: the LAST node; every node trains
its whole schedule), final test accuracy, bytes each host sent on its link
(interface counters: everything, headers and membership included; mean
over hosts), the share of received parameter slices the nodes averaged
(their "exchange: ... averaged A ... of R received" line at exit, summed
over nodes), and the throughput efficiency as bench_cluster.py defines it
(gossip: ms/step of 4 nodes that exchange nothing, run once per bench,
over the real ms/step; DDP: its no_sync compute estimate over its real
ms/step).

DDP on a capped link takes seconds per step, so there it runs at most
--ddp-steps steps (after its 30 no_sync steps) and its time to 88% is
PROJECTED: steps the uncapped (veth) DDP run needed x the steady
s/step measured on this link (its first 5 steps excluded). Its accuracy
curve on such a link is the veth curve on that time axis (DDP is
synchronous: the same steps give the same model whatever the link).
Projected numbers are marked so in the table and in the JSON.

Plots (gnuplot, --out DIR): acc_time_PROFILE.png per link, test accuracy
against training time, every gossip node and DDP-4, log time axis.

Usage (root; run it under flock /work/bench.lock):
  /usr/bin/python3 tests/lab/bench_lab.py --build build [--profiles LIST]
      [--repeat R] [--epochs E] [--ddp-steps N] [--out DIR]
      [--variant LABEL:ARGS]
      [--build-variant LABEL:DIR] [-- extra gossipnode args]
Prints a table and one JSON line per run. Only the lab's own namespaces
carry traffic; the lab is removed after each profile, also on failure.
"""
import argparse
import importlib.machinery
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench", "cluster"))
import bench_cluster as bc  # noqa: E402


def load_script(path, name):
    """Import a Python script that has no .py suffix."""
    return importlib.machinery.SourceFileLoader(name, path).load_module()


linklab = load_script(os.path.join(HERE, "linklab"), "linklab")
gcluster = load_script(os.path.join(ROOT, "tools", "gossip-cluster"),
                       "gossip_cluster")
gplot = load_script(os.path.join(ROOT, "tools", "gossip-plot"), "gossip_plot")

# its summarize() combines the ranks' lines (torch is imported only if
# DDP runs)
DDP = types.SimpleNamespace(summarize=lambda *x: load_script(
    os.path.join(ROOT, "tests", "bench", "cluster", "ddp_baseline.py"),
    "ddp_baseline").summarize(*x))

PROFILES = {  # name: (rate, rtt, loss, label)
    "veth": (None, 0.0, 0.0, "veth, no cap"),
    "100m20": (100e6, 0.020, 0.0, "100 Mbit/s, 20 ms RTT"),
    "10m40": (10e6, 0.040, 0.0, "10 Mbit/s, 40 ms RTT"),
    "100m20l1": (100e6, 0.020, 0.01, "100 Mbit/s, 20 ms RTT, 1% loss"),
}
NODES = 4
PORT = 7946          # every host has its own address: one port for all
DDP_PORT = 29500
EXCHANGE_RE = re.compile(r"exchange: .*?averaged (\d+) .*?of (\d+) received")
WAITS_RE = re.compile(r"averaging waits: (\d+), (\d+) timed out")


def lab_options(name, prof, a):
    rate, rtt, loss, _ = PROFILES[prof]
    return types.SimpleNamespace(
        nodes=NODES, rate=rate, burst=None, queue_latency=0.05, rtt=rtt,
        loss=loss, seed=a.seed, subnet="10.77.0", delayer=a.delayer)


def exchange_stats(log):
    """(averaged, received, waits, timed out) from a node's log."""
    avg = rec = waits = tout = None
    try:
        with open(log, errors="replace") as f:
            for line in f:
                m = EXCHANGE_RE.search(line)
                if m:
                    avg, rec = int(m.group(1)), int(m.group(2))
                m = WAITS_RE.search(line)
                if m:
                    waits, tout = int(m.group(1)), int(m.group(2))
    except OSError:
        pass
    return avg, rec, waits, tout


def tx_bytes(lab):
    return [c["tx_bytes"] for c in lab.counters()]


def run_gossip(a, lab, extra, label, build=None):
    """gossip-cluster's per-node flags, one node per lab host; binaries
    from build (default --build)."""
    build = os.path.abspath(build or a.build)
    exe = os.path.join(build, "node", "gossipnode")
    keygen = os.path.join(build, "tools", "gossip-keygen")
    work = tempfile.mkdtemp(prefix="gn-lab-")
    nodes = [gcluster.Node(i, NODES, work, PORT) for i in range(NODES)]
    lines = ["# generated by bench_lab.py: addr  public key  name"]
    for nd in nodes:
        nd.addr = f"{lab.addr(nd.i)}:{PORT}"
        nd.metrics = None
        os.makedirs(nd.ckpt, exist_ok=True)
        lines.append(gcluster.node_key(keygen, nd.key, nd.addr, nd.name))
    peers = os.path.join(work, "peers.txt")
    with open(peers, "w") as f:
        f.write("\n".join(lines) + "\n")
    steps = getattr(a, "steps", None)
    opts = types.SimpleNamespace(
        seed=a.seed, steps=steps, epochs=None if steps else a.epochs,
        time_budget=None,
        target_acc=None, resume=False,
        extra=["--eval-every", str(a.eval_every), "--lr", str(a.lr)] + extra)
    before = tx_bytes(lab)
    t0 = time.time()
    procs = []
    try:
        for nd in nodes:
            with open(nd.log, "wb") as logf:
                procs.append(lab.popen(nd.i, nd.argv(exe, peers, opts),
                                       stdin=subprocess.DEVNULL, stdout=logf,
                                       stderr=subprocess.STDOUT,
                                       start_new_session=True))
        deadline = time.monotonic() + a.gossip_timeout
        for p in procs:
            p.wait(max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        print(f"gossip {label}: timeout", file=sys.stderr)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    wall = time.time() - t0
    sent = [x - y for x, y in zip(tx_bytes(lab), before)]
    res = [bc.node_result(bc.events(nd.events), a.target) for nd in nodes]
    ex = [exchange_stats(nd.log) for nd in nodes]
    evals = {nd.name: [(e["train_s"], e["test_acc"])
                       for e in bc.events(nd.events)
                       if e["ev"] == "eval" and e.get("test_acc") is not None]
             for nd in nodes}
    times = [r[0] for r in res]
    avg = sum(e[0] or 0 for e in ex)
    rec = sum(e[1] or 0 for e in ex)
    row = {
        "framework": "gossipnode" + (f"[{label}]" if label else ""),
        "procs": NODES,
        "seconds_to_target": None if any(t is None for t in times)
        else max(times),
        "final_test_acc": [r[2] for r in res],
        "steps": [r[3] for r in res],
        "ms_per_step": [r[4] for r in res],
        "compute_efficiency": bc.mean([r[1] for r in res]),
        "bytes_sent": sent,
        "slices_averaged": avg, "slices_received": rec,
        "share_averaged": avg / rec if rec else None,
        "waits": [e[2] for e in ex], "waits_timed_out": [e[3] for e in ex],
        "wall_seconds": wall, "args": " ".join(extra), "evals": evals,
    }
    if a.keep:
        row["workdir"] = work
    else:
        shutil.rmtree(work, ignore_errors=True)
    return row


def run_ddp(a, lab, max_steps):
    """A gloo rendezvous sometimes hangs on a busy machine (bench_cluster.py
    saw it about once in 10 DDP-4 runs): that is not DDP's speed, so a
    failed run is retried once, on another port, and the retry recorded."""
    r = run_ddp_once(a, lab, max_steps, DDP_PORT)
    if r.get("error"):
        print(f"ddp: {r['error']}; retrying once", file=sys.stderr)
        err = r["error"]
        r = run_ddp_once(a, lab, max_steps, DDP_PORT + 1)
        r["retried_after"] = err
    return r


def run_ddp_once(a, lab, max_steps, port):
    """One DDP-4 run, rank r in host r; gloo over the lab interface."""
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "tests", "bench", "cluster",
                                            "ddp_baseline.py"),
           "--procs", str(NODES), "--target", str(a.target / 100.0),
           "--eval-every", str(a.eval_every), "--seed", str(a.seed),
           "--port", str(port), "--lr", str(a.lr),
           "--master-addr", lab.addr(0), "--max-steps", str(max_steps),
           "--max-epochs", str(a.epochs)]
    before = tx_bytes(lab)
    procs = []
    for r in range(NODES):
        env = lab.env(r)
        env["GLOO_SOCKET_IFNAME"] = linklab.IFACE
        procs.append(lab.popen(r, cmd + ["--rank", str(r)], env=env,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               start_new_session=True))
    outs, err = [], None
    deadline = time.monotonic() + a.ddp_timeout
    for p in procs:
        try:
            out, e = p.communicate(timeout=max(1.0, deadline -
                                               time.monotonic()))
            if p.returncode != 0:
                err = f"exit {p.returncode}: {e.strip()[-300:]}"
            else:
                outs.append(json.loads(out.strip().splitlines()[-1]))
        except subprocess.TimeoutExpired:
            err = "TimeoutExpired"
            break
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    sent = [x - y for x, y in zip(tx_bytes(lab), before)]
    if err or len(outs) != NODES:
        return {"framework": "pytorch-ddp-gloo", "procs": NODES,
                "error": err or "missing results", "bytes_sent": sent}
    s = DDP.summarize(outs, types.SimpleNamespace(
        procs=NODES, batch=100, lr=a.lr, target=a.target / 100.0,
        max_steps=max_steps))
    s["bytes_sent"] = sent
    s["evals"] = [(st, t, acc * 100) for st, t, acc in s["evals"]]
    s["test_acc"] = s["test_acc"] * 100
    return s


def project_ddp(row, ref):
    """A bounded DDP run's time to target from the reference run's steps
    (uncapped, same seed) and this link's steady s/step."""
    if row.get("error") or not ref or ref.get("seconds_to_target") is None:
        return
    msps = row.get("ms_per_step_steady") or row["ms_per_step"]
    row["projected"] = True
    row["steps_to_target_ref"] = ref["steps"]
    row["seconds_to_target"] = ref["steps"] * msps / 1e3
    row["final_test_acc_ref"] = ref["test_acc"]
    if row.get("steps"):  # allreduce bytes are the same every step
        row["bytes_sent_projected"] = [b * ref["steps"] / row["steps"]
                                       for b in row["bytes_sent"]]
    row["evals"] = [(st, st * msps / 1e3, acc) for st, _, acc in ref["evals"]]


def tput(row, iso_ms):
    if row["framework"].startswith("gossipnode"):
        ms = bc.mean(row["ms_per_step"])
        return iso_ms / ms if iso_ms and ms else None
    c, ms = row.get("compute_ms_per_step"), (row.get("ms_per_step_steady")
                                             or row.get("ms_per_step"))
    return c / ms if c and ms else None


def plot(out_dir, prof, rows):
    """acc_time_PROF.png: test accuracy against training time."""
    if shutil.which("gnuplot") is None:
        return None
    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, f"acc_time_{prof}.png")
    term = gplot.terminal().format(w=1100, h=650)
    with tempfile.TemporaryDirectory(prefix="gn-labplot-") as tmp:
        cmds = []
        gossip = [r for r in rows if r["framework"].startswith("gossipnode")]
        for k, r in enumerate(gossip):  # one dash pattern per variant
            for i, (name, pts) in enumerate(sorted(r["evals"].items())):
                d = gplot.write_data(tmp, "g", [p for p in pts if p[0] > 0])
                cmds.append(f"{gplot.gp_quote(d)} using 1:2 with lines lw 2 "
                            f"lc {i + 1} dt {k % 5 + 1} title "
                            f"{gplot.gp_quote(r['framework'] + ' ' + name)}")
        for r in rows:
            if r["framework"].startswith("gossipnode"):
                continue
            if r.get("evals"):
                d = gplot.write_data(tmp, "d", [(t, acc) for _, t, acc in
                                                r["evals"] if t > 0])
                title = "DDP-4 (gloo)" + (
                    " projected: veth curve x measured s/step"
                    if r.get("projected") else "")
                cmds.append(f"{gplot.gp_quote(d)} using 1:2 with lines lw 3 "
                            f"dt 2 lc rgb 'black' title {gplot.gp_quote(title)}")
        if not cmds:
            return None
        script = (f"{term}\nset output {gplot.gp_quote(png)}\n"
                  f"set title {gplot.gp_quote('test accuracy, ' + PROFILES[prof][3])}\n"
                  "set xlabel 'training time (s, log scale)'\n"
                  "set ylabel 'test accuracy (%)'\nset logscale x\n"
                  "set yrange [70:90]\nset grid\nset key bottom right\n"
                  f"set arrow from graph 0, first 88 to graph 1, first 88 "
                  "nohead dt 3 lc rgb 'red'\n"
                  "plot " + ", \\\n  ".join(cmds) + "\n")
        r = subprocess.run(["gnuplot"], input=script, text=True,
                           capture_output=True)
    return png if r.returncode == 0 else None


def run_profile(a, prof, extra, iso_rows, ddp_ref, rows):
    name = f"bench{os.getpid() % 100000}"
    lab = linklab.Lab(name)
    lab.up(lab_options(name, prof, a))
    try:
        if a.isolated and not iso_rows:
            r = run_gossip(a, lab, extra + bc.ISOLATED, "isolated")
            r["profile"] = prof
            iso_rows.append(r)
            emit(r)
        for label, vextra, vbuild in a.variants:
            r = run_gossip(a, lab, extra + vextra, label, vbuild)
            r["profile"] = prof
            rows.append(r)
            emit(r)
        if not a.no_torch:
            capped = PROFILES[prof][0] is not None or PROFILES[prof][1] > 0
            r = run_ddp(a, lab, a.ddp_steps if capped else 0)
            r["profile"] = prof
            if capped:
                project_ddp(r, ddp_ref.get("ref"))
            elif not r.get("error"):
                ddp_ref["ref"] = r
            rows.append(r)
            emit(r)
    finally:
        lab.down(quiet=True)


def emit(r):
    brief = {k: v for k, v in r.items() if k != "evals"}
    print(json.dumps(brief), file=sys.stderr, flush=True)


def fmt_acc(r):
    accs = r.get("final_test_acc")
    if isinstance(accs, list):
        accs = [x for x in accs if x is not None]
        return f"{min(accs):.2f}–{max(accs):.2f}" if accs else "-"
    if r.get("projected"):
        return f"({r['final_test_acc_ref']:.2f})"
    return bc.fmt(r.get("test_acc"), "{:.2f}")


def table(rows, iso_ms):
    print(f"\n{'link':<10}{'system':<24}{'s to 88%':>12}{'final acc %':>15}"
          f"{'MB sent/node':>14}{'averaged':>10}{'tput eff.':>11}"
          f"{'ms/step':>10}")
    for r in rows:
        t = bc.fmt(r.get("seconds_to_target"))
        if r.get("projected"):
            t = "~" + t + " p"
        if r.get("error"):
            t = r["error"][:12]
        mb = bc.mean(r.get("bytes_sent_projected") or
                     r.get("bytes_sent", [])) or 0
        sh = r.get("share_averaged")
        ms = bc.mean(r["ms_per_step"]) if isinstance(r.get("ms_per_step"),
                                                     list) else (
            r.get("ms_per_step_steady") or r.get("ms_per_step"))
        print(f"{r['profile']:<10}{r['framework']:<24}{t:>12}"
              f"{fmt_acc(r):>15}{mb / 1e6:>14.1f}"
              f"{bc.fmt(sh, '{:.1%}'):>10}{bc.fmt(tput(r, iso_ms), '{:.1%}'):>11}"
              f"{bc.fmt(ms, '{:.1f}'):>10}")
    print("p = projected: steps the veth DDP run needed x s/step (and bytes "
          "per step) measured here; (acc) = that run's final accuracy")


def parse_args():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--profiles", default="veth,100m20,10m40,100m20l1")
    ap.add_argument("--target", type=float, default=88.0)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--variant", action="append", default=[],
                    metavar="LABEL:ARGS",
                    help="also run gossip-4 with these extra arguments")
    ap.add_argument("--build-variant", action="append", default=[],
                    metavar="LABEL:DIR",
                    help="also run gossip-4 with the binaries of build "
                         "directory DIR (e.g. the code before a change), "
                         "interleaved with ours on every link")
    ap.add_argument("--ddp-steps", type=int, default=30,
                    help="DDP steps measured on a capped link (projected)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-isolated", dest="isolated", action="store_false")
    ap.add_argument("--gossip-timeout", type=float, default=900)
    ap.add_argument("--ddp-timeout", type=float, default=900)
    ap.add_argument("--delayer", default=None)
    ap.add_argument("--out", default="lab-bench")
    ap.add_argument("--epochs", type=int, default=10,
                    help="passes over each process's shard, the cosine "
                    "schedule's length, both systems (default 10)")
    ap.add_argument("--steps", type=int, default=None,
                    help="gossip: train this many steps (default --epochs "
                    "passes of the shard, 150 steps each)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the gossip work dirs (logs, event logs)")
    a = ap.parse_args(argv)
    a.profiles = a.profiles.split(",")
    for p in a.profiles:
        if p not in PROFILES:
            ap.error(f"unknown profile {p} ({', '.join(PROFILES)})")
    if not a.no_torch and "veth" not in a.profiles:
        ap.error("DDP projections need the veth profile in the same run")
    a.profiles.sort(key=lambda p: p != "veth")  # the DDP reference first
    a.variants = [("", [], None)]
    a.variants += [(v.partition(":")[0], v.partition(":")[2].split(), None)
                   for v in a.variant]
    a.variants += [(v.partition(":")[0], [], v.partition(":")[2])
                   for v in a.build_variant]
    a.delayer = linklab.find_delayer(a.delayer or os.path.join(
        a.build, "tests", "lab", "lab_delay"))
    return a, extra


def main():
    a, extra = parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_lab: needs root (network namespaces)")
    linklab.trap_signals()
    rows, iso_rows, ddp_ref = [], [], {}
    try:
        for _ in range(a.repeat):
            for prof in a.profiles:
                run_profile(a, prof, extra, iso_rows, ddp_ref, rows)
    except linklab.LabSignal as e:
        print(f"bench_lab: {e}; partial results", file=sys.stderr)
    iso_ms = bc.mean(iso_rows[0]["ms_per_step"]) if iso_rows else None
    print(f"\nMLP 784-512-10, batch 100/process, cosine over {a.epochs} "
          f"passes, target {a.target}%, 4 hosts "
          f"per link; load at end {os.getloadavg()[0]:.1f}; isolated gossip "
          f"ms/step {bc.fmt(iso_ms, '{:.2f}')}")
    table(rows, iso_ms)
    for prof in a.profiles:
        png = plot(a.out, prof, [r for r in rows if r["profile"] == prof])
        if png:
            print(png)
    for r in iso_rows + rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
