#!/usr/bin/python3
"""test_import.py BUILD_DIR - gossip-import round trips and refusals.

Images are drawn here from GN_SEED (printed; set it to replay): folders of
8-bit grey PNG, RGB PNG with equal channels, P5 and P2 PGM (one with
maxval 255, one with 10, scaled), 6 rows x 5 columns so rows and columns
cannot be swapped unnoticed, and CSV files with and without a header and
--shape. Proves: the IDX files hold exactly the pixels and labels written
(classes in name order, files in name order), classes.txt names them, and
gossipnode trains on the result; each kind of bad input is refused with
exit 1, one line naming the file (and the CSV line), and no output files.
"""
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

build = sys.argv[1]
tool = os.path.join(build, "tools", "gossip-import")
node = os.path.join(build, "node", "gossipnode")
seed = int(os.environ.get("GN_SEED", time.time_ns() % 2**32))
print("GN_SEED=%d" % seed)
rng = random.Random(seed)
ROWS, COLS = 6, 5


def png(path, rows, colour=False, depth_ok=True):
    """Writes rows (lists of 0..255) as 8-bit grey or RGB PNG."""
    def chunk(kind, data):
        c = kind + data
        return struct.pack(">I", len(data)) + c + \
            struct.pack(">I", zlib.crc32(c) & 0xffffffff)
    h, w = len(rows), len(rows[0])
    raw = b"".join(b"\0" + bytes(v for p in r for v in
                                 ((p, p, p) if colour else (p,)))
                   for r in rows)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2 if colour else 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def pgm(path, rows, ascii_=False, maxval=255):
    h, w = len(rows), len(rows[0])
    with open(path, "wb") as f:
        if ascii_:
            f.write(b"P2\n# a comment\n%d %d\n%d\n" % (w, h, maxval))
            f.write(" ".join(str(p) for r in rows for p in r).encode() + b"\n")
        else:
            f.write(b"P5 %d %d %d\n" % (w, h, maxval))
            f.write(bytes(p for r in rows for p in r))


def image(maxval=255):
    return [[rng.randrange(maxval + 1) for _ in range(COLS)]
            for _ in range(ROWS)]


def read_idx(path):
    with open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = struct.unpack(">%dI" % ndim, raw[4:4 + 4 * ndim])
    return dims, raw[4 + 4 * ndim:]


def run(*args):
    return subprocess.run([tool, *args], capture_output=True, text=True)


