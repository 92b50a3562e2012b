#!/usr/bin/env bash
# Training throughput, ours vs PyTorch, in the same run: MLP 784-512-10,
# batch 100, SGD momentum, synthetic data, 1 and 2 threads each.  Ours with
# n threads = nn_threads_set(n): the batch split into n chunks, one serial-
# BLIS GEMM stream per thread (docs/nn.md, "Threads").  The four
# configurations run interleaved, `rounds` times, so that a burst of load
# from elsewhere hits all of them alike; each one's best round counts.
# Prints every line, the best of each configuration, and the ratios of our
# best to PyTorch's best (and at equal thread counts).  Timing on a shared
# machine is noisy: compare numbers from one run only, and note `uptime`.
# Usage: run_mlp_bench.sh BUILD_DIR [steps] [rounds]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [steps] [rounds]}
steps=${2:-2000}
rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(find "$build" -name bench_mlp -type f -perm -u+x | head -1)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "load before: $(uptime)"
for r in $(seq "$rounds"); do
        for t in 1 2; do
                echo "ours round=$r $("$bin" --threads "$t" --steps "$steps")" | tee -a "$out"
                echo "$(/usr/bin/python3 "$here/torch_mlp.py" --threads "$t" \
                        --steps "$steps") round=$r" | tee -a "$out"
        done
done
echo "load after: $(uptime)"
# best WHO THREADS: the highest samples/s of that configuration
best() {
        grep "^$1 .*threads=$2 " "$out" |
                sed -n 's/.*samples_per_s=\([0-9]*\).*/\1/p' | sort -n | tail -1
}
o1=$(best ours 1) o2=$(best ours 2) t1=$(best torch 1) t2=$(best torch 2)
awk -v o1="$o1" -v o2="$o2" -v t1="$t1" -v t2="$t2" 'BEGIN {
        ob = o1 > o2 ? o1 : o2; tb = t1 > t2 ? t1 : t2
        printf "best of %s rounds: ours 1 thread %d, 2 threads %d; torch 1 thread %d, 2 threads %d samples/s\n", "'"$rounds"'", o1, o2, t1, t2
        printf "ratio at 1 thread %.2f, at 2 threads %.2f, best vs best %.2f\n", o1 / t1, o2 / t2, ob / tb
}'
