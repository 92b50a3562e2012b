#!/usr/bin/python3
"""PyTorch DDP (gloo) baseline for the cluster benchmark.

Trains MLP 784-512-10 on Fashion-MNIST with N processes on loopback, each on
its own disjoint shard (process i takes samples i, i+N, ...), batch B per
process, SGD with momentum and a cosine schedule, and reports:

  - wall time until the test accuracy reaches the target (evaluated every
    --eval-every steps on the full 10k test set, by rank 0; the evaluation
    time is excluded from the clock, as in gossipnode's benchmark),
  - per-process compute efficiency: time spent in forward/backward/step
    compute divided by wall time, where compute is estimated from steps run
    under no_sync() (no allreduce) at the start.

Run with Debian's interpreter: /usr/bin/python3 ddp_baseline.py --procs 4
Prints one JSON line on stdout with the results (rank 0).

One rank per host (the link lab, tests/lab/bench_lab.py): --rank R
--master-addr ADDR runs only rank R in this process and prints that rank's
JSON line; the caller combines them (summarize()). --max-steps N stops
after N steps: on a slow link a bounded run measures the time per step and
the caller projects the time to the target from it. "evals" lists (step,
train seconds, test accuracy) at each evaluation (rank 0).
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def load_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    return arr.reshape(dims)


def load(data_dir):
    def p(name):
        for suffix in (".gz", ""):
            q = os.path.join(data_dir, name + suffix)
            if os.path.exists(q):
                return q
        raise FileNotFoundError(os.path.join(data_dir, name))
    xtr = load_idx(p("train-images-idx3-ubyte")).reshape(-1, 784)
    ytr = load_idx(p("train-labels-idx1-ubyte"))
    xte = load_idx(p("t10k-images-idx3-ubyte")).reshape(-1, 784)
    yte = load_idx(p("t10k-labels-idx1-ubyte"))
    f = lambda x: torch.from_numpy(x.astype(np.float32) / 255.0)
    return f(xtr), torch.from_numpy(ytr.astype(np.int64)), f(xte), torch.from_numpy(yte.astype(np.int64))


def model_fn():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))


def worker(rank, args, port, out_q):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.procs > 1:
        os.environ["MASTER_ADDR"] = args.master_addr
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=args.procs)
    xtr, ytr, xte, yte = load(args.data)
    xs, ys = xtr[rank::args.procs], ytr[rank::args.procs]
    model = model_fn()
    ddp = torch.nn.parallel.DistributedDataParallel(model) if args.procs > 1 else model
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    steps_per_epoch = len(xs) // args.batch
    total = steps_per_epoch * args.max_epochs
    lossf = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(args.seed + rank)

    def lr_at(step):
        return args.lr * 0.5 * (1 + math.cos(math.pi * min(step, total) / total))

    def one_step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = lossf(ddp(xb), yb)
        loss.backward()
        opt.step()
        return loss

    # compute-only estimate: a few steps without allreduce
    perm = torch.randperm(len(xs), generator=g)
    nsync = 30
    if args.procs > 1:
        t0 = time.perf_counter()
        with ddp.no_sync():
            for i in range(nsync):
                idx = perm[i * args.batch:(i + 1) * args.batch]
                opt.zero_grad(set_to_none=True)
                lossf(ddp(xs[idx]), ys[idx]).backward()
        compute_step = (time.perf_counter() - t0) / nsync
        # reset model to a common state (rank 0's)
        for p in model.parameters():
            dist.broadcast(p.data, 0)
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
        dist.barrier()
    step = 0
    clock = 0.0
    reached = None
    acc = 0.0
    evals = []
    steady_from = None  # (step, clock) after the first STEADY_SKIP steps
    for epoch in range(args.max_epochs):
        perm = torch.randperm(len(xs), generator=g)
        for i in range(steps_per_epoch):
            for pg in opt.param_groups:
                pg["lr"] = lr_at(step)
            idx = perm[i * args.batch:(i + 1) * args.batch]
            t0 = time.perf_counter()
            one_step(xs[idx], ys[idx])
            clock += time.perf_counter() - t0
            step += 1
            if step == STEADY_SKIP:
                steady_from = (step, clock)
            if step % args.eval_every == 0:
                with torch.no_grad():
                    acc = (model(xte).argmax(1) == yte).float().mean().item()
                evals.append((step, clock, acc))
                flag = torch.tensor([1.0 if acc >= args.target else 0.0])
                if args.procs > 1:
                    dist.broadcast(flag, 0)
                if flag.item() > 0:
                    reached = clock
                    break
            if args.max_steps and step >= args.max_steps:
                break
        if reached is not None or (args.max_steps and step >= args.max_steps):
            break
    wall = clock
    if args.procs == 1:
        compute_step = wall / max(step, 1)
    eff = min(1.0, compute_step * step / wall) if wall > 0 else 0.0
    res = {"rank": rank, "procs": args.procs, "steps": step, "seconds_to_target": reached,
           "train_seconds": wall, "test_acc": acc, "compute_efficiency": eff,
           "compute_ms_per_step": compute_step * 1e3, "ms_per_step": wall / max(step, 1) * 1e3,
           "evals": evals}
    if steady_from and step > steady_from[0]:
        res["ms_per_step_steady"] = ((wall - steady_from[1]) * 1e3 /
                                     (step - steady_from[0]))
    out_q.put(res)
    if args.procs > 1:
        # every rank here before any leaves: rank 0 holds the store, and
        # a rank still tearing down after it exits spins on the closed
        # socket for good (seen in the lab: one rank at 90% CPU, the
        # others gone). One process per host (--rank) skips the
        # teardown and exits at once after printing.
        dist.barrier()
        if not args.one_rank:
            dist.destroy_process_group()


STEADY_SKIP = 5  # steps before the steady per-step time is measured


def summarize(results, args):
    """One summary line from the ranks' results (rank 0's clock)."""
    results = sorted(results, key=lambda r: r["rank"])
    r0 = results[0]
    return {"framework": "pytorch-ddp-gloo" if args.procs > 1 else "pytorch",
            "procs": args.procs, "batch": args.batch, "lr": args.lr,
            "seconds_to_target": r0["seconds_to_target"], "target": args.target,
            "steps": r0["steps"], "test_acc": r0["test_acc"],
            "compute_efficiency": sum(r["compute_efficiency"] for r in results) / len(results),
            "ms_per_step": r0["ms_per_step"],
            "ms_per_step_steady": r0.get("ms_per_step_steady"),
            "compute_ms_per_step": sum(r["compute_ms_per_step"] for r in results) / len(results),
            "max_steps": args.max_steps, "evals": r0["evals"],
            "torch": torch.__version__}


class PrintQueue:
    """--rank: the result is printed (and flushed) as soon as it is put."""

    def put(self, res):
        print(json.dumps(res), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--max-epochs", type=int, default=10)
    ap.add_argument("--target", type=float, default=0.88)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--port", type=int, default=29511)
    ap.add_argument("--master-addr", default="127.0.0.1")
    ap.add_argument("--rank", type=int, default=-1,
                    help="run only this rank here (one process per host)")
    ap.add_argument("--max-steps", type=int, default=0,
                    help="stop after this many steps (0: no bound)")
    args = ap.parse_args()
    args.one_rank = args.rank >= 0
    if args.one_rank:
        worker(args.rank, args, args.port, PrintQueue())
        sys.stdout.flush()
        os._exit(0)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args, args.port, q)) for r in range(args.procs)]
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    print(json.dumps(summarize(results, args)))


if __name__ == "__main__":
    main()
