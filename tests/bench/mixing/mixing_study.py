#!/usr/bin/python3
"""mixing_study.py - how much mixing per byte the slice encodings buy, in
steps (issue 12): 4 MLP replicas on Fashion-MNIST in one process, no
time, no network, no gossipnode code. A study, not a benchmark: it asks
whether an encoding could make a 10 Mbit/s link carry the mixing that
88% needs, before anyone builds it into the node.

What it models (the node's defaults as bench_cluster.py runs them):
MLP 784-512-10, batch 100 per replica, SGD momentum 0.9, lr 0.1 with a
cosine schedule over --steps (1500 = 10 passes of a quarter shard),
replica i on every 4th sample of a shuffled training set. Every K steps
each replica exchanges one of P = 4 parts (rotating) with its hypercube
partner (the partner dimension changes every P exchanges, as
GossipGraD's rotation does for 4 nodes), both ways at once.

Modes (a CONFIG is MODE:CODEC:K:GAMMA):
  alone   no exchange
  plain   each side averages its part with the partner's decoded part,
          weight 1/2 (what the node does with --params-codec CODEC)
  ef      difference coding: per ordered pair (i, j) both sides keep
          x^_ij, i's part as j knows it; i sends C(x_i - x^_ij), both add
          it to x^_ij, and j moves GAMMA of the way to x^_ij
  choco   as ef, but each side moves by GAMMA (x^_ji - x^_ij), both public
          estimates (CHOCO-SGD, Koloskova et al. 2019), which keeps the
          replicas' sum exact
Codecs: fp32 (counted as fp16 bytes), int8, int4, int2 (stochastic
rounding, one fp32 scale per 256 values), sign (scaled sign per 256),
top1, top5 (top 1% / 5% by magnitude, 4 bytes each).

Prints per run the test accuracy of the replicas (mean, min, max) and of
the replicas' mean model (what a closing all-reduce would give), the
bytes each replica sent per step and the replicas' spread (RMS distance
from their mean over the mean's norm); with --eval-every E also the mean
and the lowest replica's accuracy every E steps.

  /usr/bin/python3 tests/bench/mixing/mixing_study.py [--seeds S]
      [--steps N] [--batch B] [--lr F] [--eval-every E] CONFIG...
  e.g. plain:fp32:1:0 plain:int8:8:0 ef:int4:4:0.5

Needs python3-torch (tools/setup.sh bench) and dataset-fashion-mnist.
One run of 1500 steps takes about 45 s on 2 cores.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "tools"))
from gossip_numpy import read_idx  # noqa: E402  (the IDX reader)

DATA = "/usr/share/datasets/fashion-mnist/"
N, P, MOMENTUM = 4, 4, 0.9
SHAPES = [(784, 512), (512,), (512, 10), (10,)]
NPARAMS = sum(int(np.prod(s)) for s in SHAPES)
BLOCK = 256


def load():
    def images(name):
        x = read_idx(DATA + name).reshape(-1, 784) / 255.0
        return torch.tensor(x, dtype=torch.float32)

    def labels(name):
        return torch.tensor(read_idx(DATA + name).astype(np.int64))

    return (images("train-images-idx3-ubyte.gz"),
            labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"),
            labels("t10k-labels-idx1-ubyte.gz"))


def layers(x):
    out, o = [], 0
    for s in SHAPES:
        n = int(np.prod(s))
        out.append(x[o:o + n].view(*s))
        o += n
    return out


def forward(x, images):
    w1, b1, w2, b2 = layers(x)
    return torch.relu(images @ w1 + b1) @ w2 + b2


def blocks(d):
    n = d.numel()
    return torch.nn.functional.pad(d, (0, (-n) % BLOCK)).view(-1, BLOCK), n


# A codec: values -> (what the receiver decodes, bytes on the wire).
def c_sign(d):
    b, n = blocks(d)
    scale = b.abs().mean(1, keepdim=True)
    return (torch.sign(b) * scale).view(-1)[:n], n * (1 + 32 / BLOCK) / 8


def c_int(d, bits):
    b, n = blocks(d)
    levels = 2 ** (bits - 1) - 1
    s = b.abs().amax(1, keepdim=True).clamp_min(1e-12) / levels
    q = torch.floor(b / s + torch.rand_like(b)).clamp(-levels, levels)
    return (q * s).view(-1)[:n], n * (bits + 32 / BLOCK) / 8


def c_topk(d, frac):
    k = max(1, int(d.numel() * frac))
    out = torch.zeros_like(d)
    i = d.abs().topk(k).indices
    out[i] = d[i]
    return out, k * 4.0


CODECS = {
    "fp32": lambda d: (d.clone(), d.numel() * 2.0),
    "int8": lambda d: c_int(d, 8),
    "int4": lambda d: c_int(d, 4),
    "int2": lambda d: c_int(d, 2),
    "sign": c_sign,
    "top1": lambda d: c_topk(d, 0.01),
    "top5": lambda d: c_topk(d, 0.05),
}


def run(data, a, mode, codec, k, gamma, seed):
    xtr, ytr, xte, yte = data
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)

    def accuracy(x):
        with torch.no_grad():
            return (forward(x, xte).argmax(1) == yte).float().mean().item() * 100

    x0 = torch.empty(NPARAMS)
    w1, b1, w2, b2 = layers(x0)
    torch.nn.init.kaiming_uniform_(w1.T, a=5 ** 0.5)
    torch.nn.init.kaiming_uniform_(w2.T, a=5 ** 0.5)
    b1.zero_()
    b2.zero_()
    x = [x0.clone() for _ in range(N)]
    vel = [torch.zeros(NPARAMS) for _ in range(N)]
    perm = torch.randperm(len(xtr), generator=gen)
    shard = [perm[i::N] for i in range(N)]
    known = {}  # (i, j): x^_ij
    bounds = np.linspace(0, NPARAMS, P + 1).astype(int)
    sent, exchanges, hist = 0.0, 0, []
    encode = CODECS[codec]
    for step in range(a.steps):
        lr = a.lr * 0.5 * (1 + np.cos(np.pi * step / a.steps))
        for i in range(N):
            xi = x[i].requires_grad_(True)
            pick = shard[i][torch.randint(0, len(shard[i]), (a.batch,),
                                          generator=gen)]
            loss = torch.nn.functional.cross_entropy(forward(xi, xtr[pick]),
                                                     ytr[pick])
            (grad,) = torch.autograd.grad(loss, xi)
            with torch.no_grad():
                vel[i] = MOMENTUM * vel[i] + grad
                x[i] = (xi - lr * vel[i]).detach()
        if a.eval_every and (step + 1) % a.eval_every == 0:
            accs = [accuracy(xx) for xx in x]
            hist.append((step + 1, sum(accs) / N, min(accs)))
        if mode == "alone" or (step + 1) % k:
            continue
        part = exchanges % P
        lo, hi = bounds[part], bounds[part + 1]
        bit = 1 << (exchanges // P % 2)
        exchanges += 1
        for i in range(N):
            j = i ^ bit
            if j < i:
                continue
            if mode == "plain":
                qi, nbytes = encode(x[i][lo:hi])
                qj, _ = encode(x[j][lo:hi])
                sent += 2 * nbytes
                x[i][lo:hi] += 0.5 * (qj - x[i][lo:hi])
                x[j][lo:hi] += 0.5 * (qi - x[j][lo:hi])
                continue
            for s, r in ((i, j), (j, i)):
                h = known.setdefault((s, r), torch.zeros(NPARAMS))
                q, nbytes = encode(x[s][lo:hi] - h[lo:hi])
                h[lo:hi] += q
                sent += nbytes
            hij, hji = known[(i, j)][lo:hi], known[(j, i)][lo:hi]
            if mode == "ef":
                x[i][lo:hi] += gamma * (hji - x[i][lo:hi])
                x[j][lo:hi] += gamma * (hij - x[j][lo:hi])
            else:
                move = gamma * (hji - hij)
                x[i][lo:hi] += move
                x[j][lo:hi] -= move
    accs = [accuracy(xx) for xx in x]
    mean = sum(x) / N
    spread = (sum(((xx - mean) ** 2).sum() for xx in x) / N /
              (mean ** 2).sum()).sqrt().item()
    return accs, accuracy(mean), sent / N / a.steps, spread, hist


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config", nargs="+", help="MODE:CODEC:K:GAMMA")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=0)
    a = ap.parse_args()
    configs = []
    for c in a.config:
        try:
            mode, codec, k, gamma = c.split(":")
            configs.append((c, mode, codec, int(k), float(gamma)))
        except ValueError:
            ap.error(f"{c}: want MODE:CODEC:K:GAMMA")
        if mode not in ("alone", "plain", "ef", "choco") or codec not in CODECS \
                or int(k) < 1:
            ap.error(f"{c}: unknown mode or codec, or K < 1")
    torch.set_num_threads(2)
    data = load()
    for c, mode, codec, k, gamma in configs:
        for seed in range(1, a.seeds + 1):
            t0 = time.time()
            accs, acc_mean_model, bps, spread, hist = run(data, a, mode, codec,
                                                          k, gamma, seed)
            if hist:
                print("  " + " ".join(f"{s}:{m:.2f}/{lo:.2f}"
                                      for s, m, lo in hist))
            print(f"{c:22s} seed {seed}: acc mean {np.mean(accs):.2f} "
                  f"min {min(accs):.2f} max {max(accs):.2f}  "
                  f"mean model {acc_mean_model:.2f}  "
                  f"sent/step {bps / 1e3:6.1f} KB  spread {spread:.4f}  "
                  f"({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
