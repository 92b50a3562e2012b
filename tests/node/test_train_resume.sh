#!/bin/bash
# test_train_resume.sh GOSSIPNODE - checkpoints: a run stopped at step 100
# and resumed to 150 ends bit-identical (same test loss line) to one run
# straight to 150 (one BLIS thread); --fresh starts over; a checkpoint of
# another model is refused with exit 1; quasi-global momentum resumes
# bit-identical as well, a checkpoint of the other momentum kind is
# converted and Adam's is refused; SIGTERM writes a final checkpoint and
# exits 0. Real Fashion-MNIST (skipped, 77, when absent).
set -u
bin=${1:?usage: test_train_resume.sh GOSSIPNODE}
data=/usr/share/datasets/fashion-mnist
[ -d "$data" ] || { echo "SKIP: no $data"; exit 77; }
tmp=$(mktemp -d /tmp/gn-resume.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# const rate: a cosine schedule spans --steps, which differs between the
# halves and the straight run by design
common=(--threads 1 --seed 5 --batch 64 --eval-every 50 --log-level info
        --lr-schedule const)

# One run straight to step 150 (in $tmp/Ps) and one stopped at 100 and
# resumed to 150 (in $tmp/Pk), with the extra arguments: the evaluations
# at step 150 must match. The train window differs (the resumed run saw 50
# steps, not 150): compare the test loss and accuracy only.
halves() {
        local label=$1 p=$2 want got
        shift 2
        "$bin" "${common[@]}" "$@" --steps 150 --checkpoint-dir "$tmp/${p}s" \
                >"$tmp/${p}s.log" 2>&1 || fail "$label: straight run"
        "$bin" "${common[@]}" "$@" --steps 100 --checkpoint-dir "$tmp/${p}k" \
                >"$tmp/${p}a.log" 2>&1 || fail "$label: first half"
        [ -f "$tmp/${p}k/model.ckpt" ] ||
                fail "$label: no checkpoint after the first half"
        "$bin" "${common[@]}" "$@" --steps 150 --checkpoint-dir "$tmp/${p}k" \
                >"$tmp/${p}b.log" 2>&1 || fail "$label: second half"
        grep -q "from step 100" "$tmp/${p}b.log" ||
                fail "$label: did not resume at step 100"
        grep -q "after 150 steps" "$tmp/${p}b.log" ||
                fail "$label: resumed run did not stop at 150"
        want=$(grep "eval .* step 150 " "$tmp/${p}s.log")
        got=$(grep "eval .* step 150 " "$tmp/${p}b.log")
        echo "$label straight: $want"
        echo "$label resumed:  $got"
        [ -n "$want" ] && [ "${want#*test loss}" = "${got#*test loss}" ] ||
                fail "$label: resumed run differs from the straight run"
}
halves local l
# quasi-global momentum (its state: m and the parameters the last step
# left) resumes bit-identical too
qg=(--momentum-kind quasi-global)
halves quasi-global q "${qg[@]}"
[ "$(sed -n 's/.*step 150 .*test loss//p' "$tmp/qs.log")" != \
        "$(sed -n 's/.*step 150 .*test loss//p' "$tmp/ls.log")" ] ||
        fail "quasi-global = local momentum?"

# --fresh ignores the checkpoint
"$bin" "${common[@]}" --steps 10 --checkpoint-dir "$tmp/lk" --fresh \
        >"$tmp/fresh.log" 2>&1 || fail "--fresh run"
grep -q "from step 0" "$tmp/fresh.log" || fail "--fresh did not start at 0"

# another model's checkpoint: refused, exit 1, one line naming the file
"$bin" "${common[@]}" --steps 10 --checkpoint-dir "$tmp/lk" \
        --model 784-64-10 >"$tmp/mis.out" 2>"$tmp/mis.err"
rc=$?
cat "$tmp/mis.err"
[ "$rc" -eq 1 ] && grep -q "model.ckpt" "$tmp/mis.err" &&
        [ "$(wc -l <"$tmp/mis.err")" -eq 1 ] || fail "mismatch: status $rc"

# a checkpoint of the other momentum kind is taken over (converted), both
# ways; Adam's state, as long as the quasi-global one, is refused
"$bin" "${common[@]}" "${qg[@]}" --steps 160 --checkpoint-dir "$tmp/ls" \
        >"$tmp/conv.log" 2>&1 || fail "local -> quasi-global"
grep -q "from step 150" "$tmp/conv.log" || fail "local -> quasi-global: no resume"
"$bin" "${common[@]}" --steps 110 --checkpoint-dir "$tmp/qk" \
        >"$tmp/conv2.log" 2>&1 || fail "quasi-global -> local"
grep -q "from step 150" "$tmp/conv2.log" || fail "quasi-global -> local: no resume"
"$bin" "${common[@]}" --optimizer adam --steps 5 --checkpoint-dir "$tmp/ad" \
        >"$tmp/ad.log" 2>&1 || fail "adam run"
"$bin" "${common[@]}" "${qg[@]}" --steps 10 --checkpoint-dir "$tmp/ad" \
        >"$tmp/ad.out" 2>"$tmp/ad.err"
rc=$?
cat "$tmp/ad.err"
[ "$rc" -eq 1 ] && grep -q "Adam" "$tmp/ad.err" &&
        [ "$(wc -l <"$tmp/ad.err")" -eq 1 ] || fail "adam -> quasi-global: status $rc"

# SIGTERM: final checkpoint, exit 0, stop reason "signal"
"$bin" "${common[@]}" --steps 1000000 --checkpoint-dir "$tmp/sig" \
        --event-log "$tmp/sig.jsonl" >"$tmp/sig.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
        grep -q '"ev":"step"\|"ev":"eval"' "$tmp/sig.jsonl" 2>/dev/null && break
        sleep 0.1
done
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] || fail "SIGTERM: exit status $rc"
grep -q '"ev":"stop","reason":"signal"' "$tmp/sig.jsonl" ||
        fail "SIGTERM: no stop event with reason signal"
[ -f "$tmp/sig/model.ckpt" ] || fail "SIGTERM: no final checkpoint"
step=$(sed -n 's/.*"ev":"stop","reason":"signal","step":\([0-9]*\).*/\1/p' \
        "$tmp/sig.jsonl")
"$bin" "${common[@]}" --steps $((step + 1)) --checkpoint-dir "$tmp/sig" \
        >"$tmp/sig2.log" 2>&1 || fail "resume after SIGTERM"
grep -q "from step $step" "$tmp/sig2.log" ||
        fail "SIGTERM checkpoint is not at the stop step $step"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all resume checks passed"
