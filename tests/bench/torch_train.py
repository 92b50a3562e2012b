#!/usr/bin/python3
"""PyTorch peer of bench_train: the same spec (MLP "784-512-10" or the CNN
grammar of nn.h, e.g. "c32k3-p2-c64k3-p2-128-10" on 1x28x28), data scaling
(x/255), batch, SGD with momentum, cosine learning rate per step over the
planned epochs, test evaluation after every epoch (outside the clock), and
stop at the target accuracy.  Initialisation is PyTorch's default, and the
shuffle is torch's: same hyper-parameters, not the same random stream.

Usage: /usr/bin/python3 torch_train.py [--spec S] [--data DIR] [--epochs E]
       [--batch B] [--lr LR] [--momentum M] [--wd WD] [--threads T]
       [--target ACC] [--seed S]
"""
import argparse
import gzip
import math
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn

PRESET_CNN = "c32k3-p2-c64k3-p2-128-10"


def load_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(d, part):
    def p(name):
        for suf in (".gz", ""):
            q = os.path.join(d, name + suf)
            if os.path.exists(q):
                return q
        raise FileNotFoundError(name)
    x = load_idx(p(part + "-images-idx3-ubyte")).astype(np.float32) / 255.0
    y = load_idx(p(part + "-labels-idx1-ubyte")).astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def build(spec, c=1, h=28, w=28):
    if spec == "cnn":
        spec = PRESET_CNN
    toks = spec.split("-")
    layers, flat = [], None
    if toks[0].isdigit():
        flat = int(toks.pop(0))
        layers.append(nn.Flatten())
    elif "x" in toks[0]:
        c, h, w = (int(t) for t in toks.pop(0).split("x"))
    for i, t in enumerate(toks):
        last = i == len(toks) - 1
        if t.startswith("c"):
            f, k = (int(v) for v in t[1:].split("k"))
            layers += [nn.Conv2d(c, f, k, padding=k // 2), nn.ReLU()]
            c = f
        elif t.startswith("p"):
            s = int(t[1:])
            layers.append(nn.MaxPool2d(s))
            h, w = h // s, w // s
        else:
            n = int(t)
            if flat is None:
                layers.append(nn.Flatten())
                flat = c * h * w
            layers.append(nn.Linear(flat, n))
            if not last:
                layers.append(nn.ReLU())
            flat = n
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="784-512-10")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--wd", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--target", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    model = build(a.spec)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.wd)
    lossf = nn.CrossEntropyLoss()
    n = xtr.shape[0]
    spe = (n + a.batch - 1) // a.batch
    total = spe * a.epochs
    print("torch spec=%s params=%d batch=%d lr=%g threads=%d" % (
        a.spec, sum(p.numel() for p in model.parameters()), a.batch, a.lr,
        a.threads), flush=True)
    step, train_s, acc, e, wall0 = 0, 0.0, 0.0, 0, time.perf_counter()
    for e in range(1, a.epochs + 1):
        t0 = time.perf_counter()
        perm = torch.randperm(n)
        model.train()
        tot = 0.0
        for i in range(0, n, a.batch):
            idx = perm[i:i + a.batch]
            lr = 0.5 * a.lr * (1 + math.cos(math.pi * step / total))
            for g in opt.param_groups:
                g["lr"] = lr
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            tot += loss.item()
            step += 1
        train_s += time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            hits = 0
            for i in range(0, xte.shape[0], 1000):
                hits += (model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
        acc = hits / xte.shape[0]
        print("epoch %d train_loss %.4f test_acc %.4f train_s %.1f "
              "samples_per_s %.0f" % (e, tot / spe, acc, train_s,
                                      n * e / train_s), flush=True)
        if acc >= a.target:
            break
    print("result impl=torch spec=%s epochs=%d test_acc=%.4f train_s=%.1f "
          "wall_s=%.1f target=%.4f reached=%s" % (
              a.spec, e, acc, train_s, time.perf_counter() - wall0, a.target,
              "yes" if acc >= a.target else "no"))


if __name__ == "__main__":
    main()
