#!/usr/bin/python3
"""test_cluster - the tools against real gossipnode processes (label slow).

Part 1, a finished run: gossip-cluster starts 3 nodes on 127.0.0.1 with
--steps 300; every node must exit 0 after 300 steps, the launcher's summary
must give each node's test accuracy (and it must be above chance), no
gossipnode may outlive the launcher, and gossip-plot on the run's event logs
must write five valid, non-trivial PNGs (signature, IHDR size, CRCs, file
size, distinct colours; the membership plot must contain alive-green).

Part 2, a live cluster, every gossipctl command checked against what the
daemons really did: members (text aligned, JSON names/addresses/keys equal
to the generated peers file and keys), stats, train (the step advances),
version, watch, --status filters; then node2 is killed with SIGKILL and
node0's `members --status dead` must list it (exit 0); force-leave; join;
`leave` on node1 must make node1 exit 0 and node0 see it as left, after
which gossipctl on node1's socket fails with the documented message; and a
SIGINT to the launcher (Ctrl-C) must stop the rest cleanly.

Usage: test_cluster.py BUILD_DIR. Skips (77) without gossipnode or the
Fashion-MNIST data. GN_SEED (printed) is passed to the nodes.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pngcheck  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
GREEN = (0x2c, 0xa0, 0x2c)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Tools:
    def __init__(self, build):
        self.node = os.path.join(build, "node", "gossipnode")
        self.ctl = os.path.join(build, "tools", "gossipctl")
        self.cluster = os.path.join(build, "tools", "gossip-cluster")
        self.plot = os.path.join(build, "tools", "gossip-plot")
        self.build = build

    def gctl(self, sock, *args, check=None):
        r = subprocess.run([self.ctl, "--socket", sock, *args],
                           capture_output=True, text=True, timeout=30)
        if check is not None:
            assert r.returncode == check, (args, r.returncode, r.stdout,
                                           r.stderr)
        return r

    def gjson(self, sock, *args):
        r = self.gctl(sock, *args, "--json", check=0)
        return json.loads(r.stdout)


def wait_for(what, fn, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of someone else's is not ours to reap; check its state
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def pid_of(work, i):
    with open(os.path.join(work, f"node{i}", "node.pid")) as f:
        return int(f.read())


def check_pngs(out, width, height):
    want = ["acc_step.png", "acc_time.png", "loss_step.png",
            "loss_time.png", "membership.png"]
    assert sorted(os.listdir(out)) == want, os.listdir(out)
    for name in want:
        info = pngcheck.inspect(os.path.join(out, name))
        log(f"{name}: {info['width']}x{info['height']}, {info['size']} "
            f"bytes, {len(info['colours'])} colours")
        assert info["width"] == width, info
        if name != "membership.png":
            assert info["height"] == height, info
        assert info["size"] > 5000, info["size"]
        assert len(info["colours"]) > 8, len(info["colours"])
    info = pngcheck.inspect(os.path.join(out, "membership.png"))
    assert GREEN in info["colours"], "membership plot has no alive bar"


def part1(t, tmp, seed):
    work = os.path.join(tmp, "run1")
    log("part 1: 3 nodes, 300 steps")
    r = subprocess.run([t.cluster, "--nodes", "3", "--build", t.build,
                        "--workdir", work, "--steps", "300", "--seed",
                        str(seed)], capture_output=True, text=True,
                       timeout=600)
    print(r.stdout[-3000:], r.stderr[-2000:])
    assert r.returncode == 0, r.returncode
    accs = {}
    for i in range(3):
        m = re.search(rf"^node{i}\s+0\s+300\s+steps\s+([0-9.]+)%$", r.stdout,
                      re.M)
        assert m, f"no summary line for node{i}"
        accs[i] = float(m.group(1))
        assert not alive(pid_of(work, i)), f"node{i} still running"
        with open(os.path.join(work, f"node{i}", "events.jsonl")) as f:
            evs = [json.loads(x) for x in f]
        stops = [e for e in evs if e["ev"] == "stop"]
        assert len(stops) == 1 and stops[0]["reason"] == "steps", stops
        assert abs(stops[0]["test_acc"] - accs[i]) < 0.01, stops
    log(f"test accuracy after 300 steps: {accs}")
    assert all(a > 60 for a in accs.values()), accs
    out = os.path.join(work, "png")
    r = subprocess.run([t.plot, "--out", out, "--size", "640x400", work],
                       capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.returncode
    check_pngs(out, 640, 400)


def peers_file(work):
    rows = {}
    with open(os.path.join(work, "peers.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            addr, key, name = line.split()
            rows[name] = (addr, key)
    return rows


def check_members(t, sock, work):
    peers = peers_file(work)
    # one snapshot in which all three are alive (a loaded machine may show
    # a passing suspicion; the states must converge back to alive)
    ms = wait_for("a members snapshot with 3 alive", lambda: (lambda m: m if [
        x["state"] for x in m] == ["alive"] * 3 else None)(
            t.gjson(sock, "members")), 60)
    assert {m["name"] for m in ms} == set(peers), ms
    assert [m["name"] for m in ms if m["self"]] == ["node0"], ms
    assert ms[0]["self"], "self must come first"
    for m in ms:
        assert (m["addr"], m["key"]) == peers[m["name"]], (m, peers)
        assert m["state"] == "alive", m
        pub = open(os.path.join(work, m["name"], "node.key.pub")).read()
        assert m["key"] in pub
    version = t.gjson(sock, "version")["version"]

    def every_version():
        # A member first heard from directly (a ping) is alive before any
        # update carrying its version reaches us; the version follows with
        # its next alive update or the next push-pull sync (every 5 s).
        lines = t.gctl(sock, "members", check=0).stdout.splitlines()
        v = lines[0].index("VERSION") if lines else 0
        if len(lines) == 4 and all(r[v:].strip() == version
                                   for r in lines[1:]):
            return lines
        return None
    text = wait_for("every member's version", every_version, 30)
    assert len(text) == 4, text
    col = text[0].index("ADDR")
    for row in text[1:]:
        name = row.split()[0]
        assert row[col:].startswith(peers[name][0]), (row, col)
    heard, ver = text[0].index("LAST HEARD"), text[0].index("VERSION")
    assert text[1][heard:ver].strip() == "self", text[1]
    for row in text[1:]:
        assert row[ver:].strip() == version, (row, version)
    r = t.gctl(sock, "members", "--status", "dead", check=3)
    assert r.stdout == "", r.stdout


def check_stats_train(t, sock):
    s1 = t.gjson(sock, "train")
    assert s1["model"] == "784-512-10" and s1["running"] is True, s1
    # the members are up; the first step may still wait for the live-join
    # handshake (node_handoff_await_peers)
    s1 = wait_for("the first training samples",
                  lambda: (lambda s: s if s["samples"] > 0 else None)(
                      t.gjson(sock, "train")), 60)
    # samples of this run (a node that took a peer's state starts at its
    # step), the extra batches (25 samples each) among them
    assert s1["samples"] > 0, s1
    assert s1["samples"] >= 25 * s1["extra_batches"], s1
    wait_for("the step to advance",
             lambda: t.gjson(sock, "train")["step"] > s1["step"], 60)
    st = t.gjson(sock, "stats")
    assert st["node"]["name"] == "node0", st["node"]
    assert {p["name"] for p in st["peers"]} == {"node1", "node2"}, st
    assert st["node"]["msgs_out"] > 0 and st["node"]["bytes_out"] > 0, st
    txt = t.gctl(sock, "stats", check=0).stdout
    assert f"node       node0 (key {st['node']['key']})" in txt, txt
    assert re.search(r"^node1\s+alive\s", txt, re.M), txt
    txt = t.gctl(sock, "train", check=0).stdout
    assert "model      784-512-10\n" in txt and "running    yes\n" in txt
    v = t.gjson(sock, "version")
    assert v["protocol"] == 1, v
    txt = t.gctl(sock, "version", check=0).stdout
    assert f"gossipnode {v['version']} (control protocol 1)" in txt, txt
    r = t.gctl(sock, "watch", "--count", "2", "--interval", "0.2", check=0)
    # a pipe, not a terminal: no screen codes, one header per refresh
    assert "\033" not in r.stdout, r.stdout
    assert r.stdout.count("gossipctl watch ") == 2, r.stdout
    assert "node2" in r.stdout and "step " in r.stdout, r.stdout


def scrape(addr):
    """GET /metrics from a live daemon; (status line, headers, body)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as c:
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    return lines[0], lines[1:], body.decode()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? '
                    r'(-?[0-9.e+-]+|NaN|[+-]Inf)$')


