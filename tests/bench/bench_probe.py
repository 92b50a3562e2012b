#!/usr/bin/python3
"""bench_probe.py - how long a first start's BLIS kernel probe takes at a
Pi's pace, and what it chooses (node/train/kernel.h), for one or more
builds, runs interleaved.

  bench_probe.py --bin LABEL=PATH [--bin LABEL=PATH ...] [--quota PCT]
                 [--runs N] [--data DIR]

Each run starts PATH (a gossipnode) alone on 127.0.0.1 in a cgroup v1 CPU
quota of PCT % of a core (period 16.7 ms, as the fleet lab's devices;
0: no quota) with `--blis-arch probe --steps 1`, and reads the kernel
line it logs ("kernels skx (probed in 3.04 s: skx 1.50 ms ...)"). Prints
each run and, per label, the median probe time (min-max) and the sets it
chose. Root for the quota. Not a test: it asserts nothing; results go
in docs/benchmarks.md.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

CG = "/sys/fs/cgroup/cpu"
PERIOD_US = 16700
LINE = re.compile(r"kernels (\S+) \(probed in ([0-9.]+) s")


def keygen_for(binpath):
    return os.path.join(os.path.dirname(os.path.dirname(binpath)), "tools",
                        "gossip-keygen")


def quota_cgroup(quota):
    """A cgroup v1 cpu group of ours holding quota % of a core (period
    PERIOD_US); None for no quota."""
    if quota <= 0:
        return None
    cg = os.path.join(CG, "gnprobe%d" % os.getpid())
    os.makedirs(cg, exist_ok=True)
    with open(os.path.join(cg, "cpu.cfs_period_us"), "w") as f:
        f.write(str(PERIOD_US))
    with open(os.path.join(cg, "cpu.cfs_quota_us"), "w") as f:
        f.write(str(int(PERIOD_US * quota / 100.0)))
    return cg


def enter_cgroup(cg):
    """A preexec_fn that moves the child into cg (None: nothing)."""
    def enter():
        if cg:
            with open(os.path.join(cg, "tasks"), "w") as f:
                f.write(str(os.getpid()))
    return enter


def remove_cgroup(cg):
    """Remove cg once its processes are gone (None: nothing)."""
    if cg:
        os.rmdir(cg)


def run_one(binpath, quota, work, data):
    keygen = keygen_for(binpath)
    key = os.path.join(work, "node.key")
    peers = os.path.join(work, "peers.txt")
    if not os.path.exists(key):
        with open(peers, "w") as f:
            subprocess.run([keygen, "--addr", "127.0.0.1:7990", "--name",
                            "probe", "--out", key], stdout=f, check=True)
    argv = [binpath, "--peers", peers, "--key", key, "--listen",
            "127.0.0.1:7990", "--name", "probe", "--steps", "1", "--fresh",
            "--checkpoint-dir", os.path.join(work, "ck"),
            "--blis-arch", "probe"]
    if data:
        argv += ["--data", data]
    cg = quota_cgroup(quota)
    try:
        out = subprocess.run(argv, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             preexec_fn=enter_cgroup(cg), timeout=300).stdout
    finally:
        remove_cgroup(cg)
    for line in out.splitlines():
        m = LINE.search(line)
        if m:
            return float(m.group(2)), m.group(1), line.split("] ", 1)[-1]
    sys.exit("bench_probe: no probe line from %s:\n%s" % (binpath, out))


def parse_builds(doc, runs, prog):
    """The command line of a builds-interleaved bench (this one's and
    bench_start.py's): --bin LABEL=PATH..., --quota, --runs, --data; the
    quota checked (root and cgroup v1's cpu controller). (args, [(label,
    absolute path)])."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--bin", action="append", required=True,
                    metavar="LABEL=PATH")
    ap.add_argument("--quota", type=float, default=6.0)
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--data", default=None)
    a = ap.parse_args()
    if a.quota > 0 and (os.geteuid() != 0 or not os.path.isdir(CG)):
        sys.exit("%s: a quota needs root and cgroup v1's cpu controller "
                 "at %s (or --quota 0)" % (prog, CG))
    return a, [(lb, os.path.abspath(p)) for lb, p in
               (b.split("=", 1) for b in a.bin)]


def main():
    a, bins = parse_builds(__doc__, 6, "bench_probe")
    res = {label: [] for label, _ in bins}
    work = tempfile.mkdtemp(prefix="bench_probe.")
    try:
        for r in range(a.runs):
            for label, path in bins:
                s, arch, line = run_one(path, a.quota, work, a.data)
                res[label].append((s, arch))
                print("run %d %s: %s" % (r + 1, label, line), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("quota %.1f %% of a core, %d runs each, interleaved" %
          (a.quota, a.runs))
    for label, _ in bins:
        t = [s for s, _ in res[label]]
        chose = {}
        for _, arch in res[label]:
            chose[arch] = chose.get(arch, 0) + 1
        print("%s: probe %.2f s (%.2f-%.2f), chose %s" %
              (label, statistics.median(t), min(t), max(t),
               ", ".join("%s %d" % kv for kv in sorted(chose.items()))))


if __name__ == "__main__":
    main()
