#!/usr/bin/python3
"""lab_probe.py - TCP and UDP probes the link-lab test runs inside the lab.

  tcp-recv --port P [--skip S] [--connects C]
                                    accept C connections, count the last's
                                    bytes;
                                    print JSON: bytes, seconds, goodput of
                                    the part after the first S seconds
  tcp-send --to ADDR:P --seconds D [--connects C]
                                    connect C times (a connect takes one
                                    RTT; the median is printed), send for D
                                    seconds on the last; print JSON
  udp-recv --port P --count N [--idle S]
                                    receive numbered datagrams until N came
                                    or none for S seconds; print JSON (also
                                    how many came after a higher number,
                                    and the runs of consecutive losses)
  udp-send --to ADDR:P --count N [--size B] [--interval-us U]
                                    N numbered datagrams, paced

Each prints one JSON line on stdout. A receiver writes "listening" on
stderr once bound, so the caller can start the sender. Python 3 standard
library only; no address is built in: the caller passes the lab's.
"""
import argparse
import json
import socket
import struct
import sys
import time

CHUNK = 65536


def hostport(s):
    host, _, port = s.rpartition(":")
    return host, int(port)


def tcp_recv(a):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", a.port))
    ls.listen(1)
    print("listening", file=sys.stderr, flush=True)
    ls.settimeout(a.timeout)
    for _ in range(a.connects - 1):  # handshake-only connections
        ls.accept()[0].close()
    c, _ = ls.accept()
    c.settimeout(a.timeout)
    total = mark_bytes = 0
    t0 = mark_t = None
    while True:
        b = c.recv(CHUNK)
        now = time.monotonic()
        if not b:
            break
        if t0 is None:
            t0 = now
        total += len(b)
        if mark_t is None and now - t0 >= a.skip:
            mark_t, mark_bytes = now, total
    end = time.monotonic()
    c.close()
    steady = (total - mark_bytes) * 8 / (end - mark_t) if mark_t and \
        end > mark_t else None
    print(json.dumps({"bytes": total, "seconds": end - (t0 or end),
                      "goodput_bps": steady}))


def connect_timed(dst):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t0 = time.monotonic()
    s.connect(dst)
    return s, time.monotonic() - t0


def tcp_send(a):
    """The receiver accepts a.connects connections: the first ones only
    time the handshake (one RTT each), the last one carries the data."""
    times = []
    for _ in range(a.connects - 1):
        s, t = connect_timed(hostport(a.to))
        times.append(t)
        s.close()
    s, t = connect_timed(hostport(a.to))
    times.append(t)
    connect_s = sorted(times)[len(times) // 2]
    buf = b"\0" * CHUNK
    sent = 0
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        sent += s.send(buf)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # wait for the receiver's close: everything arrived
    s.close()
    print(json.dumps({"bytes": sent, "connect_s": connect_s}))


def udp_recv(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", a.port))
    print("listening", file=sys.stderr, flush=True)
    seen = set()
    top, reordered = -1, 0
    s.settimeout(a.first)
    while len(seen) < a.count:
        try:
            b = s.recv(CHUNK)
        except socket.timeout:
            break
        s.settimeout(a.idle)
        if len(b) >= 4:
            n = struct.unpack("!I", b[:4])[0]
            reordered += n < top
            top = max(top, n)
            seen.add(n)
    got = len([x for x in seen if x < a.count])
    runs = sum(1 for i in range(a.count)
               if i not in seen and (i == 0 or i - 1 in seen))
    print(json.dumps({"count": a.count, "received": got,
                      "lost": a.count - got, "lost_runs": runs,
                      "reordered": reordered}))


def udp_send(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = b"\0" * max(0, a.size - 4)
    dst = hostport(a.to)
    t0 = time.monotonic()
    errors = 0
    for i in range(a.count):
        due = t0 + i * a.interval_us / 1e6
        while time.monotonic() < due:
            time.sleep(max(0.0, due - time.monotonic()))
        try:
            s.sendto(struct.pack("!I", i) + pad, dst)
        except OSError:
            errors += 1
    print(json.dumps({"sent": a.count, "send_errors": errors,
                      "seconds": time.monotonic() - t0}))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("tcp-recv")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--skip", type=float, default=0.0)
    p.add_argument("--connects", type=int, default=1)
    p.add_argument("--timeout", type=float, default=30.0)
    p = sub.add_parser("tcp-send")
    p.add_argument("--to", required=True)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--connects", type=int, default=1,
                   help="connections made; the median connect time is "
                        "reported, the last one carries the data")
    p = sub.add_parser("udp-recv")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--first", type=float, default=10.0)
    p.add_argument("--idle", type=float, default=1.0)
    p = sub.add_parser("udp-send")
    p.add_argument("--to", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--size", type=int, default=500)
    p.add_argument("--interval-us", type=int, default=1000)
    a = ap.parse_args()
    {"tcp-recv": tcp_recv, "tcp-send": tcp_send, "udp-recv": udp_recv,
     "udp-send": udp_send}[a.cmd](a)


if __name__ == "__main__":
    main()