def labels(lbl):
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', lbl))


def check_metric_labels(samples):
    """members{state}, the per-peer series and rejects_total{layer,reason}
    while node0 trains with two live peers."""
    members = {labels(l)["state"]: float(v)
               for l, v in samples["gossipnode_members"]}
    # a suspicion under load is possible; nobody is dead or gone
    assert set(members) == {"alive", "suspect", "dead", "left"} and \
        members["alive"] + members["suspect"] == 3 and \
        members["alive"] >= 1 and members["dead"] == members["left"] == 0, \
        members
    peers = {}
    for l, v in samples["gossipnode_peer_state"]:
        d = labels(l)
        peers.setdefault(d["peer"], {})[d["state"]] = float(v)
    assert len(peers) == 2 and all(
        sorted(st.values()) == [0, 0, 0, 1] and
        (st["alive"] == 1 or st["suspect"] == 1)
        for st in peers.values()), peers
    for fam in ("gossipnode_peer_bytes_in_total",
                "gossipnode_peer_bytes_out_total"):
        got = {labels(l)["peer"]: float(v) for l, v in samples[fam]}
        assert set(got) == set(peers) and all(v > 0 for v in got.values()), \
            (fam, got)
    rtt = {labels(l)["peer"]: v for l, v in samples["gossipnode_peer_rtt_seconds"]}
    assert set(rtt) == set(peers), rtt
    # the link estimate (issue 12): one sample per peer; the nodes have
    # sent frames to each other, so at least one RTT is measured
    for fam in ("gossipnode_peer_goodput_bytes_per_second",
                "gossipnode_peer_link_rtt_seconds"):
        got = {labels(l)["peer"]: float(v) for l, v in samples[fam]}
        assert set(got) == set(peers), (fam, got)
        assert any(v > 0 for v in got.values()), (fam, got)
    layers = {labels(l)["layer"] for l, _ in samples["gossipnode_rejects_total"]}
    assert layers == {"transport", "protocol", "merge"}, layers
    reasons = {labels(l)["reason"] for l, _ in samples["gossipnode_rejects_total"]}
    for r in ("bad_sig", "replay", "not_partner", "out_of_window", "clipped",
              "nonfinite", "mismatch", "hello_timeout", "per_address_cap"):
        assert r in reasons, (r, sorted(reasons))
    per = {labels(l)["peer"] for l, _ in samples["gossipnode_peer_rejects_total"]}
    assert per == set(peers), per


