#!/usr/bin/env bash
# netns_net.sh - the transport (node/net/net.c) between two network namespaces.
#
# Creates namespaces A and B joined by a veth pair (10.231.0.1/24 in A,
# 10.231.0.2/24 in B; those addresses exist only inside the namespaces),
# runs net_echo serve in B and net_echo client in A, and checks:
#   1. datagrams and stream frames pass both ways;
#   2. iptables -A INPUT -j DROP in B: sends fail or are dropped, nobody
#      crashes; after the rule is removed traffic resumes over a new
#      connection (connects >= 2 on the client);
#   3. tc tbf rate 1mbit on A's veth: a 2 MiB frame still arrives intact,
#      at a measured throughput near the cap (0.5..1.1 Mbit/s goodput).
# Everything is created and deleted here (trap). Needs root; exits 77
# (skipped) with a message otherwise. Usage: netns_net.sh PATH/TO/net_echo
set -u

echo_bin=${1:?usage: netns_net.sh PATH/TO/net_echo}
if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP: network-namespace test needs root"
        exit 77
fi
for t in ip iptables tc; do
        if ! command -v "$t" >/dev/null 2>&1; then
                echo "SKIP: $t not installed"
                exit 77
        fi
done

id=$$
nsa=gnnetA$id
nsb=gnnetB$id
va=gnvA$id
vb=gnvB$id
ipa=10.231.0.1
ipb=10.231.0.2
port=7946
out=$(mktemp -d /tmp/gn-netns.XXXXXX)
spid=

cleanup() {
        if [ -n "$spid" ]; then
                kill -TERM "$spid" 2>/dev/null
                wait "$spid" 2>/dev/null
        fi
        ip netns del "$nsa" 2>/dev/null
        ip netns del "$nsb" 2>/dev/null
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

# value KEY FILE: the value of KEY=... on the last line of FILE
value() {
        tail -n 1 "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

if ! ip netns add "$nsa" 2>"$out/err"; then
        echo "SKIP: cannot create network namespaces here: $(cat "$out/err")"
        exit 77
fi
ip netns add "$nsb" || fail "ip netns add $nsb"
ip link add "$va" netns "$nsa" type veth peer name "$vb" netns "$nsb" ||
        fail "veth pair"
ip -n "$nsa" addr add "$ipa/24" dev "$va" || fail "addr A"
ip -n "$nsb" addr add "$ipb/24" dev "$vb" || fail "addr B"
for ns in "$nsa" "$nsb"; do
        ip -n "$ns" link set lo up
done
ip -n "$nsa" link set "$va" up || fail "link A up"
ip -n "$nsb" link set "$vb" up || fail "link B up"

# A black-holed connection must be noticed within seconds in this test
# (the blackout client and the server); the tbf client keeps the default
# stall bound, as a 1 Mbit/s link legitimately leaves data unacknowledged
# for seconds when tbf drops and TCP backs off.
fast=(GN_STALL_MS=2000 GN_CONNECT_MS=1500 GN_BACKOFF_MAX_MS=1000)
export GN_SEED=${GN_SEED:-7}
echo "# netns_net: GN_SEED=$GN_SEED namespaces $nsa $nsb"

ip netns exec "$nsb" env "${fast[@]}" "$echo_bin" serve "$ipb:$port" \
        "$ipa:$port" \
        >"$out/server" 2>&1 &
spid=$!

# 1. plain traffic
ip netns exec "$nsa" "$echo_bin" client "$ipa:$port" "$ipb:$port" ping 20 \
        >"$out/ping" 2>&1 || fail "ping phase"
echo "# $(tail -n 1 "$out/ping")"

# 2. firewall drop in B, then removed
ip netns exec "$nsa" env "${fast[@]}" "$echo_bin" client "$ipa:$port" \
        "$ipb:$port" blackout 16 >"$out/blackout" 2>&1 &
cpid=$!
sleep 3
ip netns exec "$nsb" iptables -A INPUT -j DROP || fail "iptables -A"
sleep 6
ip netns exec "$nsb" iptables -D INPUT -j DROP || fail "iptables -D"
wait "$cpid" || fail "blackout client exited with $?"
echo "# $(tail -n 1 "$out/blackout")"
gap=$(value max_gap_ms "$out/blackout")
last3=$(value last3 "$out/blackout")
connects=$(value connects "$out/blackout")
[ "${gap:-0}" -ge 4000 ] || fail "no outage seen during the drop (gap $gap ms)"
[ "${last3:-0}" -gt 0 ] || fail "traffic did not resume after the drop"
[ "${connects:-0}" -ge 2 ] || fail "no reconnect (connects $connects)"
failures=$(value connect_failures "$out/blackout")
dropped=$(value dropped "$out/blackout")
[ "${failures:-0}" -ge 1 ] && [ "${dropped:-0}" -ge 1 ] ||
        fail "the drop caused no counted failure/drop ($failures/$dropped)"
kill -0 "$spid" 2>/dev/null || fail "server died during the drop"

# 3. rate cap on A's egress: a 2 MiB frame still arrives, near the cap
ip netns exec "$nsa" tc qdisc add dev "$va" root tbf rate 1mbit \
        burst 32kbit latency 400ms || fail "tc qdisc add"
ip netns exec "$nsa" "$echo_bin" client "$ipa:$port" "$ipb:$port" \
        big 2097152 >"$out/big" 2>&1 || fail "big frame under tbf"
echo "# $(tail -n 1 "$out/big")"
mbit=$(value mbit_per_s "$out/big")
awk -v m="$mbit" 'BEGIN { exit !(m >= 0.5 && m <= 1.1) }' ||
        fail "throughput $mbit Mbit/s is not near the 1 Mbit/s cap"

# clean shutdown of the server
kill -TERM "$spid"
wait "$spid"
rc=$?
spid=
[ "$rc" -eq 0 ] || fail "server exit status $rc"
echo "PASS: netns transport (datagrams, streams, drop+resume, tbf cap)"
