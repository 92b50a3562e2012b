#!/usr/bin/python3
"""gossip_numpy.py - run a model exported by `gossip-model export` in NumPy.

The reference for what the .npz holds (docs/operations.md, "Training on
your own data, and taking the model out"): `spec` (e.g. "784-512-10" or
"1x28x28-c32k3-p2-c64k3-p2-128-10"), `input_shape` (C, H, W) and per
layer lNN_dense_w [out, in] / lNN_dense_b, lNN_conv_w [filters, k, k, C]
/ lNN_conv_b; pool layers ("pS", max over S x S windows) have no arrays.
Every dense and conv layer but the last is followed by ReLU. Images are
bytes / 255; inside the model they are channels-last (H, W, C), so a
dense layer after a conv or pool sees the (h, w, c)-ordered flattening,
and a first dense layer sees the image as stored, (c, h, w).

    python3 gossip_numpy.py MODEL.npz IMAGES-idx3 LABELS-idx1 [--pred FILE]

prints the accuracy; the functions are importable (load, forward,
read_idx). Computes in float64: the node computes in float32, and float64
is closer to both than another float32 summation order would be.
"""
import gzip
import sys

import numpy as np


def read_idx(path):
    """An IDX file (raw or gzipped) as a numpy array of uint8."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        raise ValueError("%s: not an unsigned-byte IDX file" % path)
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big")
            for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    return data.reshape(dims)


def load(path):
    """The model: (spec tokens after the input, {name: array})."""
    z = np.load(path, allow_pickle=False)
    arrays = {k: z[k] for k in z.files}
    spec = str(arrays["spec"])
    return spec.split("-")[1:], arrays


def forward(model, images, chunk=500):
    """Logits [n, classes] of uint8 images [n, ...] (float64), computed
    chunk images at a time (a CNN's activations are large in float64)."""
    return np.concatenate([forward_chunk(model, images[i:i + chunk])
                           for i in range(0, len(images), chunk)])


def forward_chunk(model, images):
    layers, a = model
    c, h, w = (int(v) for v in a["input_shape"])
    x = images.reshape(len(images), -1).astype(np.float64) / 255.0
    image = layers[0][0] in "cp"
    if image:  # planar (c, h, w) as stored -> channels-last
        x = x.reshape(-1, c, h, w).transpose(0, 2, 3, 1)
    last = len(layers) - 1
    for i, tok in enumerate(layers):
        if tok[0] == "p":
            s = int(tok[1:])
            n, hh, ww, cc = x.shape
            x = x.reshape(n, hh // s, s, ww // s, s, cc).max(axis=(2, 4))
            continue
        kind = "conv" if tok[0] == "c" else "dense"
        wt = a["l%02d_%s_w" % (i, kind)].astype(np.float64)
        b = a["l%02d_%s_b" % (i, kind)].astype(np.float64)
        if kind == "conv":
            x = conv(x, wt, b)
        else:
            x = x.reshape(len(x), -1) @ wt.T + b
        if i != last:
            x = np.maximum(x, 0.0)
    return x


def conv(x, wt, b):
    """'same' convolution, stride 1: x [n, h, w, c], wt [f, k, k, c]."""
    n, h, w, c = x.shape
    f, k = wt.shape[0], wt.shape[1]
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    out = np.zeros((n, h, w, f))
    for dy in range(k):
        for dx in range(k):
            out += xp[:, dy:dy + h, dx:dx + w, :] @ wt[:, dy, dx, :].T
    return out + b


def main(argv):
    if len(argv) not in (4, 6):
        sys.exit("usage: gossip_numpy.py MODEL.npz IMAGES LABELS "
                 "[--pred FILE]")
    model = load(argv[1])
    images, labels = read_idx(argv[2]), read_idx(argv[3])
    pred = np.argmax(forward(model, images), axis=1)
    hits = int((pred == labels).sum())
    print("accuracy %.2f%% (%d of %d)" %
          (100.0 * hits / len(labels), hits, len(labels)))
    if len(argv) == 6:
        np.savetxt(argv[5], pred, fmt="%d")


if __name__ == "__main__":
    main(sys.argv)
