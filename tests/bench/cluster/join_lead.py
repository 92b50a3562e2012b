#!/usr/bin/python3
"""join_lead.py BUILD DELAY_S [DELAY_S ...] - nodes started together, a few
steps apart, on 127.0.0.1 (docs/history/benchmarks-log.md 5.7): n0 and n1 start, n2 and
n3 DELAY_S seconds later; all train 10 epochs with the defaults. Prints,
per delay, each node's lead when it started (the steps the member it saw
was ahead: "took the step") or whether it fetched a model, the slices its
robust merge refused as far, and its final test accuracy.

Uses the cluster tests' launcher (tests/node/test_cluster_run.py).
Python 3 standard library only.
"""
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "node"))
import test_cluster_run as tc  # noqa: E402


def one(build, delay):
    tc.COMMON = []  # the defaults, as the lab runs them
    tmp = tempfile.mkdtemp(prefix="gn-joinlead-")
    c = tc.Cluster(os.path.join(build, "node", "gossipnode"),
                   os.path.join(build, "tools", "gossip-keygen"), 4, tmp, 1)
    run = ["--epochs", "10", "--eval-every", "1500"]
    try:
        c.start(0, run)
        c.start(1, run)
        time.sleep(delay)
        c.start(2, run)
        c.start(3, run)
        for i in range(4):
            c.procs[i].wait(300)
        row = []
        for i in range(4):
            txt = open(c.log_path(i)).read()
            lead = re.search(r"is (\d+) steps ahead", txt)
            fetch = re.search(r"asking \S+ \(step (\d+)\)", txt)
            far = re.search(r"refused (\d+) far", txt)
            acc = re.search(r"test accuracy ([\d.]+)", txt)
            how = ("took the step, %s behind" % lead.group(1) if lead else
                   "took a model, %s behind" % fetch.group(1) if fetch else
                   "started at 0")
            row.append("n%d: %s, far %s, acc %s" % (
                i, how, far.group(1) if far else "?",
                acc.group(1) if acc else "?"))
        print("delay %.2f s | %s" % (delay, " | ".join(row)), flush=True)
    finally:
        c.kill_all()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    for d in sys.argv[2:]:
        one(os.path.abspath(sys.argv[1]), float(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
