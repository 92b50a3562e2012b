#!/bin/bash
# test_train_determinism.sh GOSSIPNODE - with one BLIS thread, the same
# seed gives identical loss/accuracy lines (every evaluation, train loss of
# the window included), and another seed gives different ones (so the test
# can fail). The seed is GN_SEED if set (printed). Real Fashion-MNIST.
# Under an emulator (GN_TEST_SLOWDOWN > 1, cmake/Emulator.cmake) each run
# is 60 steps with 2 evaluations instead of 120 with 4: the evaluations
# over 10,000 test images are most of the work, and 2 of them compare
# the same lines (every evaluation's figures and the window's loss).
set -u
bin=${1:?usage: test_train_determinism.sh GOSSIPNODE}
data=/usr/share/datasets/fashion-mnist
[ -d "$data" ] || { echo "SKIP: no $data"; exit 77; }
seed=${GN_SEED:-42}
steps=120
case ${GN_TEST_SLOWDOWN:-1} in 1 | 1.0 | "") ;; *) steps=60 ;; esac
evals=$((steps / 30))
echo "# GN_SEED=$seed"
tmp=$(mktemp -d /tmp/gn-det.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
run() { # seed out
        "$bin" --threads 1 --seed "$1" --steps "$steps" --eval-every 30 \
                --batch 50 2>&1 | grep -E "eval|done" >"$2"
}
run "$seed" "$tmp/a"
run "$seed" "$tmp/b"
run $((seed + 1)) "$tmp/c"
cat "$tmp/a"
[ "$(grep -c eval "$tmp/a")" -eq "$evals" ] ||
        { echo "FAIL: want $evals evals"; exit 1; }
cmp -s "$tmp/a" "$tmp/b" || { echo "FAIL: same seed, different lines";
        diff "$tmp/a" "$tmp/b"; exit 1; }
cmp -s "$tmp/a" "$tmp/c" && { echo "FAIL: seeds $seed and $((seed + 1))" \
        "gave identical lines"; exit 1; }
echo "deterministic: identical for seed $seed, different for $((seed + 1))"
