#!/bin/bash
# test_cli_errors.sh GOSSIPNODE - every bad configuration gives exactly one
# line on stderr, naming the culprit, and a non-zero exit status (2 for a
# bad command line, 1 for a bad file or environment), and --help/--version
# succeed. Needs the Fashion-MNIST data set for the cases that get past
# loading it (skipped, exit 77, when it is absent).
set -u
bin=${1:?usage: test_cli_errors.sh GOSSIPNODE}
data=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d /tmp/gn-cli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect STATUS PATTERN ARGS... : run, check status, one stderr line
# matching PATTERN (grep -E), nothing on stdout.
expect() {
        local want=$1 pat=$2
        shift 2
        "$bin" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
        local rc=$? lines
        lines=$(wc -l <"$tmp/err")
        if [ "$rc" -ne "$want" ] || [ "$lines" -ne 1 ] ||
                ! grep -Eq -- "$pat" "$tmp/err" || [ -s "$tmp/out" ]; then
                echo "FAIL: gossipnode $* -> status $rc (want $want), $lines" \
                        "stderr lines (want 1 matching '$pat'):"
                sed 's/^/    /' "$tmp/err" "$tmp/out"
                fails=$((fails + 1))
        else
                echo "ok: $* -> $rc: $(cat "$tmp/err")"
        fi
}

# --- command line: exit 2 ---------------------------------------------------
expect 2 '--batch' --batch 0
expect 2 '--batch' --batch ten
expect 2 '--lr' --lr -0.1
expect 2 '--lr' --lr nan
expect 2 '--momentum' --momentum 1.5
expect 2 '--optimizer' --optimizer lbfgs
expect 2 '--lr-schedule' --lr-schedule linear
expect 2 '--shard' --shard 3/3
expect 2 '--adapt.*on, off or cpu' --adapt link
expect 2 '--shard' --shard 1
expect 2 '--partition' --partition dirichlet:0
expect 2 '--partition' --partition classes:0
expect 2 '--epochs' --epochs 0
expect 2 '--steps' --steps -5
expect 2 '--time-budget' --time-budget 0
expect 2 '--target-acc' --target-acc 150
expect 2 '--codec' --codec topk:0
expect 2 '--codec' --codec bf16
expect 2 '--listen' --listen 127.0.0.1
expect 2 '--listen' --listen 127.0.0.1:99999
expect 2 '--advertise' --advertise 10.0.0.1
expect 2 '--log-level' --log-level verbose
expect 2 '--name' --name 'two words'
expect 2 '--threads' --threads 0
expect 2 '--nope' --nope
expect 2 '--batch' --batch
expect 2 'stray' stray
expect 2 '--key' --peers "$tmp/peers"
expect 2 '--checkpoint-dir' --checkpoint-every 10

"$bin" --help >"$tmp/out" 2>&1 && grep -q -- '--target-acc' "$tmp/out" ||
        { echo "FAIL: --help"; fails=$((fails + 1)); }
"$bin" --version >"$tmp/out" 2>&1 && grep -q '^gossipnode ' "$tmp/out" ||
        { echo "FAIL: --version"; fails=$((fails + 1)); }

# --- environment: exit 1 -----------------------------------------------------
expect 1 "$tmp/nodata" --data "$tmp/nodata" --steps 1
mkdir -p "$tmp/emptydata"
expect 1 "emptydata" --data "$tmp/emptydata" --steps 1
expect 1 '--model' --model 784-banana-10 --data "$data" --steps 1

if [ ! -d "$data" ]; then
        echo "SKIP: $data missing (install dataset-fashion-mnist)"
        [ "$fails" -eq 0 ] && exit 77
        exit 1
fi

