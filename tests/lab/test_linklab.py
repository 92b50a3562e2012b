#!/usr/bin/python3
"""test_linklab.py - the link lab keeps its promises (tests/lab/linklab).

  1. 10 Mbit/s, 40 ms RTT, two hosts: one TCP flow's steady goodput is
     within 20% of the cap (8..12 Mbit/s); the RTT (ping -U, and the TCP
     connect time) is within 25% of 40 ms (30..50 ms).
  2. Same link with 1% loss: of 2000 paced UDP datagrams (4 Mbit/s, under
     the cap, so tbf drops none) 0.5..2% are lost, silently (no sendto
     error). The loss pattern is seeded: GN_SEED (default 1) replays it;
     with seed 1 the count is fixed, and a broken delayer (no loss, all
     loss, loss per burst) cannot land in the band.
  3. The Wi-Fi-like link (--jitter 4ms --loss 1% --loss-burst 3, the
     fleet bench's `wifi`): ping -U's round trip is never under the 40 ms
     base, its mean is 40 + 2 x 4 ms and its deviation that of two
     exponentials of mean 4 ms (sqrt(2) x 4 = 5.7 ms), each within a
     band; of 3000 paced datagrams 0.3..2.5% are lost, in runs of 1.8 or
     more on average (independent losses give ~1.0), none reordered.
  4. --tcp-cc: with `reno` (always there, always allowed, so the host's
     list is not touched) every host's TCP congestion control is reno;
     a name the host has not fails `up` with a message that names what
     it has, and leaves nothing.
  5. Nothing is left behind: after `down`; after `up` failing half-way
     (GN_LAB_FAIL_AT=rule:1); after SIGTERM to `run` while its commands
     run; and after SIGKILL of `run` followed by `down`. "Nothing" = no
     namespace of the lab, no /run/gnlab entry, none of its delayers or
     commands alive, no lab interface or NFQUEUE rule in the root
     namespace.
Needs root and network namespaces: exits 77 with a message otherwise.
Usage: test_linklab.py PATH/TO/lab_delay
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LINKLAB = os.path.join(HERE, "linklab")
PROBE = os.path.join(HERE, "lab_probe.py")
PY = "/usr/bin/python3"
NAME = f"t{os.getpid() % 100000}"
CAP_BPS, RTT_S = 10e6, 0.040
failures = []
BASELINE = set()  # lab_delay processes running before the test


def check(ok, what):
    what = " | ".join(what.splitlines())
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def preflight():
    if os.geteuid() != 0:
        skip("the link lab needs root (network namespaces)")
    for t in ("ip", "tc", "iptables"):
        if shutil.which(t) is None:
            skip(f"{t} not installed")
    probe = f"gnl-probe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True,
                       text=True)
    if r.returncode != 0:
        skip(f"no network namespaces here: {r.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", probe])


def lab(*args, env=None, **kw):
    return subprocess.run([PY, LINKLAB] + list(args), capture_output=True,
                          text=True, env=env, **kw)


def lab_up(*opts):
    r = lab("up", "--name", NAME, "--nodes", "2", *opts)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        raise SystemExit("FAIL: linklab up: " + r.stderr.strip())
    with open(f"/run/gnlab/{NAME}/state.json") as f:
        return json.load(f)


def in_lab(i, *cmd, **kw):
    return [PY, LINKLAB, "exec", "--name", NAME, str(i)] + list(cmd)


def pids_alive(pids):
    alive = []
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(p)
        except OSError:
            pass
    return alive


def delayer_pids():
    """Every running lab_delay of this build (namespace or not)."""
    exe = os.environ["GN_LAB_DELAYER"].encode()
    out = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0] == exe:
                    out.append(int(d))
        except (OSError, ValueError):
            pass
    return pids_alive(out)


def leftovers(pids):
    """What of lab NAME still exists (empty list: nothing): pids are the
    lab's processes known to the caller; any lab_delay of this build not
    running when the test started counts too."""
    left = []
    pids = set(pids) | (set(delayer_pids()) - BASELINE)
    out = subprocess.run(["ip", "netns", "list"], capture_output=True,
                         text=True).stdout
    left += [ln.split()[0] for ln in out.splitlines()
             if ln.startswith(f"gnl-{NAME}-")]
    if os.path.exists(f"/run/gnlab/{NAME}"):
        left.append(f"/run/gnlab/{NAME}")
    left += [f"pid {p}" for p in pids_alive(sorted(pids))]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True,
                           text=True).stdout
    left += [f"root link {m}" for m in re.findall(
        r"^\d+: ((?:lab0|br0|p\d+)[@:])", links, re.M)]
    rules = subprocess.run(["iptables", "-w", "-S"], capture_output=True,
                           text=True).stdout
    left += [f"root rule {ln}" for ln in rules.splitlines()
             if "NFQUEUE" in ln]
    return left


def wait_listening(p):
    line = p.stderr.readline()
    if "listening" not in line:
        raise SystemExit(f"FAIL: probe receiver did not start: {line}")


def rate_and_rtt():
    st = lab_up("--rate", "10mbit", "--rtt", "40ms")
    pids = list(st["delayers"].values())
    dst = st["addrs"][1]
    if shutil.which("ping"):
        r = subprocess.run(in_lab(0, "ping", "-U", "-q", "-c", "10", "-i",
                                  "0.2", dst), capture_output=True, text=True)
        m = re.search(r"= [\d.]+/([\d.]+)/", r.stdout)
        avg = float(m.group(1)) / 1e3 if m else None
        check(avg is not None and 0.75 * RTT_S <= avg <= 1.25 * RTT_S,
              f"ping -U average RTT {avg} s within 25% of {RTT_S} s")
    else:
        print("note: ping not installed; RTT from TCP connect time only")
    recv = subprocess.Popen(in_lab(1, PY, PROBE, "tcp-recv", "--port", "5001",
                                   "--skip", "1", "--connects", "5"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_listening(recv)
    send = subprocess.run(in_lab(0, PY, PROBE, "tcp-send", "--to",
                                 f"{dst}:5001", "--seconds", "5", "--connects", "5"),
                          capture_output=True, text=True, timeout=60)
    rx = json.loads(recv.communicate(timeout=60)[0])
    tx = json.loads(send.stdout)
    gp = rx["goodput_bps"]
    check(gp is not None and 0.8 * CAP_BPS <= gp <= 1.2 * CAP_BPS,
          f"TCP goodput {gp and gp / 1e6:.2f} Mbit/s within 20% of 10")
    c = tx["connect_s"]
    check(0.75 * RTT_S <= c <= 1.25 * RTT_S,
          f"TCP connect time {c:.4f} s (median of 5) within 25% of {RTT_S} s")
    r = lab("down", "--name", NAME)
    check(r.returncode == 0, f"down exits 0 ({r.stderr.strip()})")
    left = leftovers(pids)
    check(not left, f"nothing left after down: {left}")


def loss(seed):
    st = lab_up("--rate", "10mbit", "--rtt", "40ms", "--loss", "1%",
                "--seed", str(seed))
    pids = list(st["delayers"].values())
    recv = subprocess.Popen(in_lab(1, PY, PROBE, "udp-recv", "--port", "5002",
                                   "--count", "2000"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_listening(recv)
    send = subprocess.run(in_lab(0, PY, PROBE, "udp-send", "--to",
                                 f"{st['addrs'][1]}:5002", "--count", "2000",
                                 "--size", "500", "--interval-us", "1000"),
                          capture_output=True, text=True, timeout=60)
    rx = json.loads(recv.communicate(timeout=60)[0])
    tx = json.loads(send.stdout)
    share = rx["lost"] / rx["count"]
    check(0.005 <= share <= 0.02,
          f"UDP burst: {rx['lost']} of 2000 lost ({share:.2%}), "
          f"within 0.5..2% (seed {seed})")
    check(tx["send_errors"] == 0,
          f"loss is silent: {tx['send_errors']} sendto errors")
    r = lab("down", "--name", NAME)
    print("  " + r.stderr.strip().replace("\n", "\n  "))
    check(not leftovers(pids), "nothing left after down (loss lab)")


def wifi(seed):
    st = lab_up("--rate", "10mbit", "--rtt", "40ms", "--jitter", "4ms",
                "--loss", "1%", "--loss-burst", "3", "--seed", str(seed))
    pids = list(st["delayers"].values())
    dst = st["addrs"][1]
    if shutil.which("ping"):
        # 200 probes 20 ms apart: a probe rarely waits behind another, so
        # each way adds one exponential of mean 4 ms
        r = subprocess.run(in_lab(0, "ping", "-U", "-q", "-c", "200", "-i",
                                  "0.02", dst), capture_output=True, text=True)
        m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+)", r.stdout)
        mn, avg, _, mdev = (float(x) for x in m.groups()) if m else [None] * 4
        check(m is not None and mn >= 39.5,
              f"wifi: ping -U minimum RTT {mn} ms not under the 40 ms base")
        check(m is not None and 44 <= avg <= 53,
              f"wifi: ping -U mean RTT {avg} ms within 44..53 (40 + 8)")
        check(m is not None and 3.5 <= mdev <= 9,
              f"wifi: ping -U deviation {mdev} ms within 3.5..9 (5.7)")
    recv = subprocess.Popen(in_lab(1, PY, PROBE, "udp-recv", "--port", "5003",
                                   "--count", "3000"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_listening(recv)
    subprocess.run(in_lab(0, PY, PROBE, "udp-send", "--to",
                          f"{dst}:5003", "--count", "3000", "--size", "500",
                          "--interval-us", "1000"),
                   capture_output=True, text=True, timeout=60)
    rx = json.loads(recv.communicate(timeout=60)[0])
    share = rx["lost"] / rx["count"]
    burst = rx["lost"] / rx["lost_runs"] if rx["lost_runs"] else 0
    check(0.003 <= share <= 0.025,
          f"wifi: {rx['lost']} of 3000 datagrams lost ({share:.2%}), within "
          f"0.3..2.5% (seed {seed})")
    check(burst >= 1.8, f"wifi: lost in {rx['lost_runs']} runs, "
          f"{burst:.2f} datagrams each on average (>= 1.8)")
    check(rx["reordered"] == 0,
          f"wifi: jitter keeps the order: {rx['reordered']} reordered")
    r = lab("down", "--name", NAME)
    print("  " + r.stderr.strip().replace("\n", "\n  "))
    check(not leftovers(pids), "nothing left after down (wifi lab)")


def tcp_cc():
    lab_up("--tcp-cc", "reno")
    got = [subprocess.run(in_lab(i, "cat", "/proc/sys/net/ipv4/"
                                 "tcp_congestion_control"),
                          capture_output=True, text=True).stdout.strip()
           for i in (0, 1)]
    check(got == ["reno", "reno"], f"--tcp-cc reno: the hosts run {got}")
    lab("down", "--name", NAME)
    r = lab("up", "--name", NAME, "--nodes", "2", "--tcp-cc", "nosuchcc")
    check(r.returncode == 1 and "nosuchcc" in r.stderr and "reno" in
          r.stderr, f"--tcp-cc nosuchcc refused ({r.stderr.strip()})")
    left = leftovers([])
    check(not left, f"nothing left after a refused --tcp-cc: {left}")


def failed_up():
    env = dict(os.environ, GN_LAB_FAIL_AT="rule:1")
    r = lab("up", "--name", NAME, "--nodes", "2", "--rate", "10mbit",
            "--rtt", "40ms", env=env)
    check(r.returncode == 1 and "simulated failure" in r.stderr,
          f"up with GN_LAB_FAIL_AT=rule:1 fails ({r.stderr.strip()})")
    left = leftovers([])
    check(not left, f"nothing left after a failed up: {left}")


def pids_of_delayers():
    """lab_delay processes running for lab NAME (by their namespace)."""
    out = []
    for ns in (f"gnl-{NAME}-0", f"gnl-{NAME}-1"):
        r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                           text=True)
        out += [int(x) for x in r.stdout.split() if x.isdigit()]
    return out


def run_interrupted(sig, tmp):
    """`run` with a long command in each host; sig to run once every
    command is up. SIGTERM: run cleans up itself. SIGKILL: `down` must."""
    marks = os.path.join(tmp, f"mark{sig}")
    os.makedirs(marks)
    cmd = ["sh", "-c", f'touch {marks}/$LAB_NODE; exec sleep 60']
    # output to a file: the commands inherit it and outlive a SIGKILLed
    # run, so a pipe would not see its end
    errf = open(os.path.join(tmp, f"run{sig}.err"), "w+")
    p = subprocess.Popen([PY, LINKLAB, "run", "--name", NAME, "--nodes", "2",
                          "--rate", "10mbit", "--rtt", "40ms", "--"] + cmd,
                         stdout=subprocess.DEVNULL, stderr=errf,
                         start_new_session=True)
    deadline = time.monotonic() + 20
    while len(os.listdir(marks)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    inside = pids_of_delayers()  # delayers and the sleeps
    check(len(inside) >= 4, f"run: delayers and commands up ({inside})")
    p.send_signal(sig)
    p.wait(timeout=30)
    errf.seek(0)
    err = errf.read()
    errf.close()
    if sig == signal.SIGKILL:
        r = lab("down", "--name", NAME)
        check(r.returncode == 0, f"down after SIGKILL of run exits 0 "
              f"({r.stderr.strip()})")
    else:
        check(p.returncode == 1, f"run stopped by SIGTERM exits 1 "
              f"({p.returncode}, {err.strip()})")
    time.sleep(0.2)
    left = leftovers(inside)
    check(not left, f"nothing left after signal {sig} to run: {left}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_linklab.py PATH/TO/lab_delay")
    preflight()
    os.environ["GN_LAB_DELAYER"] = os.path.abspath(sys.argv[1])
    BASELINE.update(delayer_pids())
    seed = int(os.environ.get("GN_SEED", "1"))
    print(f"lab {NAME}, seed {seed} (GN_SEED replays the loss pattern)")
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="gn-linklab-")
    try:
        rate_and_rtt()
        loss(seed)
        wifi(seed)
        tcp_cc()
        failed_up()
        run_interrupted(signal.SIGTERM, tmp)
        run_interrupted(signal.SIGKILL, tmp)
    finally:
        lab("down", "--name", NAME)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{time.monotonic() - t0:.1f} s; "
          f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
