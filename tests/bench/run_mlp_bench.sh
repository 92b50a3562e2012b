#!/usr/bin/env bash
# Training throughput, ours vs PyTorch, in the same run: MLP 784-512-10,
# batch 100, SGD momentum, synthetic data, 1 and 2 threads each.  Ours with
# n threads = nn_threads_set(n): the batch split into n chunks, one serial-
# BLIS GEMM stream per thread (docs/nn.md, "Threads").  Ours runs twice per
# thread count: with the BLIS kernel set gossipnode's probe picks (measured
# afresh at the start: `gossipnode --blis-arch probe --version`) and with
# BLIS's own CPUID choice.  All six configurations run interleaved,
# `rounds` times, so that a burst of load from elsewhere hits all of them
# alike.  Prints every line, each configuration's median and best, and the
# ratios of medians: our best configuration to PyTorch's best, and at equal
# thread counts.  Timing on a shared machine is noisy: compare numbers from
# one run only, and note `uptime`.
# Usage: run_mlp_bench.sh BUILD_DIR [steps] [rounds]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [steps] [rounds]}
steps=${2:-2000}
rounds=${3:-5}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(find "$build" -name bench_mlp -type f -perm -u+x | head -1)
node=$(find "$build" -name gossipnode -type f -perm -u+x | head -1)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

probe=$("$node" --blis-arch probe --version | tail -1)
arch=$(sed -n 's/.*kernels \([a-z0-9]*\) .*/\1/p' <<<"$probe")
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "probe: $probe"
echo "load before: $(uptime)"
for r in $(seq "$rounds"); do
        for t in 1 2; do
                echo "probe round=$r $("$bin" --threads "$t" --steps "$steps" \
                        --blis-arch "$arch")" | tee -a "$out"
                echo "$(/usr/bin/python3 "$here/torch_mlp.py" --threads "$t" \
                        --steps "$steps") round=$r" | tee -a "$out"
                echo "blis round=$r $("$bin" --threads "$t" --steps "$steps" \
                        --blis-arch blis)" | tee -a "$out"
        done
done
echo "load after: $(uptime)"
# stat WHO THREADS median|best: samples/s of that configuration
stat() {
        grep "^$1 .*threads=$2 " "$out" |
                sed -n 's/.*samples_per_s=\([0-9]*\).*/\1/p' | sort -n |
                awk -v w="$3" '{ v[NR] = $1 } END {
                        if (w == "best") print v[NR];
                        else if (NR % 2) print v[(NR + 1) / 2];
                        else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
for w in median best; do
        p1=$(stat probe 1 $w) p2=$(stat probe 2 $w) b1=$(stat blis 1 $w)
        b2=$(stat blis 2 $w) t1=$(stat torch 1 $w) t2=$(stat torch 2 $w)
        awk -v w="$w" -v p1="$p1" -v p2="$p2" -v b1="$b1" -v b2="$b2" \
                -v t1="$t1" -v t2="$t2" -v a="$arch" 'BEGIN {
                pb = p1 > p2 ? p1 : p2; bb = b1 > b2 ? b1 : b2
                tb = t1 > t2 ? t1 : t2
                printf "%s of %s rounds (samples/s): ours %s 1 thread %d, 2 threads %d; ours BLIS-own 1 thread %d, 2 threads %d; torch 1 thread %d, 2 threads %d\n", w, "'"$rounds"'", a, p1, p2, b1, b2, t1, t2
                printf "%s ratios: ours(%s) best vs torch best %.2f (1 thread %.2f, 2 threads %.2f); ours(BLIS-own) best vs torch best %.2f; probe vs BLIS-own %.2f\n", w, a, pb / tb, p1 / t1, p2 / t2, bb / tb, pb / bb
        }'
done
