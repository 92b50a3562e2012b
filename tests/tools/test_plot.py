#!/usr/bin/python3
"""test_plot - gossip-plot on a synthetic event log (label unit).

Writes a seeded event log for three nodes (steps with falling loss, evals,
and a membership story: node2 becomes suspect, then dead, in the eyes of
node0 and node1, and node1 later sees node0 leave), plus malformed lines,
then checks every PNG: signature, IHDR dimensions, CRCs, file size, and
more than a handful of distinct colours. The membership plot must contain
the exact fill colours of alive, suspect, dead and left bars, so a plot that
lost the state data fails. Also: no events -> exit 1 and no files. And a
restart is a gap (restart_checks): a node that crashed and came back has
two lives, its lines break between them (a blank line in the data) and
its own row and its beliefs about peers have nothing in the downtime.
Usage: test_plot.py PATH-TO-gossip-plot. GN_SEED (printed) replays.
"""
import importlib.machinery
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pngcheck  # noqa: E402

W, H = 480, 320
COLOURS = {"alive": (0x2c, 0xa0, 0x2c), "suspect": (0xff, 0x7f, 0x0e),
           "dead": (0xd6, 0x27, 0x28), "left": (0x7f, 0x7f, 0x7f)}


def synth(path, seed):
    rnd = random.Random(seed)
    t0 = 1_700_000_000_000
    lines = []

    def ev(t, node, kind, **kw):
        lines.append(json.dumps({"t_ms": t0 + t, "node": node, "ev": kind,
                                 **kw}))

    for n in range(3):
        name = f"node{n}"
        ev(n * 50, name, "start", model="784-512-10", params=407050,
           shard=f"{n}/3", seed=seed, step=0, peers=3)
        for p in range(3):
            if p != n:
                ev(300 + 10 * p, name, "member", peer=f"node{p}",
                   state="alive")
        for s in range(0, 400, 10):
            loss = 2.3 * 0.99 ** s + rnd.random() * 0.05
            ev(1000 + 40 * s + n, name, "step", step=s, epoch=s // 200,
               loss=loss, acc=100 - 90 * 0.985 ** s, sps=2000.0, lr=0.05)
            if s % 100 == 0:
                ev(1000 + 40 * s + n + 1, name, "eval", step=s,
                   epoch=s // 200, train_acc=None,
                   test_acc=95 - 80 * 0.985 ** s, test_loss=loss)
    for obs in ("node0", "node1"):
        ev(9000, obs, "member", peer="node2", state="suspect")
        ev(12000, obs, "member", peer="node2", state="dead")
    ev(14000, "node1", "member", peer="node0", state="left")
    lines.append("not json at all")
    lines.append('{"t_ms": "soon", "node": "x", "ev": "step"}')
    rnd.shuffle(lines)  # order in the file must not matter
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def check_png(path, min_colours=8):
    info = pngcheck.inspect(path)
    assert info["size"] > 5000, (path, info["size"])
    assert len(info["colours"]) > min_colours, (path, len(info["colours"]))
    return info


def load_plot(path):
    """gossip-plot as a module (it has no .py suffix)."""
    loader = importlib.machinery.SourceFileLoader("gossip_plot", path)
    spec = importlib.util.spec_from_loader("gossip_plot", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def restart_checks(plot, d):
    """Node r: membership, then start at 0.2 s, steps until 5 s, crash (no
    stop); back at 15 s (membership and a join before its start), steps,
    stop at 20.5 s, serving on (a suspicion at 21 s)."""
    gp = load_plot(plot)
    t0 = 1_700_000_000_000

    def ev(t, kind, **kw):
        return {"t_ms": t0 + int(t * 1000), "node": "r", "ev": kind, **kw}

    evs = [ev(0.1, "member", peer="p", state="alive"), ev(0.2, "start")]
    evs += [ev(t, "step", step=10 * t, loss=1.0 / t) for t in (1, 3, 5)]
    evs += [ev(15.0, "member", peer="p", state="alive"),
            ev(15.1, "join", peer="p", step=60), ev(15.2, "start", step=60)]
    evs += [ev(t, "step", step=60 + t, loss=0.5 / t) for t in (16, 18, 20)]
    evs += [ev(20.5, "stop", reason="steps"),
            ev(21.0, "member", peer="p", state="suspect")]
    lives = gp.lives(evs)
    assert [len(x) for x in lives] == [5, 8], [len(x) for x in lives]
    assert lives[1][0]["ev"] == "member", lives[1][0]
    pts = gp.series({"r": evs}, t0, "step", "loss", "time")["r"]
    assert pts.count(None) == 1, pts
    cut = pts.index(None)
    assert pts[cut - 1][0] == 5.0 and pts[cut + 1][0] == 16.0, pts
    path = gp.write_data(d, "r", pts)
    assert "\n\n" in open(path).read(), "no line break in the data"
    rows = dict(gp.intervals({"r": evs}, t0))
    assert rows["r (self)"] == [(0.1, 5.0, "self"), (15.0, 21.0, "self")], \
        rows["r (self)"]
    assert rows["r: p"] == [(0.1, 5.0, "alive"), (15.0, 21.0, "alive"),
                            (21.0, 21.0, "suspect")], rows["r: p"]
    down = [s for spans in rows.values() for s in spans
            if s[0] < 10.0 < s[1]]
    assert not down, "a bar covers the downtime: %s" % down
    print("restart: 2 lives, the line and the bars break at 5-15 s")


def main():
    plot = sys.argv[1]
    seed = int(os.environ.get("GN_SEED", "7"))
    print(f"test_plot: GN_SEED={seed}")
    with tempfile.TemporaryDirectory(prefix="gn-test-plot-") as d:
        synth(os.path.join(d, "events.jsonl"), seed)
        out = os.path.join(d, "png")
        r = subprocess.run([plot, "--out", out, "--size", f"{W}x{H}", d],
                           capture_output=True, text=True)
        print(r.stdout, r.stderr)
        assert r.returncode == 0, r.returncode
        assert "skipped 2 malformed line(s)" in r.stderr, r.stderr
        want = ["loss_time.png", "loss_step.png", "acc_time.png",
                "acc_step.png", "membership.png"]
        assert sorted(os.listdir(out)) == sorted(want), os.listdir(out)
        for name in want:
            info = check_png(os.path.join(out, name))
            assert info["width"] == W, (name, info["width"])
            if name != "membership.png":
                assert info["height"] == H, (name, info["height"])
            print(f"{name}: {info['width']}x{info['height']}, "
                  f"{info['size']} bytes, {len(info['colours'])} colours")
        info = pngcheck.inspect(os.path.join(out, "membership.png"))
        # 3 self rows + node0: 2 peers, node1: 2 peers, node2: 2 peers
        assert info["height"] == 120 + 22 * 9, info["height"]
        for state, rgb in COLOURS.items():
            assert rgb in info["colours"], f"no {state} bar {rgb}"

        # nothing to plot: exit 1, no files
        empty = os.path.join(d, "empty")
        os.mkdir(empty)
        with open(os.path.join(empty, "e.jsonl"), "w") as f:
            f.write("garbage\n")
        r = subprocess.run([plot, "--out", os.path.join(empty, "png"),
                            empty], capture_output=True, text=True)
        assert r.returncode == 1, r.returncode
        assert not os.path.exists(os.path.join(empty, "png")) or \
            os.listdir(os.path.join(empty, "png")) == []
        restart_checks(plot, d)
    print("test_plot: ok")


if __name__ == "__main__":
    main()
