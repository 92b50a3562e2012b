#!/usr/bin/python3
"""test_link_lab.py - the transport's link estimate on a real 10 Mbit/s,
40 ms link (issue 12; tests/lab/linklab, node/net/net.c, gossip/link.h).

Two lab hosts run link_probe: host 0 keeps DEPTH frames of FRAME bytes
queued toward host 1 for SECS seconds, host 1 measures what it receives.
  1. With the transport's TCP_NOTSENT_LOWAT (the default): the exported
     goodput is within 10% of the goodput host 1 received, which is within
     80..105% of the cap (tbf counts IP and TCP headers too); at least 50
     backlogged samples; the RTT between 36 ms and 200 ms (the kernel's
     smoothed RTT: 40 ms plus what waits in tbf's queue).
  2. Without it (GN_NOTSENT_LOWAT=off): the time a frame spends beyond our
     own queue (queueing -> arrival, minus DEPTH frames at the received
     rate) is more than twice as long: the kernel holds the frames where
     the transport cannot see, count or drop them.
Needs root and network namespaces: exits 77 with a message otherwise.
Usage: test_link_lab.py PATH/TO/lab_delay PATH/TO/link_probe
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_linklab as tl  # noqa: E402  (the lab helpers, one copy)

CAP_BPS = 10e6
SECS, FRAME, DEPTH, PORT = 10, 100000, 4, 7001


def probe_run(probe, addrs, lowat):
    env = dict(os.environ)
    env.pop("GN_NOTSENT_LOWAT", None)
    if lowat:
        env["GN_NOTSENT_LOWAT"] = lowat
    dst = f"{addrs[1]}:{PORT}"
    recv = subprocess.Popen(tl.in_lab(1, probe, "recv", dst, str(SECS + 2)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = recv.stderr.readline()
    if "listening" not in line:
        raise SystemExit(f"FAIL: link_probe recv did not start: {line}")
    send = subprocess.run(
        tl.in_lab(0, "env", f"GN_NOTSENT_LOWAT={lowat or ''}", probe, "send",
                  f"{addrs[0]}:{PORT}", dst, str(SECS), str(FRAME),
                  str(DEPTH)),
        capture_output=True, text=True, timeout=SECS + 30, env=env)
    rx = json.loads(recv.communicate(timeout=SECS + 30)[0])
    if send.returncode != 0:
        raise SystemExit(f"FAIL: link_probe send: {send.stderr}")
    tx = json.loads(send.stdout)
    print(f"lowat={lowat or 'default'} send {tx} recv {rx}")
    print("  " + " | ".join(send.stderr.split("\n")[:SECS]))
    # time beyond our own queue: queueing -> arrival minus DEPTH frames
    rx["hidden_ms"] = rx["delay_ms_p50"] - \
        1e3 * DEPTH * (FRAME + 4) / rx["goodput_Bps"]
    return tx, rx


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: test_link_lab.py PATH/TO/lab_delay PATH/TO/link_probe")
    tl.preflight()
    os.environ["GN_LAB_DELAYER"] = os.path.abspath(sys.argv[1])
    probe = os.path.abspath(sys.argv[2])
    t0 = time.monotonic()
    try:
        st = tl.lab_up("--rate", "10mbit", "--rtt", "40ms")
        addrs = st["addrs"]
        tx, rx = probe_run(probe, addrs, None)
        got, want = tx["goodput_Bps"], rx["goodput_Bps"]
        tl.check(abs(got - want) <= 0.10 * want,
                 f"estimate {got * 8 / 1e6:.2f} Mbit/s within 10% of the "
                 f"{want * 8 / 1e6:.2f} Mbit/s received")
        tl.check(0.80 * CAP_BPS / 8 <= want <= 1.05 * CAP_BPS / 8,
                 f"received {want * 8 / 1e6:.2f} Mbit/s within 80..105% of "
                 f"the 10 Mbit/s cap")
        tl.check(tx["samples"] >= 50, f"{tx['samples']} samples >= 50")
        tl.check(36000 <= tx["rtt_us"] <= 200000,
                 f"RTT {tx['rtt_us'] / 1e3:.1f} ms within 36..200 ms")
        _, rx_off = probe_run(probe, addrs, "off")
        tl.check(rx_off["hidden_ms"] > 2 * rx["hidden_ms"],
                 f"beyond our queue: {rx['hidden_ms']:.0f} ms with "
                 f"TCP_NOTSENT_LOWAT, {rx_off['hidden_ms']:.0f} ms without "
                 f"(more than 2x)")
    finally:
        tl.lab("down", "--name", tl.NAME)
    print(f"{time.monotonic() - t0:.1f} s; {len(tl.failures)} failure(s)")
    return 1 if tl.failures else 0


if __name__ == "__main__":
    sys.exit(main())
