#!/bin/bash
# test_train_mnist.sh GOSSIPNODE - the default MLP (784-512-10, SGD with
# momentum, batch 100) trains alone for one epoch on the real Fashion-MNIST
# and reaches at least 80% test accuracy; the event log has one start, at
# least one eval and a stop with reason "epochs", all parseable JSON.
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
