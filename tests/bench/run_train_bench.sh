#!/usr/bin/env bash
# Full Fashion-MNIST training, ours vs PyTorch with the same spec and
# hyper-parameters, one after the other in the same run; peak RSS of ours
# from /usr/bin/time -v.  Prints the per-epoch lines and both result lines.
# Ours runs the kernels gossipnode's probe chose (`gossipnode --version`,
# cached per machine), as a node would; GN_BLIS_ARCH=blis runs BLIS's own.
# Usage: run_train_bench.sh BUILD_DIR mlp|cnn [threads]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR mlp|cnn [threads]}
which=${2:-mlp}
threads=${3:-1}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(find "$build" -name bench_train -type f -perm -u+x | head -1)
case "$which" in
mlp) args=(--spec 784-512-10 --epochs 15 --lr 0.05 --target 0.89) ;;
cnn) args=(--spec cnn --epochs 12 --lr 0.05 --target 0.915) ;;
*) echo "usage: $0 BUILD_DIR mlp|cnn [threads]" >&2; exit 2 ;;
esac
arch=${GN_BLIS_ARCH:-$("$build/node/gossipnode" --version |
        sed -n 's/.*kernels \([a-z0-9_]*\).*/\1/p')}
echo "ours: kernels ${arch:?no kernel choice from gossipnode --version}"
tm=$(mktemp)
trap 'rm -f "$tm"' EXIT
/usr/bin/time -v -o "$tm" "$bin" "${args[@]}" --threads "$threads" \
        --blis-arch "$arch"
grep -E "Maximum resident|Elapsed" "$tm"
/usr/bin/python3 "$here/torch_train.py" "${args[@]}" --threads "$threads"
