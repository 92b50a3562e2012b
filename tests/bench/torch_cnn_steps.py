#!/usr/bin/python3
"""PyTorch peer for `bench_mlp --spec cnn`: the preset CNN (torch_train.py's
build("cnn")), batch 100, SGD momentum 0.9, lr 0.01, random data, 5 warm-up
steps then `steps` timed steps of forward + backward + step.
Usage: /usr/bin/python3 torch_cnn_steps.py THREADS STEPS
"""
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import build  # noqa: E402

t, steps = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(t)
torch.manual_seed(1)
m = build("cnn")
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
lf = nn.CrossEntropyLoss()
x = torch.rand(5, 100, 1, 28, 28)
y = torch.randint(0, 10, (5, 100))
for s in range(5 + steps):
    if s == 5:
        t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = lf(m(x[s % 5]), y[s % 5])
    loss.backward()
    opt.step()
dt = time.perf_counter() - t0
print("threads=%d steps=%d seconds=%.3f samples_per_s=%.0f"
      % (t, steps, dt, steps * 100 / dt))
