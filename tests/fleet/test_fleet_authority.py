#!/usr/bin/python3
"""test_fleet_authority.py - docs/operations.md's "Adding a device with
the authority" executed on the fleet lab (tests/fleet/fleet), and issue
33's target timed: adding a device touches only that device, from
`systemctl start` on it to `alive` on every member within 3 probe
periods, training within 30 s.

  test_fleet_authority.py --deb AMD64_DEB [--devices N] [--quota PCT]
                          [--name L] [--keep]

Who makes what. The authority is made on the host, the machine that
keeps it off the devices (`gossip-keygen --ca`, the package's own tool,
unpacked from --deb into a temporary directory). Every device's secret key
is the one the package's postinst made on the device
(/etc/gossipnode/node.key, which the unit loads as its credential): only
its public half leaves the device, the host signs a certificate for it
(`gossip-keygen --sign --pub ... --name ... --addr ...`), and the
certificate goes back with the authority's public key, as the guide's
doctrine has it (secrets are made where they are used).

The devices (amd64, Debian 12 booted with systemd, the package installed
with apt, the unit as shipped):
  - pi-01 .. pi-(N/2): a plain peers file listing them, and the authority
    with their certificates (a peers-file device that certificate-only
    devices should know needs a certificate: operations.md);
  - the other N/2 of the first N: certificate only (authority, cert,
    seed-addr pi-01, their listen address), so that the two kinds mix;
  - pi-(N+1), the newcomer, started once the N train: given only its
    certificate, the authority's public key and one seed address (and its
    listen address and the training settings the others have, as in
    operations.md step 3); its key is the one the package made on it;
  - pi-x, whose certificate another authority signed (and who trusts
    that one), started last.

Checks, each printed as `fleet-authority: ok|FAIL ...`, and a closing
`N passed, N failed` line: the N train with each other (every one alive
in every view, every one averaged slices); the newcomer's
`--check-config` accepts its certificate; the newcomer becomes `alive` in
every other device's `gossipctl members` and trains (it averaged slices,
its step advanced, others took its slices), within generous bounds
(T_JOIN, T_TRAIN: this host is shared); nothing on the N changed (config
files' digests, the daemon's PID and start time, no restart, no reload);
pi-x is never a member anywhere and pi-01 counts it (`gossipctl stats`
certs wrong_authority); after the teardown nothing of the fleet is left.

Measured, printed as `fleet-authority: result {json}`: from the moment
the test runs `systemctl start` on the newcomer to `alive` on every
other device, by polling `gossipctl members` (an upper bound: the poll's
return) and by each member's event log (the `member` event's t_ms: the
devices share the host's clock), also in probe periods (PROBE_PERIOD_S);
from the newcomer's first sight of the cluster (its first `member`
event: it was admitted) to alive everywhere; to READY; to its first
averaged slice (`gossipnode_params_averaged_total` > 0, polled). And where
the time before the join goes: to the daemon's first journal line (it
comes once the sockets are open; the data set loads after the join since
issue 33's "join first", before it until then), the BLIS kernel probe a
fresh device runs once (after the join too), the newcomer's CPU share
over the join (its quota is the ceiling) and the host's load average at
the start.

CPU: every device is held to --quota % of a core once started. The
default keeps the whole fleet (N + 2 devices) under FLEET_BUDGET % of a
core on this 2-core host: 25 % (the guide's) while that fits, else the
Pi 4 class of docs/benchmarks.md "Fleet lab" (6 %: 16 + 2 devices take
1.08 cores). The target is about membership and join latency, not
training speed; a device at 6 % also loads its data set at a Pi's pace,
which is in `start -> first averaged slice` (and was in `start -> alive`
before the node joined first).

Exit status: 0 all checks passed, 1 a check failed, 77 this host cannot
run the lab (not root, no systemd-nspawn, no namespaces).
"""
import argparse
import hashlib
import importlib.machinery
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
guide = importlib.machinery.SourceFileLoader(
    "guide", os.path.join(HERE, "test_fleet_guide.py")).load_module()
fleet = guide.fleet

