#!/usr/bin/env bash
# tsan_cluster.sh BUILD - a short 3-node cluster from a GN_TSAN=ON build
# (tools/setup.sh test runs it): the nodes exchange model slices, fp16
# gradients and raw samples (--shuffle-samples), so every hand-off path
# between the loop and the training thread runs; any ThreadSanitizer report fails the run. Exit 0 when every node exited 0
# and no log holds a report.
set -euo pipefail
build=${1:?usage: tsan_cluster.sh BUILD}
work=$(mktemp -d /tmp/gn-tsan-XXXXXX)
trap 'rm -rf "$work"' EXIT
# every report is fatal and names itself in the node's log
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
rc=0
"$build/tools/gossip-cluster" --nodes 3 --build "$build" --workdir "$work" \
        --steps 150 -- --eval-every 50 --codec fp16 --seed 3 \
        --shuffle-samples 4 \
        >"$work/cluster.out" 2>&1 || rc=$?
if grep -l "ThreadSanitizer" "$work"/node*/node.log "$work/cluster.out" \
        >/dev/null 2>&1; then
        grep -h -A30 "WARNING: ThreadSanitizer" "$work"/node*/node.log \
                "$work/cluster.out" | head -80
        echo "tsan_cluster: ThreadSanitizer reports (above)" >&2
        exit 1
fi
if [ "$rc" -ne 0 ]; then
        tail -40 "$work/cluster.out"
        echo "tsan_cluster: the cluster failed (exit $rc)" >&2
        exit 1
fi
[ "$(grep -l "done (steps)" "$work"/node*/node.log | wc -l)" -eq 3 ] || {
        tail -40 "$work/cluster.out"
        echo "tsan_cluster: not every node finished its steps" >&2
        exit 1
}
echo "tsan_cluster: 3 nodes, 150 steps, fp16 gradients + model averaging + sample shuffle: no ThreadSanitizer report"
