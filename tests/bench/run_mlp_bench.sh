#!/usr/bin/env bash
# Training throughput, ours vs PyTorch, in the same run: MLP 784-512-10,
# batch 100, SGD momentum, synthetic data, 1 and 2 threads each.  Ours runs
# with the BLIS build it was linked with (default: serial, where 2 threads
# = 1) and, if installed, with the pthread and openmp builds swapped in via
# LD_LIBRARY_PATH (same ABI/soname).  Prints every line and the ratio of our
# best to PyTorch's best.  Timing on a shared machine is noisy: compare
# numbers from one run only.
# Usage: run_mlp_bench.sh BUILD_DIR [steps]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [steps]}
steps=${2:-2000}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(find "$build" -name bench_mlp -type f -perm -u+x | head -1)
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for t in 1 2; do
        echo "ours linked-build $("$bin" --threads "$t" --steps "$steps")" | tee -a "$out"
        for v in pthread openmp; do
                d=/usr/lib/$arch/blis-$v
                [ -e "$d/libblis.so.4" ] || continue
                # A threaded BLIS on a busy host can crawl: cap the wait.
                r=$(LD_LIBRARY_PATH=$d timeout 60 "$bin" --threads "$t" \
                        --steps "$steps" || echo "timeout samples_per_s=0")
                echo "ours blis-$v $r" | tee -a "$out"
        done
        echo "$(/usr/bin/python3 "$here/torch_mlp.py" --threads "$t" --steps "$steps")" | tee -a "$out"
done
best() { grep "$1" "$out" | sed -n 's/.*samples_per_s=\([0-9]*\).*/\1/p' | sort -n | tail -1; }
ours=$(best '^ours')
torch=$(best '^torch')
awk -v o="$ours" -v t="$torch" 'BEGIN { printf "best ours %d samples/s, best torch %d samples/s, ratio %.2f\n", o, t, o / t }'
