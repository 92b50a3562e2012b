#!/usr/bin/python3
"""PyTorch peer for bench_mlp: the same model, batch, optimizer (SGD,
momentum 0.9, lr 0.01) and synthetic data, timed the same way (a warm-up,
then `steps` steps of forward + backward + step).  Prints one line in
bench_mlp's format.  Run with Debian's interpreter (/usr/bin/python3).

Usage: torch_mlp.py [--sizes 784-512-10] [--batch 100] [--threads 1]
                    [--steps 2000]
"""
import argparse
import time

import torch
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="784-512-10")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=2000)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    sizes = [int(s) for s in a.sizes.split("-")]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    pool = 20
    x = torch.randint(0, 256, (pool, a.batch, sizes[0])).float() / 255.0
    y = torch.randint(0, sizes[-1], (pool, a.batch))
    warm = 50
    t0 = 0.0
    for s in range(warm + a.steps):
        if s == warm:
            t0 = time.perf_counter()
        b = s % pool
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(x[b]), y[b])
        loss.backward()
        opt.step()
    t = time.perf_counter() - t0
    print("torch spec=%s batch=%d threads=%d steps=%d seconds=%.3f "
          "samples_per_s=%.0f loss=%.4f" % (a.sizes, a.batch, a.threads,
                                            a.steps, t, a.steps * a.batch / t,
                                            loss.item()))


if __name__ == "__main__":
    main()