def make_folder(root, classes, per_class):
    """Class folders of mixed files; returns [(label, pixels)] in the
    order gossip-import must read them."""
    want = []
    for label, name in enumerate(classes):
        d = os.path.join(root, name)
        os.makedirs(d)
        for j in range(per_class):
            kind = j % 5
            fn = os.path.join(d, "img%03d" % j)
            if kind == 4:
                im = image(10)
                pgm(fn + ".pgm", im, ascii_=True, maxval=10)
                px = [(v * 255 + 5) // 10 for r in im for v in r]
            else:
                im = image()
                if kind == 0:
                    png(fn + ".png", im)
                elif kind == 1:
                    png(fn + ".PNG", im, colour=True)
                elif kind == 2:
                    pgm(fn + ".pgm", im)
                else:
                    pgm(fn + ".pgm", im, ascii_=True)
                px = [v for r in im for v in r]
            want.append((label, px))
    return want


def check_idx(out, prefix, want):
    dims, px = read_idx(os.path.join(out, prefix + "-images-idx3-ubyte"))
    ldims, labels = read_idx(os.path.join(out, prefix + "-labels-idx1-ubyte"))
    assert dims == (len(want), ROWS, COLS), dims
    assert ldims == (len(want),), ldims
    for i, (label, pixels) in enumerate(want):
        got = list(px[i * ROWS * COLS:(i + 1) * ROWS * COLS])
        assert got == pixels, "image %d: %s != %s" % (i, got, pixels)
        assert labels[i] == label, (i, labels[i], label)


def expect_fail(tmp, needle, *args):
    out = os.path.join(tmp, "fail-out")
    shutil.rmtree(out, ignore_errors=True)
    r = run("--out", out, *args)
    err = r.stderr.strip()
    assert r.returncode == 1, (args, r.returncode, err)
    assert len(err.splitlines()) == 1 and needle in err, (needle, err)
    assert not os.path.exists(out), "wrote output despite: " + err
    print("refused: " + err)


def test_folders(tmp):
    classes = ["cat", "dog", "emu"]
    train = make_folder(os.path.join(tmp, "train"), classes, 11)
    test = make_folder(os.path.join(tmp, "test"), classes, 4)
    out = os.path.join(tmp, "out")
    r = run("--out", out, "--train", os.path.join(tmp, "train"),
            "--test", os.path.join(tmp, "test"))
    assert r.returncode == 0, r.stderr
    print(r.stdout.strip())
    check_idx(out, "train", train)
    check_idx(out, "t10k", test)
    with open(os.path.join(out, "classes.txt")) as f:
        assert f.read() == "0 cat\n1 dog\n2 emu\n"
    return out


def test_csv(tmp):
    rows = [(rng.randrange(10), [rng.randrange(256) for _ in range(16)])
            for _ in range(20)]
    path = os.path.join(tmp, "d.csv")
    with open(path, "w") as f:
        f.write("label," + ",".join("p%d" % i for i in range(16)) + "\n")
        for label, px in rows:
            f.write("%d,%s\r\n" % (label, ",".join(map(str, px))))
    out = os.path.join(tmp, "csv-out")
    r = run("--out", out, "--train", path)
    assert r.returncode == 0, r.stderr
    dims, px = read_idx(os.path.join(out, "train-images-idx3-ubyte"))
    _, labels = read_idx(os.path.join(out, "train-labels-idx1-ubyte"))
    assert dims == (20, 4, 4), dims
    assert list(px) == [v for _, p in rows for v in p]
    assert list(labels) == [l for l, _ in rows]
    r = run("--out", out, "--train", path, "--shape", "2x8")
    assert r.returncode == 0, r.stderr
    assert read_idx(os.path.join(out, "train-images-idx3-ubyte"))[0] == \
        (20, 2, 8)


def test_refusals(tmp):
    bad = os.path.join(tmp, "bad")
    make_folder(bad, ["a", "b"], 3)
    odd = os.path.join(bad, "b", "zz.pgm")
    pgm(odd, [[1] * (COLS + 1)] * ROWS)
    expect_fail(tmp, odd + ": 6 rows x 6 columns, but earlier images are 6 x 5",
                "--train", bad)
    os.unlink(odd)
    junk = os.path.join(bad, "a", "broken.png")
    with open(junk, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    expect_fail(tmp, junk + ": not a readable PNG", "--train", bad)
    os.unlink(junk)
    txt = os.path.join(bad, "a", "notes.txt")
    open(txt, "w").close()
    expect_fail(tmp, txt + ": not a .png or .pgm file", "--train", bad)
    os.unlink(txt)
    other = os.path.join(tmp, "other")
    make_folder(other, ["a", "c"], 2)
    expect_fail(tmp, os.path.join(other, "c") + ": class 'c' is not class 1",
                "--train", bad, "--test", other)
    csv = os.path.join(tmp, "bad.csv")
    with open(csv, "w") as f:
        f.write("1,0,0,0,0\n2,1,2,3,4\n3,1,2,256,4\n")
    expect_fail(tmp, csv + ":3: field 4 is not a pixel value", "--train", csv)
    with open(csv, "w") as f:
        f.write("1,0,0,0,0\n2,1,2,3\n")
    expect_fail(tmp, csv + ":2: 3 pixels, want 4", "--train", csv)
    with open(csv, "w") as f:
        f.write("1,0,0,0\n")
    expect_fail(tmp, csv + ":1: 3 pixels is not a square image", "--train",
                csv)
    expect_fail(tmp, "neither a directory", "--train",
                os.path.join(tmp, "nothing.bin"))


def test_train_on_it(out):
    """gossipnode reads the imported directory as it reads Fashion-MNIST
    (a model has at least 10 outputs: IDX sets count at least 10 classes)."""
    r = subprocess.run([node, "--data", out, "--model", "30-16-10",
                        "--batch", "5", "--steps", "6", "--threads", "1",
                        "--log-level", "warn"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


tmp = tempfile.mkdtemp(prefix="gn-import.")
try:
    out = test_folders(tmp)
    test_csv(tmp)
    test_refusals(tmp)
    if os.path.exists(node):
        test_train_on_it(out)
    print("ok")
finally:
    shutil.rmtree(tmp)
