#!/usr/bin/python3
"""test_slowlink.py BUILD - issue 12's CI check: 4 gossipnode nodes in the
link lab (tests/lab/linklab: one network namespace per node, tbf at
10 Mbit/s each way, 40 ms RTT added at each receiver by lab_delay) train
STEPS steps with the defaults, and the exchange must keep working:

  - at least MIN_SHARE (60 %) of all received parameter slices are
    averaged, not refused as too old (before the adaptation: 1.3 %,
    history/benchmarks-log.md 5);
  - every node adapted to the link: its log says "adapting to the link:
    int8 ..." (a cheaper encoding than the configured fp16);
  - no node ends with its exchange degraded (the summary line says
    "exchange ok").

And the same run with --adapt off must fail the first check, or the test
proves nothing: it runs too, shorter, and its share must be below
MIN_SHARE (it is printed either way).

Root only (network namespaces); exits 77 (skip) without root, without
the data set, or without lab_delay. GN_SEED sets --seed. Prints every
figure it measured.
"""
import argparse
import os
import re
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_lab as bl  # noqa: E402

# 1000 steps. Measured share averaged with the adaptation: 95.2 %, 93.9 %,
# 88.8 % and, once in CI, 71.8 %; with --adapt off 2.6-3.8 %. With the
# probed kernels a step takes 4-7 ms, so K grows to 32-64 and a node
# receives only 24-36 slices: each one refused weighs ~3 %. The 71.8 %
# run's refusals were slices of a partner whose K differed from the
# receiver's (out_of_window); since PARAMS carry their period and are
# judged by the larger K (gossip_plan_window), 96.6 % and 86.7 %
# (seeds 1, 2), the rest not_partner at the start and a few out of
# every window. The bar is 60 %: far above what --adapt off gets, below
# that spread; the issue's >= 90 % is the benchmark's, over 1500 steps
# (history/benchmarks-log.md 5.5: 93.6-99.1 % on every link).
STEPS = 1000
MIN_SHARE = 0.60


def args(build, steps, seed):
    return types.SimpleNamespace(
        build=build, seed=seed, lr=0.1, eval_every=steps, target=88.0,
        gossip_timeout=600, keep=True, steps=steps,
        delayer=os.path.join(build, "tests", "lab", "lab_delay"))


def node_logs(row):
    work = row["workdir"]
    out = {}
    for d in sorted(os.listdir(work)):
        p = os.path.join(work, d, "node.log")
        if os.path.exists(p):
            out[d] = open(p, errors="replace").read()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--steps", type=int, default=STEPS)
    o = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespaces)")
        return 77
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        print("SKIP: no Fashion-MNIST")
        return 77
    if not os.path.exists(os.path.join(o.build, "tests", "lab",
                                       "lab_delay")):
        print("SKIP: no lab_delay (libnetfilter-queue-dev)")
        return 77
    seed = int(os.environ.get("GN_SEED", "1"))
    print(f"# GN_SEED={seed} steps={o.steps} link=10m40")
    name = f"slow{os.getpid() % 100000}"
    lab = bl.linklab.Lab(name)
    a = args(os.path.abspath(o.build), o.steps, seed)
    lab.up(bl.lab_options(name, "10m40", a))
    failures = []
    try:
        on = bl.run_gossip(a, lab, [], "adapt")
        off = bl.run_gossip(args(a.build, o.steps // 2, seed), lab,
                            ["--adapt", "off"], "noadapt")
    finally:
        lab.down(quiet=True)
    for label, r in (("adapt on", on), ("adapt off", off)):
        print(f"{label}: averaged {r['slices_averaged']} of "
              f"{r['slices_received']} received "
              f"({(r['share_averaged'] or 0):.1%}), final acc "
              f"{r['final_test_acc']}, MB sent/node "
              f"{sum(r['bytes_sent']) / len(r['bytes_sent']) / 1e6:.1f}, "
              f"ms/step {[round(x, 1) for x in r['ms_per_step']]}")
    logs = node_logs(on)
    for node, text in logs.items():
        for ln in text.splitlines():
            if ("adapting to the link" in ln or "adaptation:" in ln or
                    "started with us" in ln or "for the model" in ln or
                    "took the model" in ln):
                print(f"  {ln.strip()}")
    share = on["share_averaged"] or 0
    if share < MIN_SHARE:
        failures.append(f"only {share:.1%} of received slices averaged "
                        f"(need {MIN_SHARE:.0%})")
    if (off["share_averaged"] or 0) >= MIN_SHARE:
        failures.append("with --adapt off the share was "
                        f"{off['share_averaged']:.1%}: the check cannot "
                        "tell the difference")
    if len(logs) != 4:
        failures.append(f"{len(logs)} node logs, want 4")
    for node, text in logs.items():
        if not re.search(r"adapting to the link: int8", text):
            failures.append(f"{node} never chose int8")
        if not re.search(r"adaptation: .*; exchange ok", text):
            failures.append(f"{node} ended with its exchange degraded")
    for r in (on, off):
        if failures:
            print(f"kept for inspection: {r['workdir']}")
        else:
            bl.shutil.rmtree(r["workdir"], ignore_errors=True)
    for f in failures:
        print("FAIL: " + f)
    print("PASS" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
