#!/usr/bin/python3
"""calibrate.py - the fleet lab's Pi-class compute: which CPU quota makes
a device's MLP step (784-512-10, batch 100, 1 thread) take a Raspberry
Pi's time.

  calibrate.py --deb AMD64_DEB [--quotas 100,50,25,12,8,6,4,3,2]
               [--rounds 3] [--steps 300]

One amd64 device of the fleet lab, the package installed with apt; in
each round every quota in turn (the order rotated from round to round,
so a slow spell of the shared host does not land on one quota), the
device's cgroup is set to it and `gossipnode --steps N --threads 1`
trains alone inside the device. Its step time is the training thread's
own measure (the `training thread: computing X s of Y s` line: Y is the
wall time spent in steps, evaluation excluded) divided by N. Prints a
table: quota, median ms/step, min-max, and the same as a fraction of
the unlimited step; and the quotas that come closest to the Pi targets
given with --target (name=ms, e.g. pi4=45,pi3=135).

The reference for the targets (docs/benchmarks.md, "Fleet lab") is
stated there with its arithmetic; this script only measures.
"""
import argparse
import importlib.machinery
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
fleet = importlib.machinery.SourceFileLoader(
    "fleet", os.path.join(HERE, "fleet")).load_module()

STEP_RE = re.compile(r"training thread: computing ([0-9.]+) s of ([0-9.]+) s")


def step_ms(fl, steps):
    r = fl.run(0, ["gossipnode", "--model", "784-512-10", "--steps",
                   str(steps), "--threads", "1", "--batch", "100",
                   "--eval-every", str(steps)], timeout=1800)
    m = STEP_RE.search(r.stdout + r.stderr)
    if not m:
        raise fleet.FleetError("no 'training thread' line in: "
                               + (r.stdout + r.stderr)[-400:])
    return 1000.0 * float(m.group(2)) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deb", required=True)
    ap.add_argument("--quotas", default="100,50,25,12,8,6,4,3,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--target", default="",
                    help="name=ms,... step times to find quotas for")
    ap.add_argument("--name", default="calib")
    a = ap.parse_args()
    quotas = [float(q) for q in a.quotas.split(",")]
    fleet.rootfs_add_deps("amd64", a.deb)
    fl = fleet.Fleet(a.name)
    ns = argparse.Namespace(
        devices=fleet.parse_spec("amd64"), rate=None, burst=None,
        queue_latency=0.05, rtt=0.0, loss=0.0, seed=1, subnet="10.79.0",
        delayer=None)
    res = {q: [] for q in quotas}
    try:
        fl.up(ns)
        fl.put(0, a.deb, "/root/gn.deb")
        fl.run(0, ["apt", "install", "-y", "/root/gn.deb"], timeout=600)
        # the kernel probe once, unthrottled, so no round pays for it
        fl.run(0, ["gossipnode", "--steps", "1"], timeout=600)
        for rnd in range(a.rounds):
            order = quotas[rnd % len(quotas):] + quotas[:rnd % len(quotas)]
            for q in order:
                fl.quota(0, None if q >= 100 else q)
                # fewer steps where each is slow: about the same wall time
                n = max(30, int(a.steps * min(1.0, q / 25)))
                ms = step_ms(fl, n)
                res[q].append(ms)
                print(f"calibrate: round {rnd + 1} quota {q:g}% "
                      f"{n} steps: {ms:.2f} ms/step", flush=True)
    finally:
        fl.down(quiet=True)
    base = statistics.median(res[max(quotas)])
    print("\n| quota (% of one core) | ms/step (median) | min-max | "
          "x the unlimited step |")
    print("|---|---|---|---|")
    for q in sorted(quotas, reverse=True):
        v = res[q]
        print(f"| {q:g} | {statistics.median(v):.1f} | {min(v):.1f}-"
              f"{max(v):.1f} | {statistics.median(v) / base:.1f} |")
    for t in filter(None, a.target.split(",")):
        name, ms = t.split("=")
        best = min(quotas, key=lambda q: abs(statistics.median(res[q])
                                             - float(ms)))
        print(f"calibrate: {name} ({ms} ms/step): closest quota {best:g}% "
              f"({statistics.median(res[best]):.1f} ms/step); "
              f"interpolated {100 * base / float(ms):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
