#!/usr/bin/python3
"""bench_idle.py BUILD_DIR [--seconds S] [--steps N] [--nodes K] - idle CPU
of gossipnode once a quiet cluster has finished training (issue 13,
docs/history/benchmarks-log.md section 6.5).

K nodes (default 3) on 127.0.0.1 train N steps (default 200) with
`--after-train serve`, each with its control socket and metrics endpoint;
when every node's `gossipctl train` says it is no longer running, the
script waits 3 s (the last leave-free exchanges drain), then reads
utime+stime (fields 14 and 15 of /proc/PID/stat) of every node at the
start and end of S seconds (default 30) and prints each node's share of
one core, its thread count (the training thread must be gone) and its
voluntary context switches per second (its wake-ups). At the end every
node must still list all K members alive in `gossipctl members`, and
exit 0 on SIGTERM.

There is no peer program to run beside it: the target is absolute
(< 1% of a core). Run it alone: `flock /work/bench.lock python3 ...`.
Exit 0 when measured (whatever the numbers), 1 when the cluster misbehaved.
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
import time

DATA = "/usr/share/datasets/fashion-mnist"


def free_port():
    """A port free for both UDP and TCP on 127.0.0.1."""
    for _ in range(200):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        t = socket.socket()
        try:
            u.bind(("127.0.0.1", 0))
            port = u.getsockname()[1]
            t.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            t.close()
            u.close()
    raise RuntimeError("no free port")


def cpu_ticks(pid):
    """utime + stime of pid, in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])  # fields 14 and 15


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def ctl(gossipctl, sock, *args):
    r = subprocess.run([gossipctl, "--socket", sock, "--json"] + list(args),
                       capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        raise RuntimeError("gossipctl %s: %s" % (args, r.stderr.strip()))
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=3)
    a = ap.parse_args()
    node = os.path.join(a.build, "node", "gossipnode")
    keygen = os.path.join(a.build, "tools", "gossip-keygen")
    gossipctl = os.path.join(a.build, "tools", "gossipctl")
    if not os.path.isdir(DATA):
        print("no %s" % DATA)
        return 1
    tmp = tempfile.mkdtemp(prefix="gn-idle-")
    procs, socks, ok = [], [], False
    try:
        lines = []
        for i in range(a.nodes):
            key = os.path.join(tmp, "k%d" % i)
            subprocess.run([keygen, "--out", key, "--addr",
                            "127.0.0.1:%d" % free_port(), "--name",
                            "n%d" % i], check=True,
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            lines.append(open(key + ".pub").read())
        peers = os.path.join(tmp, "peers")
        open(peers, "w").write("".join(lines))
        for i in range(a.nodes):
            sock = os.path.join(tmp, "ctl%d.sock" % i)
            socks.append(sock)
            log = open(os.path.join(tmp, "log%d" % i), "w")
            procs.append(subprocess.Popen(
                [node, "--no-config", "--peers", peers, "--key",
                 os.path.join(tmp, "k%d" % i), "--shard",
                 "%d/%d" % (i, a.nodes), "--steps", str(a.steps),
                 "--threads", "1", "--control", sock,
                 "--metrics", "127.0.0.1:%d" % free_port(),
                 "--after-train", "serve"],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL))
        t0 = time.time()
        while True:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a node exited while training")
            try:
                done = all(not ctl(gossipctl, s, "train")["running"]
                           and ctl(gossipctl, s, "train")["step"] >= a.steps
                           for s in socks)
            except (RuntimeError, ValueError):
                done = False
            if done:
                break
            if time.time() - t0 > 300:
                raise RuntimeError("training did not finish in 300 s")
            time.sleep(0.5)
        print("all %d nodes finished %d steps after %.1f s; settling 3 s"
              % (a.nodes, a.steps, time.time() - t0))
        time.sleep(3)
        hz = os.sysconf("SC_CLK_TCK")
        c0 = [cpu_ticks(p.pid) for p in procs]
        v0 = [int(status(p.pid)["voluntary_ctxt_switches"]) for p in procs]
        w0 = time.monotonic()
        time.sleep(a.seconds)
        w1 = time.monotonic()
        c1 = [cpu_ticks(p.pid) for p in procs]
        st = [status(p.pid) for p in procs]
        wall = w1 - w0
        print("idle over %.1f s (CLK_TCK %d, resolution %.3f%% of a core)"
              % (wall, hz, 100.0 / hz / wall))
        print("node  cpu %core  threads  wakeups/s")
        for i, p in enumerate(procs):
            pct = 100.0 * (c1[i] - c0[i]) / hz / wall
            wk = (int(st[i]["voluntary_ctxt_switches"]) - v0[i]) / wall
            print("n%-4d %9.3f  %7s  %9.1f" % (i, pct, st[i]["Threads"], wk))
        for i, s in enumerate(socks):
            alive = [m["name"] for m in ctl(gossipctl, s, "members")
                     if m["state"] == "alive"]
            if len(alive) != a.nodes:
                raise RuntimeError("n%d sees %s alive" % (i, alive))
        for p in procs:
            p.send_signal(signal.SIGTERM)
        rcs = [p.wait(60) for p in procs]
        if any(rcs):
            raise RuntimeError("exit codes on SIGTERM: %s" % rcs)
        print("all members alive at the end; all exited 0 on SIGTERM")
        ok = True
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print("FAIL: %s" % e)
        for i in range(a.nodes):
            path = os.path.join(tmp, "log%d" % i)
            if os.path.exists(path):
                print("---- n%d\n%s" % (i, open(path).read()[-3000:]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
