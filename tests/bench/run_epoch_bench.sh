#!/usr/bin/env bash
# Whole-process one-epoch run, ours vs PyTorch, start to exit on both
# sides: `gossipnode --epochs 1` (MLP 784-512-10, batch 100, SGD momentum
# 0.9, lr 0.05 cosine; loads Fashion-MNIST, trains one epoch, evaluates the
# test set, exits) against `torch_train.py --epochs 1` with the same model,
# batch and optimizer (interpreter start and `import torch` included), at 1
# and 2 threads each.  Ours uses the cached kernel choice (the cache is
# primed first, as a machine's first start would); `ours-probe` measures the
# kernels again in every run (`--blis-arch probe`: a first start's cost).
# Configurations interleaved, `rounds` times; prints every wall time, each
# configuration's median, the ratios of medians and the median of the
# per-round ratios (our best thread count against PyTorch's).
# PyTorch's 2-thread runs collapse when the cores are busy (its OpenMP
# threads spin); GN_TORCH_THREADS="1" leaves them out (default "1 2";
# GN_OURS_THREADS likewise).
# Usage: run_epoch_bench.sh BUILD_DIR [rounds]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [rounds]}
rounds=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
node=$(find "$build" -name gossipnode -type f -perm -u+x | head -1)
out=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$log"' EXIT

# wall WHO ROUND THREADS CMD...: runs CMD, appends "WHO t=THREADS r=ROUND s"
wall() {
        local who=$1 r=$2 t=$3 t0 t1
        shift 3
        t0=$(date +%s.%N)
        "$@" >"$log" 2>&1
        t1=$(date +%s.%N)
        echo "$who t=$t r=$r $(awk -v a="$t0" -v b="$t1" 'BEGIN {
                printf "%.3f", b - a }') $(grep -Eo 'test acc(uracy)? [0-9.]+%|test_acc [0-9.]+' "$log" | tail -1 || true)" |
                tee -a "$out"
}
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "kernel: $("$node" --version | tail -1)"
echo "load before: $(uptime)"
for r in $(seq "$rounds"); do
        for t in ${GN_OURS_THREADS:-1 2}; do
                wall ours "$r" "$t" "$node" --epochs 1 --threads "$t"
        done
        for t in ${GN_TORCH_THREADS:-1 2}; do
                wall torch "$r" "$t" /usr/bin/python3 "$here/torch_train.py" \
                        --spec 784-512-10 --epochs 1 --threads "$t"
        done
        wall ours-probe "$r" 1 "$node" --epochs 1 --blis-arch probe
done
echo "load after: $(uptime)"
# median wall time of WHO at THREADS; 1e9 (never best) if not run
med() {
        { grep "^$1 t=$2 " "$out" || true; } | awk '{ print $4 }' | sort -n |
                awk '{ v[NR] = $1 } END { if (NR == 0) print 1e9;
                        else if (NR % 2) print v[(NR + 1) / 2];
                        else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
o1=$(med ours 1) o2=$(med ours 2) t1=$(med torch 1) t2=$(med torch 2)
p1=$(med ours-probe 1)
# per-round ratio: PyTorch's faster thread count over ours' faster one
paired=$(awk '{ k = $1 " " $3; if (!(k in v) || $4 < v[k]) v[k] = $4 }
        END { for (k in v) { split(k, a, " "); if (a[1] == "ours") o[a[2]] = v[k];
                else if (a[1] == "torch") t[a[2]] = v[k] }
              for (r in o) print t[r] / o[r] }' "$out" | sort -n |
        awk '{ v[NR] = $1 } END { printf "%.2f (", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                for (i = 1; i <= NR; i++) printf "%s%.2f", (i > 1 ? ", " : ""), v[i]; printf ")" }')
awk -v o1="$o1" -v o2="$o2" -v t1="$t1" -v t2="$t2" -v p1="$p1" \
        -v n="$rounds" -v paired="$paired" 'BEGIN {
        ob = o1 < o2 ? o1 : o2; tb = t1 < t2 ? t1 : t2
        printf "medians of %d rounds (s, start to exit): ours 1 thread %.2f, 2 threads %.2f; ours re-probing %.2f; torch 1 thread %.2f, 2 threads %.2f\n", n, o1, o2, p1, t1, t2
        printf "torch best / ours best %.2f (1 thread %.2f, 2 threads %.2f; ours re-probing vs torch best %.2f); per-round pairs %s\n", tb / ob, t1 / o1, t2 / o2, tb / p1, paired
}'
