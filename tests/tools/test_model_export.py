#!/usr/bin/python3
"""test_model_export.py BUILD_DIR - the model out, end to end.

A node trains alone on Fashion-MNIST (an MLP for 200 steps, the CNN for
10) and checkpoints at exit. Proves: `gossip-model infer` on the
checkpoint reports exactly the test accuracy the node's last evaluation
logged; `gossip-model export` writes a valid zip that numpy.load reads,
with the spec and one weight and bias array per layer of the right shape;
tools/gossip_numpy.py's forward pass over those arrays predicts the same
class as the node's code on every test image (all 10000 for the MLP, the
first 500 for the CNN) and so the same accuracy; a corrupt checkpoint and
a missing data set are refused with exit 1 and the file named. Seed from
GN_SEED (printed). Exit 77 without Fashion-MNIST.
"""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np

build = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
node = os.path.join(build, "node", "gossipnode")
tool = os.path.join(build, "tools", "gossip-model")
data = os.environ.get("GN_FASHION_DIR", "/usr/share/datasets/fashion-mnist")
if not os.path.isdir(data):
    print("SKIP: no " + data)
    sys.exit(77)
seed = int(os.environ.get("GN_SEED", time.time_ns() % 1000))
print("GN_SEED=%d" % seed)
spec = importlib.util.spec_from_file_location(
    "gossip_numpy", os.path.join(here, "..", "..", "tools", "gossip_numpy.py"))
gnp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gnp)
images = gnp.read_idx(os.path.join(data, "t10k-images-idx3-ubyte.gz"))
labels = gnp.read_idx(os.path.join(data, "t10k-labels-idx1-ubyte.gz"))


def train(tmp, model, steps):
    """Trains; returns (checkpoint path, the node's last test accuracy)."""
    ck = os.path.join(tmp, model + "-ck")
    ev = os.path.join(tmp, model + "-ev.jsonl")
    r = subprocess.run([node, "--model", model, "--steps", str(steps),
                        "--threads", "1", "--seed", str(seed),
                        "--checkpoint-dir", ck, "--event-log", ev,
                        "--log-level", "warn"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(ev) as f:
        evals = [l for l in f if '"ev":"eval"' in l]
    acc = float(re.search(r'"test_acc":([0-9.]+)', evals[-1]).group(1))
    return os.path.join(ck, "model.ckpt"), acc


def infer(tmp, ckpt):
    """gossip-model infer: (hits, n, predictions)."""
    pred = os.path.join(tmp, "pred.txt")
    r = subprocess.run([tool, "infer", ckpt, "--data", data,
                        "--predictions", pred], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    print(r.stdout.strip())
    m = re.search(r"accuracy [0-9.]+% \((\d+) of (\d+)\)", r.stdout)
    rows = [l for l in r.stdout.splitlines() if re.match(r"^ +\d+( +\d+)+$", l)]
    matrix = np.array([[int(v) for v in l.split()[1:]] for l in rows[1:]])
    hits, n = int(m.group(1)), int(m.group(2))
    assert matrix.sum() == n and np.trace(matrix) == hits, matrix
    return hits, n, np.loadtxt(pred, dtype=np.int64)


def export(tmp, ckpt, name):
    out = os.path.join(tmp, name + ".npz")
    r = subprocess.run([tool, "export", ckpt, out], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None  # every CRC right
    return out


def check(tmp, model, steps, n_numpy, want_arrays):
    ckpt, node_acc = train(tmp, model, steps)
    hits, n, pred = infer(tmp, ckpt)
    assert n == 10000 and abs(100.0 * hits / n - node_acc) < 1e-9, \
        (hits, node_acc)
    assert ((pred == labels).sum()) == hits
    npz = export(tmp, ckpt, model)
    z = np.load(npz)
    shapes = {k: z[k].shape for k in z.files if k.startswith("l")}
    assert shapes == want_arrays, shapes
    logits = gnp.forward(gnp.load(npz), images[:n_numpy])
    ours = np.argmax(logits, axis=1)
    top2 = np.sort(logits, axis=1)[:, -2:]
    diff = np.nonzero(ours != pred[:n_numpy])[0]
    assert len(diff) == 0, "%s: numpy differs on images %s (margins %s)" % (
        model, diff[:10], (top2[:, 1] - top2[:, 0])[diff[:10]])
    np_acc = 100.0 * (ours == labels[:n_numpy]).mean()
    print("%s: node %.2f%%, gossip-model %d/%d, numpy agrees on %d images "
          "(%.2f%% on them), smallest top-2 logit margin %.2e" %
          (model, node_acc, hits, n, n_numpy, np_acc,
           (top2[:, 1] - top2[:, 0]).min()))
    if n_numpy == n:
        assert abs(np_acc - node_acc) < 1e-9
    return ckpt


def refusals(tmp, ckpt):
    bad = os.path.join(tmp, "bad.ckpt")
    with open(ckpt, "rb") as f:
        raw = bytearray(f.read())
    raw[len(raw) // 2] ^= 0x40
    with open(bad, "wb") as f:
        f.write(raw)
    for args, needle in (
            (["infer", bad], bad),
            (["export", bad, os.path.join(tmp, "x.npz")], bad),
            (["infer", ckpt, "--data", tmp], tmp),
            (["export", ckpt, os.path.join(tmp, "no", "x.npz")],
             os.path.join(tmp, "no", "x.npz"))):
        r = subprocess.run([tool, *args], capture_output=True, text=True)
        assert r.returncode == 1 and needle in r.stderr, (args, r.stderr)
        print("refused: " + r.stderr.strip())
    assert not os.path.exists(os.path.join(tmp, "x.npz"))


tmp = tempfile.mkdtemp(prefix="gn-export.")
try:
    mlp = check(tmp, "784-512-10", 200, 10000,
                {"l00_dense_w": (512, 784), "l00_dense_b": (512,),
                 "l01_dense_w": (10, 512), "l01_dense_b": (10,)})
    check(tmp, "cnn", 10, 500,
          {"l00_conv_w": (32, 3, 3, 1), "l00_conv_b": (32,),
           "l02_conv_w": (64, 3, 3, 32), "l02_conv_b": (64,),
           "l04_dense_w": (128, 7 * 7 * 64), "l04_dense_b": (128,),
           "l05_dense_w": (10, 128), "l05_dense_b": (10,)})
    refusals(tmp, mlp)
    print("ok")
finally:
    shutil.rmtree(tmp)
