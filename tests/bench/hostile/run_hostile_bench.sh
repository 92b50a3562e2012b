#!/bin/sh
# run_hostile_bench.sh BUILD [STEPS] - the full-length hostile-peer
# benchmark (issue 11, docs/reliability.md): for each attack alone, then all
# six in turn, two honest nodes train STEPS (default 1500, the cluster
# benchmark's length) clean and then attacked, robust merge on; then all six
# with robust merge off; then the one-time poisoning (model health). Every
# run is tests/node/test_hostile_run.py; this prints each run's figures.
# Accuracy, not time, is measured here, so load does not change the verdict
# (it does stretch the wall time). Run it under flock /work/bench.lock.
set -u
B=${1:?usage: run_hostile_bench.sh BUILD [STEPS]}
STEPS=${2:-1500}
T=$(dirname "$0")/../../node/test_hostile_run.py
run() {
        echo "== $*"
        /usr/bin/python3 "$T" "$B/node/gossipnode" "$B/tools/gossip-keygen" \
                "$B/tests/node/hostile_peer" --steps "$STEPS" "$@" 2>&1 |
                grep -E '^(n[01]|liar|FAIL|PASS|FAILED|#)'
}
# one attack alone: the per-reason asserts are for all six, so only the
# figures are printed (each n line: clean, attacked, diff, rollbacks, counts)
for a in huge flip noise scale10 stale nan; do
        run --attacks "$a" --no-assert
done
run --attacks all
run --attacks all --robust off --no-assert
run --health