TAG = "fleet-authority"
SUBNET = "10.79.0"     # the guide's is 10.78.0, facts.py's 10.80.0
# gossip_tunables_default() (gossip/swim.c): one probe per member per
# second; the node has no option to change it. Lifeguard stretches it up
# to 8x on a node that misses its own deadlines (awareness).
PROBE_PERIOD_S = 1.0
TARGET_ALIVE_PERIODS = 3   # issue 33: start -> alive everywhere
TARGET_TRAIN_S = 30        # issue 33: start -> training
# Bounds of the checks: generous, the host is shared and a device at the
# Pi 4 class loads its data set in seconds before it trains.
T_READY = 300          # the first N: enable --now -> active (READY)
T_ALIVE = 180          # the first N alive in every view
T_JOIN = 120           # newcomer: start -> alive on every other device
T_TRAIN = 180          # newcomer: start -> averaged and taken
T_REFUSE = 120         # pi-x: start -> counted at its seed
FLEET_BUDGET = 160.0   # % of a core all devices together may take
GUIDE_QUOTA = 25.0
PI4_QUOTA = 6.0        # docs/benchmarks.md "Fleet lab"
EVENTS = "/var/lib/gossipnode/events.jsonl"
ETC = "/etc/gossipnode"


def say(msg):
    print(f"{TAG}: {msg}", flush=True)


def default_quota(total):
    return GUIDE_QUOTA if total * GUIDE_QUOTA <= FLEET_BUDGET else PI4_QUOTA


class Authority:
    """The authority's machine: the host, with the package's gossip-keygen
    unpacked into a temporary directory; ca.key never leaves it."""

    def __init__(self, deb, tmp):
        self.tmp = tmp
        root = os.path.join(tmp, "pkg")
        fleet.sh(["dpkg-deb", "-x", deb, root])
        self.keygen = os.path.join(root, "usr/bin/gossip-keygen")

    def run(self, *args):
        return fleet.sh([self.keygen] + list(args), cwd=self.tmp).stdout

    def make(self, name):
        """A new authority NAME.key (0600) and NAME.pub; the .pub path."""
        self.run("--ca", "--out", f"{name}.key")
        return os.path.join(self.tmp, f"{name}.pub")

    def sign(self, ca, pub, name, addr):
        """A certificate for public key pub (base64) signed by authority
        ca; its path on the host."""
        out = os.path.join(self.tmp, f"{name}.cert")
        self.run("--sign", "--ca-key", f"{ca}.key", "--pub", pub, "--name",
                 name, "--addr", addr, "--days", "30", "--out", out)
        return out