def check_metrics(work):
    """Scrape node0's /metrics: valid text format 0.0.4, our prefix and
    conventions, and values that agree with what the node is doing."""
    addr = open(os.path.join(work, "node0", "metrics.addr")).read().strip()
    status, headers, body = scrape(addr)
    assert status.startswith("HTTP/1.1 200"), status
    assert any(h.lower().startswith("content-type: text/plain; version=0.0.4")
               for h in headers), headers
    samples, types = {}, {}
    for ln in body.splitlines():
        if ln.startswith("# TYPE "):
            _, _, name, kind = ln.split(" ", 3)
            types[name] = kind
            continue
        if not ln or ln.startswith("#"):
            continue
        m = SAMPLE.match(ln)
        assert m, f"not a sample line: {ln!r}"
        name = m.group(1)
        assert name.startswith("gossipnode_"), name
        samples.setdefault(name, []).append((m.group(3) or "", m.group(4)))
    for name, kind in types.items():
        if kind == "counter":
            assert name.endswith("_total"), name
    assert "gossipnode_build_info" in samples, sorted(samples)
    # the node is training with 2 live peers: a step counter that moved
    steps = [k for k in samples if "step" in k]
    assert steps, sorted(samples)
    assert any(float(v) > 0 for k in steps for _, v in samples[k]), \
        {k: samples[k] for k in steps}
    # extra batches (25 samples each) are part of the samples counted
    extra = float(samples["gossipnode_train_extra_batches_total"][0][1])
    total = float(samples["gossipnode_train_samples_total"][0][1])
    assert 0 <= 25 * extra <= total, (extra, total)
    # steps skipped to catch up are counted in the steps, not trained
    skipped = float(samples["gossipnode_train_steps_skipped_total"][0][1])
    stepped = float(samples["gossipnode_train_steps_total"][0][1])
    assert 0 <= skipped <= stepped, (skipped, stepped)
    assert "gossipnode_exchange_catch_ups_total" in samples, sorted(samples)
    # the stall measure (node/train/stall.h): slow steps are steps, their
    # time waiting is part of their time, and after 64 steps (at most 16
    # of them the unjudged warm-up) the longest is no shorter than the
    # median
    val = {k: float(samples["gossipnode_" + k][0][1]) for k in (
        "train_slow_steps_total", "train_slow_step_seconds_total",
        "train_slow_step_wait_seconds_total", "train_step_median_seconds",
        "train_step_max_seconds")}
    assert 0 <= val["train_slow_steps_total"] <= stepped, val
    assert 0 <= val["train_slow_step_wait_seconds_total"] <= \
        val["train_slow_step_seconds_total"] + 1e-3, val
    assert stepped - skipped < 64 or val["train_step_max_seconds"] >= \
        val["train_step_median_seconds"] > 0, val
    check_metric_labels(samples)
    log(f"metrics: {len(samples)} families scraped from {addr}, "
        f"e.g. {steps[0]}={samples[steps[0]][0][1]}")


