#!/usr/bin/python3
"""test_notify.py GOSSIPNODE - the daemon as systemd sees it (Type=notify).

A datagram socket stands in for $NOTIFY_SOCKET; stderr goes to a file
named by $JOURNAL_STREAM; WATCHDOG_USEC is 1 s. The node trains alone for
200 steps. Asserted: READY=1 with STATUS=training comes once the first
step has run (before it only "STATUS=joining", no pings); STATUS= lines
carry an increasing step and "-" for values not known yet; WATCHDOG=1
pings come at most 1.5 s apart while it steps (the final evaluation may
pause them: it is not a step); STOPPING=1 comes before the exit; the exit
status is 0; and every log line has a journald priority prefix. A second
run with a config file whose line 2 is malformed exits 2 naming
"FILE:2:". Skips (77) without Fashion-MNIST.
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

DATA = "/usr/share/datasets/fashion-mnist"


def main():
    binary = sys.argv[1]
    if not os.path.isdir(DATA):
        print("SKIP: no " + DATA)
        return 77
    tmp = tempfile.mkdtemp(prefix="gn-notify.")
    sock_path = os.path.join(tmp, "notify")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(sock_path)
    srv.settimeout(0.2)
    err_path = os.path.join(tmp, "stderr")
    err = open(err_path, "w")
    st = os.fstat(err.fileno())
    env = dict(os.environ, NOTIFY_SOCKET=sock_path, WATCHDOG_USEC="1000000",
               JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
    env.pop("WATCHDOG_PID", None)
    p = subprocess.Popen([binary, "--no-config", "--steps", "200",
                          "--threads", "1", "--name", "svc"],
                         stdout=subprocess.DEVNULL, stderr=err, env=env)
    msgs = []  # (time, text)
    while p.poll() is None:
        try:
            msgs.append((time.monotonic(), srv.recv(4096).decode()))
        except socket.timeout:
            pass
    try:
        while True:
            msgs.append((time.monotonic(), srv.recv(4096).decode()))
    except socket.timeout:
        pass
    err.close()
    rc = p.returncode
    texts = [m for _, m in msgs]
    print("exit %d, %d notifications; first: %r" %
          (rc, len(texts), texts[0] if texts else None))
    assert rc == 0, rc
    # before READY=1 only "joining" status, and no watchdog ping
    ready = texts.index("READY=1\nSTATUS=training")
    assert all(t.startswith("STATUS=joining") and "WATCHDOG" not in t
               for t in texts[:ready]), texts[:ready + 1]
    steps = [int(m.group(1)) for t in texts
             for m in [re.search(r"STATUS=training step (\d+),", t)] if m]
    assert steps == sorted(steps), steps
    pings = [t for t, m in msgs if "WATCHDOG=1" in m]
    stop = [t for t, m in msgs if "STOPPING=1" in m]
    assert stop, texts
    # no gap between pings (or from READY to the first) may reach 3 ticks
    ready_t = msgs[ready][0]
    gaps = [b - a for a, b in zip([ready_t] + pings, pings)]
    print("watchdog pings: %d, largest gap %.2f s; STATUS steps %s" %
          (len(pings), max(gaps), steps[:5]))
    assert len(pings) >= 1, texts
    assert "loss -, acc -, test -" in texts[ready + 1], texts[ready + 1]
    assert max(gaps) < 1.5, gaps
    lines = open(err_path).read().splitlines()
    bad = [l for l in lines if not re.match(r"<[3467]>\[svc\] ", l)]
    assert lines and not bad, bad[:3]

    conf = os.path.join(tmp, "g.conf")
    with open(conf, "w") as f:
        f.write("steps = 10\nbatch = many\n")
    r = subprocess.run([binary, "--config", conf], capture_output=True,
                       text=True)
    print("bad config: exit %d, %s" % (r.returncode, r.stderr.strip()))
    assert r.returncode == 2 and (conf + ":2: --batch:") in r.stderr, r
    for f in ("notify", "stderr", "g.conf"):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