keygen=$(dirname "$bin")/../tools/gossip-keygen
if [ -x "$keygen" ]; then
        "$keygen" --out "$tmp/k0" --addr 127.0.0.1:1 --name a >/dev/null 2>&1
        "$keygen" --out "$tmp/k1" --addr 127.0.0.1:2 --name b >/dev/null 2>&1
        cat "$tmp/k0.pub" "$tmp/k1.pub" >"$tmp/peers"
        # missing peers file
        expect 1 "$tmp/missing" --peers "$tmp/missing" --key "$tmp/k0" \
                --steps 1
        # malformed peers file: a line number in the message
        printf '127.0.0.1:5 notakey x\n' >"$tmp/badpeers"
        expect 1 "badpeers:1" --peers "$tmp/badpeers" --key "$tmp/k0" \
                --steps 1
        # world-readable key
        cp "$tmp/k0" "$tmp/kopen" && chmod 0644 "$tmp/kopen"
        expect 1 "kopen" --peers "$tmp/peers" --key "$tmp/kopen" --steps 1
        # missing key
        expect 1 "$tmp/nokey" --peers "$tmp/peers" --key "$tmp/nokey" \
                --steps 1
        # a wildcard --listen and nothing else to tell peers (issue 30):
        # refused at start, naming the fix; a wildcard --advertise too
        cp "$tmp/k1.pub" "$tmp/peers1"
        expect 1 "--advertise ADDR:PORT" --peers "$tmp/peers1" \
                --key "$tmp/k0" --listen 0.0.0.0:7955 --steps 1
        expect 1 "--advertise: '0.0.0.0:7955' is a wildcard" \
                --peers "$tmp/peers" --key "$tmp/k0" \
                --advertise 0.0.0.0:7955 --steps 1
        # port in use: a UDP socket holds it
        port=$(/usr/bin/python3 -c '
import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        /usr/bin/python3 -c '
import socket, sys, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", int(sys.argv[1])))
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", int(sys.argv[1]))); t.listen()
time.sleep(60)' "$port" &
        holder=$!
        sleep 0.5
        expect 1 "in use" --peers "$tmp/peers" --key "$tmp/k0" \
                --listen 127.0.0.1:"$port" --steps 1
        kill "$holder" 2>/dev/null
        wait "$holder" 2>/dev/null
else
        echo "note: $keygen not built: key/peers cases skipped"
fi

# --check-config (issue 30 #3): the operations guide's step-4 config,
# without what the unit adds (--key, --checkpoint-dir), is judged OK and
# its settings printed; each kind of bad setting exits 1 with one line.
# check STATUS PATTERN ARGS...: status, and PATTERN (grep -E) in stdout
# for 0 or in the one stderr line for 1.
check() {
        local want=$1 pat=$2 rc lines where
        shift 2
        "$bin" --check-config "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
        rc=$?
        lines=$(wc -l <"$tmp/err")
        where="$tmp/out"
        [ "$want" -ne 0 ] && where="$tmp/err"
        if [ "$rc" -ne "$want" ] || ! grep -Eq -- "$pat" "$where" ||
                { [ "$want" -ne 0 ] && [ "$lines" -ne 1 ]; } ||
                { [ "$want" -eq 0 ] && [ -s "$tmp/err" ]; }; then
                echo "FAIL: gossipnode --check-config $* -> status $rc" \
                        "(want $want, '$pat'):"
                sed 's/^/    /' "$tmp/out" "$tmp/err"
                fails=$((fails + 1))
        else
                echo "ok: --check-config $* -> $rc: $(tail -1 "$where")"
        fi
}
if [ -x "$keygen" ]; then
        "$keygen" --out "$tmp/g0" --addr 10.0.0.11:7955 --name pi-kitchen \
                >/dev/null 2>&1
        cat "$tmp/g0.pub" "$tmp/k1.pub" >"$tmp/gpeers"
        cat >"$tmp/g.conf" <<EOF
peers = $tmp/gpeers
listen = 0.0.0.0:7955
shard = 0/3            # 1/3 on pi-garage, 2/3 on pi-attic
epochs = 20
checkpoint-every = 1000
metrics = 127.0.0.1:7956
event-log = $tmp/nostate/events.jsonl
EOF
        check 0 '^config +OK$' --config "$tmp/g.conf"
        check 0 '^model +784-512-10: 407050 parameters' --config "$tmp/g.conf"
        check 0 '^advertise +10\.0\.0\.11:7955 \(its peers-file line\)' \
                --config "$tmp/g.conf" --key "$tmp/g0"
        check 1 '--batch' --config "$tmp/g.conf" --batch x
        cp "$tmp/g.conf" "$tmp/bad.conf" && echo 'lr = fast' >>"$tmp/bad.conf"
        check 1 'bad\.conf:8: --lr' --config "$tmp/bad.conf"
        check 1 "badpeers:1" --config "$tmp/g.conf" --peers "$tmp/badpeers"
        check 1 "nodata" --config "$tmp/g.conf" --data "$tmp/nodata"
        check 1 "--model" --config "$tmp/g.conf" --model 784-banana-10
        check 1 "--advertise ADDR:PORT" --config "$tmp/g.conf" --key "$tmp/k0"
        check 1 "--metrics: 'nohost.invalid:1'" --config "$tmp/g.conf" \
                --metrics nohost.invalid:1
        # with an authority and no --seed the seed is the authority's
        # (protocol.md 11.1); --seed still wins
        "$keygen" --ca --out "$tmp/ca.key" >/dev/null 2>&1
        check 0 '^seed +[0-9]+ \(the authority.s\)$' --config "$tmp/g.conf" \
                --authority "$tmp/ca.pub"
        check 0 '^seed +5 \(--seed\)$' --config "$tmp/g.conf" \
                --authority "$tmp/ca.pub" --seed 5
        # the list the node saved in --checkpoint-dir is the one read
        # (no --crl): its sequence and serials shown; a forged one refused
        mkdir -p "$tmp/ckd"
        check 0 '^crl +.*/ckd/authority\.crl: none yet' --config "$tmp/g.conf" \
                --authority "$tmp/ca.pub" --checkpoint-dir "$tmp/ckd"
        "$keygen" --revoke --ca-key "$tmp/ca.key" --serial 7 \
                --crl "$tmp/ckd/authority.crl" >/dev/null 2>&1
        check 0 '^crl +.*/ckd/authority\.crl: sequence 1, 1 serial revoked' \
                --config "$tmp/g.conf" --authority "$tmp/ca.pub" \
                --checkpoint-dir "$tmp/ckd"
        printf 'x' >>"$tmp/ckd/authority.crl"
        check 1 'authority\.crl' --config "$tmp/g.conf" \
                --authority "$tmp/ca.pub" --checkpoint-dir "$tmp/ckd"
fi

# corrupt checkpoint: refused with the loader's message, never ignored
mkdir -p "$tmp/ck"
head -c 200 /dev/urandom >"$tmp/ck/model.ckpt"
expect 1 "model.ckpt" --checkpoint-dir "$tmp/ck" --steps 1

if [ "$fails" -ne 0 ]; then
        echo "$fails case(s) failed"
        exit 1
fi
echo "all cases passed"