def check_failures(t, socks, work):
    os.kill(pid_of(work, 2), signal.SIGKILL)
    log("killed node2 with SIGKILL")
    t0 = time.monotonic()
    wait_for("node0 to see node2 dead",
             lambda: t.gctl(socks[0], "members", "--status",
                            "dead").returncode == 0, 90)
    log(f"node0 reports node2 dead after {time.monotonic() - t0:.1f}s")
    r = t.gctl(socks[0], "members", "--status", "dead", check=0)
    assert [ln.split()[0] for ln in r.stdout.splitlines()[1:]] == ["node2"]
    ms = t.gjson(socks[0], "members", "--status", "dead")
    assert [m["name"] for m in ms] == ["node2"], ms

    r = t.gctl(socks[0], "force-leave", "node2", check=0)
    assert r.stdout == "node2: left\n", r.stdout
    wait_for("node0 to see node2 left", lambda: "node2" in t.gctl(
        socks[0], "members", "--status", "left").stdout, 30)
    wait_for("node1 to hear node2 left", lambda: "node2" in t.gctl(
        socks[1], "members", "--status", "left").stdout, 30)
    r = t.gctl(socks[0], "members", "--status", "nosuch")
    assert r.returncode == 3 and r.stdout == "", r
    r = t.gctl(socks[0], "force-leave", "nosuch")
    assert r.returncode == 1 and "no such member" in r.stderr, r

    node1_addr = peers_file(work)["node1"][0]
    r = t.gctl(socks[0], "join", node1_addr, check=0)
    assert r.stdout.startswith("join sent ("), r.stdout

    pid1 = pid_of(work, 1)
    r = t.gctl(socks[1], "leave", check=0)
    assert r.stdout == "leaving the cluster\n", r.stdout
    wait_for("node1 to exit", lambda: not alive(pid1), 90)
    wait_for("node0 to see node1 left", lambda: "node1" in t.gctl(
        socks[0], "members", "--status", "left").stdout, 30)
    r = t.gctl(socks[1], "members", check=1)
    assert r.stderr.startswith(f"gossipctl: no gossipnode at {socks[1]} ("), \
        r.stderr


def part2(t, tmp, seed):
    work = os.path.join(tmp, "run2")
    log("part 2: live 3-node cluster")
    out = open(os.path.join(tmp, "launcher.out"), "w+")
    launcher = subprocess.Popen(
        [t.cluster, "--nodes", "3", "--build", t.build, "--workdir", work,
         "--steps", "10000000", "--time-budget", "400", "--seed", str(seed),
         "--metrics"],
        stdout=out, stderr=subprocess.STDOUT)
    socks = [os.path.join(work, f"node{i}", "ctl.sock") for i in range(3)]
    try:
        for s in socks:
            wait_for(f"{s} to see 3 alive", lambda s=s: t.gctl(
                s, "members", "--status", "alive").stdout.count("\n") == 4,
                120)
        check_members(t, socks[0], work)
        check_stats_train(t, socks[0])
        check_metrics(work)
        check_failures(t, socks, work)
        launcher.send_signal(signal.SIGINT)
        rc = launcher.wait(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        out.seek(0)
        text = out.read()
        print(text[-4000:])
    assert "stopping 3 nodes (SIGTERM)" in text
    assert re.search(r"^node0\s+0\s", text, re.M), "node0 did not exit 0"
    assert re.search(r"^node1\s+0\s", text, re.M), "node1 did not exit 0"
    assert re.search(r"^node2\s+-9\s", text, re.M), "node2 not SIGKILLed"
    assert rc == 1, rc  # one node did not exit 0
    for i in range(3):
        assert not alive(pid_of(work, i)), f"node{i} survived the launcher"


def main():
    build = os.path.abspath(sys.argv[1])
    t = Tools(build)
    if not os.access(t.node, os.X_OK):
        print("test_cluster: no gossipnode built; skipping")
        return 77
    if not os.path.isdir(DATA):
        print(f"test_cluster: no data set at {DATA}; skipping")
        return 77
    seed = int(os.environ.get("GN_SEED", "1"))
    print(f"test_cluster: GN_SEED={seed}")
    with tempfile.TemporaryDirectory(prefix="gn-test-cluster-") as tmp:
        part1(t, tmp, seed)
        part2(t, tmp, seed)
    print("test_cluster: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
