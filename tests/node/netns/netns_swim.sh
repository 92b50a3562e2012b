#!/usr/bin/env bash
# netns_swim.sh - membership across a real partition and its heal (issue
# 11: "alive -> dead 6 s after heal, 3 of 3 times" in a namespace lab).
#
# Three namespaces on a bridge (10.232.0.1-3/24, inside them only), one
# swim_node each: SWIM on the real transport, frames signed and verified,
# each inbound connection's first frame checked by
# gossip_frame_authenticate. Then:
#   1. all three see each other alive;
#   2. iptables in node 2's namespace drops everything to and from nodes
#      0 and 1: {0,1} | {2}. After 45 s each side has the other dead (the
#      lone node 2 waits the full suspicion max, 24 s, after probes that
#      Lifeguard stretches to <= 8 s: <= 41 s; see test_swim.c);
#   3. the rules are flushed (the heal); for the next 30 s no node may
#      see any member go alive -> dead, and at the end all see all alive.
# Everything is created and deleted here (trap). Needs root; exits 77
# (skipped) with a message otherwise. Usage: netns_swim.sh PATH/TO/swim_node
set -u

bin=${1:?usage: netns_swim.sh PATH/TO/swim_node}
if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP: network-namespace test needs root"
        exit 77
fi
for t in ip iptables; do
        if ! command -v "$t" >/dev/null 2>&1; then
                echo "SKIP: $t not installed"
                exit 77
        fi
done

id=$$
hub=gnswH$id
ns=(gnsw0$id gnsw1$id gnsw2$id)
addr=(10.232.0.1 10.232.0.2 10.232.0.3)
port=7946
out=$(mktemp -d /tmp/gn-netns-swim.XXXXXX)
pids=()

cleanup() {
        for p in "${pids[@]}"; do
                kill -TERM "$p" 2>/dev/null
                wait "$p" 2>/dev/null
        done
        for n in "${ns[@]}" "$hub"; do
                ip netns del "$n" 2>/dev/null
        done
        rm -rf "$out"
}
trap cleanup EXIT

fail() {
        echo "FAIL: $*"
        for f in "$out"/*; do
                [ -f "$f" ] && { echo "--- $f"; cat "$f"; }
        done
        exit 1
}

if ! ip netns add "$hub" 2>"$out/err"; then
        echo "SKIP: cannot create network namespaces here: $(cat "$out/err")"
        exit 77
fi
ip -n "$hub" link add br0 type bridge || fail "bridge"
ip -n "$hub" link set br0 up || fail "bridge up"
for i in 0 1 2; do
        ip netns add "${ns[$i]}" || fail "ip netns add ${ns[$i]}"
        ip link add "gnh$i$id" netns "$hub" type veth peer name "gne$i$id" \
                netns "${ns[$i]}" || fail "veth $i"
        ip -n "$hub" link set "gnh$i$id" master br0 up || fail "port $i"
        ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "gne$i$id" ||
                fail "addr $i"
        ip -n "${ns[$i]}" link set "gne$i$id" up || fail "link $i"
        ip -n "${ns[$i]}" link set lo up
done

peers=("${addr[0]}:$port" "${addr[1]}:$port" "${addr[2]}:$port")
for i in 0 1 2; do
        ip netns exec "${ns[$i]}" "$bin" "$i" "${peers[@]}" >"$out/node$i" \
                2>&1 &
        pids+=($!)
done

# saw I J STATE: node I's log has a transition of J to STATE (after T ms)
saw() {
        awk -v i="$1" -v j="$2:" -v s="$3" -v t="${4:-0}" \
                '$2 == i && $4 == j && $NF == s && $1 >= t { f = 1 }
                 END { exit !f }' "$out/node$1"
}

sleep 6
for i in 0 1 2; do
        for j in 0 1 2; do
                [ "$i" = "$j" ] && continue
                saw "$i" "$j" alive || fail "node $i never saw $j alive"
        done
done
echo "# all alive"

part=$(date +%s%3N)
for j in 0 1; do
        ip netns exec "${ns[2]}" iptables -A INPUT -s "${addr[$j]}" -j DROP &&
                ip netns exec "${ns[2]}" iptables -A OUTPUT -d "${addr[$j]}" \
                        -j DROP || fail "iptables"
done
sleep 45
for p in "0 2" "1 2" "2 0" "2 1"; do
        set -- $p
        saw "$1" "$2" dead "$part" || fail "node $1 does not have $2 dead"
done
echo "# partitioned: {0,1} and {2} have each other dead"

heal=$(date +%s%3N)
ip netns exec "${ns[2]}" iptables -F || fail "iptables -F"
sleep 30
for p in "${pids[@]}"; do
        kill -TERM "$p"
        wait "$p" || fail "a node exited with $?"
done
pids=()

bad=$(awk -v t="$heal" '$1 >= t && $(NF-2) == "alive" && $NF == "dead"' \
        "$out"/node*)
[ -z "$bad" ] || fail "alive -> dead after the heal: $bad"
for i in 0 1 2; do
        final=$(grep '^final' "$out/node$i")
        echo "# $final"
        case "$final" in *dead* | *suspect* | *left*)
                fail "node $i does not end with everyone alive: $final" ;;
        esac
done
deaths=$(awk -v t="$heal" '$1 >= t && $NF == "dead"' "$out"/node* | wc -l)
echo "PASS: netns partition {0,1}|{2} healed, no alive -> dead after the heal ($deaths -> dead transitions of any kind after it)"
