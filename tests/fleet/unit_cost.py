#!/usr/bin/python3
"""unit_cost.py - what the shipped unit's sandboxing costs a start, option
by option, in one fleet device held to a Pi's share of a core.

  unit_cost.py [--quota PCT] [--runs N] [--unit PATH] [--name L]

One amd64 device (tests/fleet/fleet, no package installed) held to
--quota % of a core. From --unit (default tools/dist/gossipnode.service)
it takes the [Service] lines that set up the process (user, credentials,
directories, the hardening), not those that start or supervise it
(Type, ExecStart, Restart, timeouts, watchdog), and writes oneshot units
whose ExecStart is `date +%s.%N` under a throwaway user:
  - bare: User= and Group= only;
  - all: every such line;
  - -OPTION: every such line but OPTION's.
It starts each with `systemctl start --no-block` from outside the device's
quota and reads the time `date` printed from the journal: the seconds
from the start to the process's first instruction, which is what the
sandbox adds before gossipnode's own start. --runs rounds, the units in a
shuffled order each round; prints each unit's median and samples, fastest
first. `all` minus `bare` is the sandbox; `all` minus `-OPTION` is what
that option adds on top of the others (options share set-up work, so
these do not sum to the whole).

Used for docs/benchmarks.md "Cluster authority (issue 33)": the start ->
alive target and what it is made of. Exit status: 0, 1 on failure, 77
when this host cannot boot a device.
"""
import argparse
import importlib.machinery
import os
import random
import re
import statistics
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
fleet = importlib.machinery.SourceFileLoader(
    "fleet", os.path.join(HERE, "fleet")).load_module()

UNIT = os.path.join(HERE, "..", "..", "tools", "dist", "gossipnode.service")
# What starts or supervises the process, not what sets it up.
NOT_SETUP = {"Type", "NotifyAccess", "ExecStart", "ExecReload", "Restart",
             "RestartSec", "RestartPreventExitStatus", "TimeoutStartSec",
             "TimeoutStopSec", "WatchdogSec"}
USER = "gnucost"          # the throwaway user and names in the device
STAMP = re.compile(r"^\d+\.\d+$")
WAIT_S = 60               # one start, at most


def setup_lines(unit):
    """(key, value) of the unit's [Service] lines that set up the
    process, with gossipnode's names and paths swapped for USER's."""
    body = open(unit).read().split("[Service]", 1)[1].split("[Install]")[0]
    out = []
    for ln in body.splitlines():
        ln = ln.strip()
        if not ln or ln.startswith("#"):
            continue
        k, v = ln.split("=", 1)
        if k not in NOT_SETUP:
            out.append((k, v.replace("gossipnode", USER)))
    return out


def configs(lines):
    """name -> lines, in the unit's order of keys."""
    keys = list(dict.fromkeys(k for k, _ in lines))
    base = {"User", "Group"}
    out = {"bare": [(k, v) for k, v in lines if k in base], "all": lines}
    for k in keys:
        if k not in base:
            out["-" + k] = [(kk, v) for kk, v in lines if kk != k]
    return out


def unit_name(cfg):
    return "gnucost" + re.sub(r"[^A-Za-z0-9]", "_", cfg) + ".service"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quota", type=float, default=6.0)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--unit", default=UNIT)
    ap.add_argument("--name", default="ucost")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("unit_cost: needs root (containers)", file=sys.stderr)
        return 77
    cfgs = configs(setup_lines(a.unit))
    fl = fleet.Fleet(a.name)

    def sh(cmd):
        r = fl.run(0, ["sh", "-c", cmd], check=False, limited=False)
        if r.returncode:
            raise fleet.FleetError(f"`{cmd[:60]}`: {r.stderr.strip()}")
        return r.stdout

    ns = types.SimpleNamespace(
        devices=fleet.parse_spec("amd64"), rate=None, burst=None,
        queue_latency=0.05, rtt=0.0, loss=0.0, jitter=0.0, loss_burst=0.0,
        seed=1, subnet="10.82.0", delayer=None)
    res = {c: [] for c in cfgs}
    try:
        fl.up(ns)
        # the unit's credential, as the package would install it
        sh(f"useradd -r -M {USER} && mkdir -p /etc/{USER} && "
           f"echo key > /etc/{USER}/node.key")
        for c, lines in cfgs.items():
            text = ("[Service]\nType=oneshot\n"
                    "ExecStart=/usr/bin/date +%%s.%%N\n"
                    + "".join(f"{k}={v}\n" for k, v in lines))
            sh(f"cat > /run/systemd/system/{unit_name(c)} <<'EOF'\n"
               f"{text}EOF\n")
        sh("systemctl daemon-reload")
        fl.quota(0, a.quota)
        for r in range(a.runs):
            order = list(cfgs)
            random.shuffle(order)
            for c in order:
                time.sleep(0.5)
                t0 = time.time()
                sh(f"systemctl start --no-block {unit_name(c)}")
                got = None
                while got is None and time.time() - t0 < WAIT_S:
                    time.sleep(0.1)
                    out = sh(f"journalctl -q -o cat -u {unit_name(c)} "
                             f"--since=@{int(t0) - 1}")
                    stamps = [float(x) for x in out.split()
                              if STAMP.match(x) and float(x) >= t0]
                    got = stamps[0] - t0 if stamps else None
                if got is None:
                    raise fleet.FleetError(f"{c}: no start in {WAIT_S} s")
                res[c].append(got)
            print(f"unit_cost: round {r + 1} of {a.runs} done", flush=True)
    except fleet.FleetError as e:
        print(f"unit_cost: {e}", file=sys.stderr)
        return 1
    finally:
        fl.down(quiet=True)
    print(f"unit_cost: start -> exec at {a.quota:g} % of a core, "
          f"{a.runs} runs (s)")
    for c, v in sorted(res.items(), key=lambda kv: statistics.median(kv[1])):
        print(f"  {c:28s} median {statistics.median(v):.3f}   "
              + " ".join(f"{x:.2f}" for x in v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
