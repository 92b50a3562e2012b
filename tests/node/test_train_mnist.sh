#!/bin/bash
# test_train_mnist.sh GOSSIPNODE - the default MLP (784-512-10, SGD with
# momentum, batch 100) trains alone for one epoch on the real Fashion-MNIST
# and reaches at least 80% test accuracy; the event log has one start, at
# least one eval and a stop with reason "epochs", all parseable JSON.
# Then a model that learns fast and is evaluated rarely (--lr 0.5, first
# evaluation at its end, step 200: its weights pass 2x the starting RMS
# within 20 steps) is never rolled back by model health (nn/health.h,
# "norm": the old rule rolled it back to its starting model 4 times).
# Under an emulator (GN_TEST_SLOWDOWN > 1, cmake/Emulator.cmake) only the
# first part runs: it is what exercises the target's BLIS kernels over a
# whole epoch; the second checks model health's rule, the same C on every
# target, and its 200 steps, data load and evaluation are a third of the
# test's time (natively 0.8 of 2.2 s; emulated in CI, 504 s with both,
# 358 s with the first alone). The native ctest runs both.
set -u
bin=${1:?usage: test_train_mnist.sh GOSSIPNODE}
data=/usr/share/datasets/fashion-mnist
[ -d "$data" ] || { echo "SKIP: no $data"; exit 77; }
tmp=$(mktemp -d /tmp/gn-mnist.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$bin" --epochs 1 --threads 1 --seed 1 --event-log "$tmp/ev.jsonl" \
        --name solo 2>&1 | tee "$tmp/log" | grep -E "eval|done"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
/usr/bin/python3 - "$tmp/ev.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
kinds = [e["ev"] for e in ev]
assert all(e["node"] == "solo" and isinstance(e["t_ms"], int) for e in ev)
assert kinds[0] == "start" and kinds[-1] == "stop", kinds
stop = ev[-1]
assert stop["reason"] == "epochs" and stop["epoch"] == 1, stop
assert stop["step"] == 600, stop
evals = [e for e in ev if e["ev"] == "eval"]
assert len(evals) == 1, evals
acc = evals[-1]["test_acc"]
print("test accuracy after one epoch: %.2f%% (want >= 80)" % acc)
sys.exit(0 if acc >= 80.0 else 1)
PY
[ $? -eq 0 ] || exit 1
case ${GN_TEST_SLOWDOWN:-1} in
1 | 1.0 | "") ;;
*)
        echo "emulated: the --lr 0.5 model-health run is left to the native ctest"
        exit 0
        ;;
esac
"$bin" --steps 200 --lr 0.5 --eval-every 1000 --threads 1 --seed 1 \
        --name fast >"$tmp/fast.log" 2>&1 ||
        { cat "$tmp/fast.log"; echo "FAIL: --lr 0.5 run failed"; exit 1; }
grep "eval epoch" "$tmp/fast.log"
if grep "model health" "$tmp/fast.log"; then
        echo "FAIL: a healthy fast-learning model was rolled back"
        exit 1
fi
grep -q "eval epoch 1 step 200 " "$tmp/fast.log" ||
        { echo "FAIL: no evaluation at step 200"; exit 1; }