class Test:
    def __init__(self, a, chk):
        self.a, self.chk = a, chk
        n = a.devices
        self.n = n
        self.new = n          # the newcomer's index
        self.rogue = n + 1    # pi-x
        ga = argparse.Namespace(name=a.name, deb_arm64=None)
        self.g = guide.Guide(ga, chk)
        self.g.n = n + 2
        self.g.boards = [f"pi-{i + 1:02d}" for i in range(n + 1)] + ["pi-x"]
        self.names = self.g.boards
        self.first = list(range(n))
        self.listed = list(range((n + 1) // 2))   # peers file + cert
        self.result = {"devices": n, "quota_pct": a.quota}

    # --- helpers ---------------------------------------------------------
    def sh(self, i, cmd, **kw):
        return self.g.sh(i, cmd, **kw)

    def events(self, i):
        out = self.sh(i, f"cat {EVENTS}", check=False)
        evs = []
        for ln in out.splitlines(keepends=True):
            if ln.endswith("\n"):
                try:
                    evs.append(json.loads(ln))
                except ValueError:
                    pass
        return evs

    def first_event(self, i, since, **want):
        """t (s, wall clock) of device i's first event at or after since
        with every key of want; None if none."""
        for e in self.events(i):
            if e.get("t_ms", 0) >= since * 1000 and all(
                    e.get(k) == v for k, v in want.items()):
                return e["t_ms"] / 1000
        return None

    def wall(self, i, prop):
        """A systemd monotonic timestamp property of device i's unit as
        wall-clock seconds (the devices share the host's clocks)."""
        try:
            us = int(self.g.prop(i, prop))
        except ValueError:
            return None
        return us / 1e6 + (time.time() - time.monotonic()) if us else None

    def certs(self, i):
        return (self.g.stats(i).get("node") or {}).get("certs") or {}

    def unknown_key(self, i):
        return ((self.g.stats(i).get("node") or {}).get("rejects")
                or {}).get("unknown_key", 0)

    def fingerprint(self, i):
        """What must not change on a device the newcomer does not touch:
        its config files, the daemon's PID and start, restarts, reloads."""
        files = self.sh(i, f"sha256sum {ETC}/* | sort -k2", check=False)
        return {
            "files": hashlib.sha256(files.encode()).hexdigest()[:16],
            "nfiles": len(files.splitlines()),
            "pid": self.g.main_pid(i),
            "started": self.g.prop(i, "ExecMainStartTimestampMonotonic"),
            "restarts": self.g.prop(i, "NRestarts"),
            "reloads": len(re.findall(r"peers reloaded|Reloading",
                                      self.g.journal(i, ""))),
        }

    # --- the run ---------------------------------------------------------
    def run(self, tmp):
        a, chk, g = self.a, self.chk, self.g
        total = self.n + 2
        say(f"booting {total} devices: {self.n} + the newcomer + pi-x, "
            f"each held to {a.quota:g} % of a core once started "
            f"({total * a.quota / 100:.2f} cores in all)")
        ns = argparse.Namespace(
            devices=fleet.parse_spec(f"amd64*{total}"), rate=None,
            burst=None, queue_latency=0.05, rtt=0.0, loss=0.0, seed=1,
            subnet=SUBNET, delayer=None)
        t0 = time.monotonic()
        st = g.fl.up(ns)
        boots = [d["boot_s"] for d in st["devices"]]
        failed = g.all(lambda i: self.sh(
            i, "systemctl --failed --plain --no-legend | awk '{print $1}'",
            check=False).split())
        chk.ok(not any(failed), f"{total} devices booted, no failed unit",
               f"boot {min(boots)}-{max(boots)} s; "
               + (" ".join(sum(failed, [])) or "none failed"))
        self.install()
        self.credentials(tmp)
        self.configure()
        self.start_first()
        self.add_newcomer()
        self.refuse_rogue()
        self.untouched()
        say(f"done in {time.monotonic() - t0:.0f} s")
        say("result " + json.dumps(self.result, sort_keys=True))

    def install(self):
        deb = self.a.deb
        name = os.path.basename(deb)

        def install(i):
            self.g.fl.put(i, deb, f"/root/{name}")
            self.sh(i, f"cd /root && apt install -y ./{name}", timeout=900)
            return self.sh(i, f"test -s {ETC}/node.key && echo key",
                           check=False).strip()
        got = self.g.all(install)
        self.chk.ok(all(k == "key" for k in got),
                    "the package installed everywhere, each device made "
                    f"its own {ETC}/node.key")

    def credentials(self, tmp):
        """The authority on the host; each device's public key out, its
        certificate and the authority's public key in."""
        auth = Authority(self.a.deb, tmp)
        ca_pub = auth.make("ca")
        other_pub = auth.make("other")
        self.keys = self.g.all(lambda i: self.sh(
            i, f"gossip-keygen --show {ETC}/node.key").split()[1])
        for i in range(self.n + 2):
            rogue = i == self.rogue
            cert = auth.sign("other" if rogue else "ca", self.keys[i],
                             self.names[i], self.g.addr(i))
            self.g.fl.put(i, cert, f"{ETC}/{self.names[i]}.cert", 0o644)
            self.g.fl.put(i, other_pub if rogue else ca_pub,
                          f"{ETC}/ca.pub", 0o644)
        shown = self.sh(self.new, f"gossip-keygen --show-cert "
                        f"{ETC}/{self.names[self.new]}.cert --ca-pub "
                        f"{ETC}/ca.pub", check=False)
        self.chk.ok(re.search(r"verdict\s+ok", shown) is not None,
                    "certificates signed on the host from the devices' "
                    "public keys; the newcomer's verifies on it",
                    " ".join(shown.split())[-160:])

    def conf(self, i):
        """The config file of device i (the guide's step 4 but the
        peers file, plus the authority's lines)."""
        n, name = self.n, self.names[i]
        shard = f"{i}/{n}" if i < n else (f"{n}/{n + 1}" if i == self.new
                                          else "0/1")
        lines = []
        if i in self.listed:
            lines += [f"peers = {ETC}/peers.txt",
                      f"listen = 0.0.0.0:{guide.PORT}"]
        else:  # certificate only: operations.md step 3
            lines += [f"seed-addr = {self.g.addr(0)}",
                      f"listen = {self.g.addr(i)}"]
        lines += [f"authority = {ETC}/ca.pub", f"cert = {ETC}/{name}.cert",
                  f"shard = {shard}",
                  # they train throughout; the test stops them
                  "steps = 1000000", "eval-every = 500",
                  "metrics = 127.0.0.1:7956", f"event-log = {EVENTS}"]
        return "\n".join(lines) + "\n"

    def configure(self):
        peers = "\n".join(f"{self.g.addr(i)} {self.keys[i]} {self.names[i]}"
                          for i in self.listed) + "\n"
        for i in range(self.n + 2):
            if i in self.listed:
                self.sh(i, f"cat > {ETC}/peers.txt", input=peers)
            self.sh(i, f"cat > {ETC}/gossipnode.conf", input=self.conf(i))
        say(f"{self.names[0]}'s config:\n" + self.conf(0).rstrip())
        say(f"{self.names[self.n - 1]}'s config:\n"
            + self.conf(self.n - 1).rstrip())
        for i in range(self.n + 2):
            self.g.fl.quota(i, self.a.quota)

    def start_first(self):
        g, first = self.g, self.first
        t = time.monotonic()
        g.all(lambda i: self.sh(i, "systemctl enable --now gossipnode",
                                timeout=T_READY), first)
        say(f"the first {self.n} active (READY) in "
            f"{time.monotonic() - t:.0f} s")
        names = [self.names[i] for i in first]
        ok = guide.wait_for(lambda: g.alive_everywhere(names, first),
                            T_ALIVE, 2)
        self.chk.ok(bool(ok), f"the first {self.n} (half by peers file, "
                    "half by certificate only) alive in every view",
                    f"{time.monotonic() - t:.0f} s after the start")
        ok = guide.wait_for(lambda: all(
            v > 0 for v in g.all(g.averaged, first)), T_ALIVE, 2)
        self.chk.ok(bool(ok), f"the first {self.n} average with each other",
                    "params_averaged " + str(g.all(g.averaged, first)))
        self.before = g.all(self.fingerprint, first)

    def add_newcomer(self):
        g, k, name = self.g, self.new, self.names[self.new]
        others = self.first
        r = g.fl.run(k, ["gossipnode", "--config", f"{ETC}/gossipnode.conf",
                         "--key", f"{ETC}/node.key", "--check-config"],
                     check=False, timeout=300)
        self.chk.ok(r.returncode == 0, f"{name}: `gossipnode --check-config`"
                    " accepts its certificate",
                    (r.stdout + r.stderr).strip()[-200:])
        say(f"{name}'s config, all it was given but its key:\n"
            + self.conf(k).rstrip())
        cpu0, load0 = g.fl.cpu_seconds(k), os.getloadavg()[0]
        t0, t0m = time.time(), time.monotonic()
        self.sh(k, "systemctl start --no-block gossipnode")
        seen = {}        # other -> wall time of the poll that saw it alive
        while len(seen) < len(others) and time.time() - t0 < T_JOIN:
            left = [j for j in others if j not in seen]
            states = g.all(lambda j: g.members(j).get(name, {})
                           .get("state"), left)
            now = time.time()
            for j, s in zip(left, states):
                if s == "alive":
                    seen[j] = now
            time.sleep(0.3)
        alive_poll = max(seen.values()) - t0 if seen else None
        cpu1 = g.fl.cpu_seconds(k)
        self.chk.ok(len(seen) == len(others),
                    f"{name} (certificate only) alive in every other "
                    f"device's `gossipctl members`",
                    f"{len(seen)} of {len(others)}, last after "
                    f"{alive_poll and round(alive_poll, 1)} s")
        # training: its first averaged slice, then others taking its own
        t_avg = None
        while time.time() - t0 < T_TRAIN:
            if g.averaged(k) > 0:
                t_avg = time.time()
                break
            time.sleep(0.5)
        step0 = g.step(k)
        taken = guide.wait_for(lambda: [j for j in others
                                        if g.taken_from(j, name) > 0],
                               max(10, T_TRAIN - (time.time() - t0)), 2)
        time.sleep(5)
        step1 = g.step(k)
        took = [j for j in others if g.taken_from(j, name) > 0]
        self.chk.ok(t_avg is not None and bool(taken) and step1 > step0,
                    f"{name} trains: it averaged the others' slices, its "
                    "step advances, others took its slices",
                    f"first averaged slice {t_avg and round(t_avg - t0, 1)}"
                    f" s after the start; step {step0} -> {step1} in 5 s; "
                    f"{len(took)} of {len(others)} took its slices")
        st = g.active_running(k)
        self.chk.ok("active (running)" in st, f"{name}: active (running)")
        # exact times from the event logs (wall clock, shared)
        ev = {j: self.first_event(j, t0 - 1, ev="member", peer=name,
                                  state="alive") for j in others}
        admitted = self.first_event(k, t0 - 1, ev="member", state="alive")
        ready = self.wall(k, "ActiveEnterTimestampMonotonic")
        execd = self.wall(k, "ExecMainStartTimestampMonotonic")
        alive_ev = (max(ev.values()) - t0 if all(ev.values()) else None)
        rnd = (lambda v: None if v is None else round(v, 2))
        res = {
            "start_to_exec_s": rnd(execd and execd - t0),
            "start_to_admitted_s": rnd(admitted and admitted - t0),
            "start_to_alive_all_poll_s": rnd(alive_poll),
            "start_to_alive_all_events_s": rnd(alive_ev),
            "admitted_to_alive_all_s": rnd(alive_ev and admitted and
                                           max(ev.values()) - admitted),
            "start_to_ready_s": rnd(ready and ready - t0),
            "start_to_first_average_s": rnd(t_avg and t_avg - t0),
            "others_took_its_slices": len(took),
            "alive_events_median_s": rnd(statistics.median(
                v - t0 for v in ev.values()) if all(ev.values()) else None),
            # where the time before the join goes: the node's first line
            # comes once its sockets are open (and, before issue 33's
            # "join first", its data set loaded); a fresh device measures
            # BLIS's kernels once (cached after), now after the join
            "start_to_first_log_s": rnd(self.first_log(k, t0m)),
            "kernel_probe_s": rnd(self.kernel_probe(k)),
            # the newcomer's CPU share until it was alive everywhere (%
            # of a core, its quota the ceiling) and the host's load then
            "cpu_pct_until_alive": rnd(alive_poll and 100 * (cpu1 - cpu0)
                                       / alive_poll),
            "host_load1": rnd(load0),
        }
        self.result.update(res)
        say(f"{name}: " + ", ".join(f"{k} {v}" for k, v in res.items()))
        a = res["start_to_alive_all_events_s"]
        if a is not None:
            periods = a / PROBE_PERIOD_S
            self.result["start_to_alive_all_periods"] = round(periods, 1)
            say(f"start -> alive on every member: {a} s = {periods:.1f} "
                f"probe periods (target {TARGET_ALIVE_PERIODS}: "
                f"{'met' if periods <= TARGET_ALIVE_PERIODS else 'NOT met'})"
                f"; admitted -> alive everywhere "
                f"{res['admitted_to_alive_all_s']} s")
        if t_avg is not None:
            say(f"start -> first averaged slice: {t_avg - t0:.1f} s "
                f"(target {TARGET_TRAIN_S} s: "
                f"{'met' if t_avg - t0 <= TARGET_TRAIN_S else 'NOT met'})")

    def first_log(self, i, t0m):
        """Seconds from t0m (host monotonic) to the daemon's first journal
        line on device i (journal monotonic stamps: the same clock)."""
        for ln in self.g.journal(i, "-o short-monotonic").splitlines():
            m = re.match(r"\[\s*([0-9.]+)\]\s+\S+\s+gossipnode\[", ln)
            if m and float(m.group(1)) >= t0m:
                return float(m.group(1)) - t0m
        return None

    def kernel_probe(self, i):
        m = re.search(r"probed in ([0-9.]+) s", self.g.journal(i, "-o cat"))
        return float(m.group(1)) if m else None

    def refuse_rogue(self):
        g, x, name = self.g, self.rogue, self.names[self.rogue]
        seed = 0
        before = self.certs(seed).get("wrong_authority", 0)
        uk = self.unknown_key(seed)
        t0 = time.time()
        self.sh(x, "systemctl start --no-block gossipnode")
        counted = guide.wait_for(
            lambda: self.certs(seed).get("wrong_authority", 0) > before,
            T_REFUSE, 1)
        took = time.time() - t0
        # then as long again as a certificate would need to spread (a
        # sync period, 5 s, and 3 probe periods) before looking for it
        time.sleep(5 + 3 * PROBE_PERIOD_S)
        after = self.certs(seed)
        key = self.keys[x]
        members = g.all(lambda j: [m.get("name") for m in
                                   g.ctl(j, "members", [])
                                   if isinstance(m, dict) and
                                   (m.get("key") == key or
                                    m.get("name") == name)],
                        range(self.n + 1))
        evs = [j for j in range(self.n + 1) if self.first_event(
            j, t0 - 1, ev="member", peer=name) is not None]
        self.chk.ok(bool(counted) and not any(members) and not evs,
                    f"{name} (another authority's certificate) is never a "
                    f"member; {self.names[seed]} counts it",
                    f"certs {after} (wrong_authority {before} -> "
                    f"{after.get('wrong_authority', 0)} in {took:.1f} s), "
                    f"rejects unknown_key {uk} -> "
                    f"{self.unknown_key(seed)}; listed by "
                    f"{[self.names[j] for j in range(self.n + 1) if members[j]]}"
                    f", member events at {[self.names[j] for j in evs]}")
        # what the refused device itself says (its warnings, its last line)
        say(f"{name}'s journal: " + " / ".join(
            (self.g.journal(x, "-p warning -o cat").strip().splitlines()
             + self.g.journal(x, "-n 1 -o cat").strip().splitlines())[-6:]))

    def untouched(self):
        after = self.g.all(self.fingerprint, self.first)
        changed = [f"{self.names[i]}: {self.before[i]} -> {after[i]}"
                   for i in self.first if after[i] != self.before[i]]
        self.chk.ok(not changed, f"nothing changed on the first {self.n}: "
                    "config files, daemon PID and start, no restart, no "
                    "reload", "; ".join(changed) or
                    f"{self.before[0]['nfiles']} files each")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deb", required=True)
    ap.add_argument("--devices", type=int, default=4,
                    help="devices before the newcomer (default 4: CI; 16 "
                    "for the measurement)")
    ap.add_argument("--quota", type=float, default=None,
                    help="%% of a core for each device once started "
                    "(default: 25 if the fleet stays under "
                    f"{FLEET_BUDGET:g} %% of a core, else {PI4_QUOTA:g})")
    ap.add_argument("--name", default="fauth")
    ap.add_argument("--keep", action="store_true",
                    help="leave the fleet up (fleet down --name NAME)")
    a = ap.parse_args()
    if not 2 <= a.devices <= 60:
        ap.error("--devices: 2..60")
    if a.quota is None:
        a.quota = default_quota(a.devices + 2)
    why = guide.can_run()
    if why:
        print(f"SKIP: fleet lab: {why}")
        return 77
    if not os.path.isfile(a.deb):
        print(f"{TAG}: no such package {a.deb}", file=sys.stderr)
        return 1
    a.deb = os.path.abspath(a.deb)
    fleet.rootfs_add_deps("amd64", a.deb)
    chk = guide.Checks(TAG)
    t = Test(a, chk)
    with tempfile.TemporaryDirectory(prefix="gn-fauth-") as tmp:
        try:
            t.run(tmp)
        except (fleet.FleetError, subprocess.TimeoutExpired) as e:
            chk.ok(False, f"the test stopped: {e}")
        finally:
            if not a.keep:
                try:
                    t.g.fl.down(quiet=True)
                except fleet.FleetError as e:
                    chk.ok(False, f"teardown: {e}")
                left = guide.leftovers(a.name)
                chk.ok(not left, "teardown: nothing left (ip netns, "
                       "mounts, cgroups, nspawn processes, tbf qdiscs)",
                       "; ".join(left))
    print(f"{chk.passed} passed, {chk.failed} failed")
    return 0 if chk.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
