#!/usr/bin/env bash
# check-package.sh DEB - install gossipnode's .deb on this (Debian, root)
# machine as a user would, check what it installed, train briefly from the
# installed paths, and purge it again. Used by tools/setup.sh test (CI).
# Checks: dependencies resolve (apt), --version on every binary, every
# program stripped and each library it needs from a package it depends
# on, RUNPATH pins the serial BLIS build and the loader resolves it there,
# postinst made the user and a 0600 key, man pages gzipped and found,
# completion found, copyright (machine-readable) and changelog present,
# `systemd-analyze verify` is clean and `security` rates the unit <= 2.5,
# the unit's reload command is on every system the package installs on
# and signals the main process, the unit does not claim to wait for clock
# sync, the example nftables ruleset loads (in a network namespace of its
# own), a 40-step run trains from the installed config, unit and data
# paths, a removed and reinstalled unit is neither masked nor disabled,
# and purge removes the links `systemctl enable` made.
# Needs: root, apt, systemd (systemctl, systemd-analyze), binutils,
# util-linux (unshare, setpriv), man-db; installs nftables if missing.
set -euo pipefail
deb=$(readlink -f "${1:?usage: check-package.sh DEB}")
# Every check runs; each failure is reported, and the exit status is 1 if
# any failed.
failed=0
fail() { echo "check-package: FAIL: $*" >&2; failed=1; }
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "$deb" >/dev/null
wants=/etc/systemd/system/multi-user.target.wants/gossipnode.service
trap 'dpkg --purge gossipnode >/dev/null 2>&1 || true; rm -f "$wants"' EXIT
version=$(dpkg-query -W -f='${Version}' gossipnode)
programs=(gossipnode gossipctl gossip-keygen gossip-import gossip-model)
for b in "${programs[@]}"; do
        v=$("/usr/bin/$b" --version) || fail "$b --version"
        v=${v%%$'\n'*} # the first line; gossipnode adds its BLIS kernels
        [ "$v" = "$b $version" ] || fail "$b --version printed '$v'"
done

# The package that ships file $1 (dpkg knows /bin/x, usrmerge's real path
# is /usr/bin/x), without its :arch.
owner() {
        local p
        p=$(readlink -f "$1")
        { dpkg -S "$p" 2>/dev/null || dpkg -S "${p#/usr}" 2>/dev/null; } |
                grep -v '^diversion' | head -1 | cut -d: -f1
}
# Whether package $1 is on every system gossipnode installs on: essential,
# or one gossipnode depends on (the Depends names, alternatives included).
depends=$(dpkg-query -W -f='${Depends}' gossipnode |
        sed 's/[,|]/\n/g' | sed 's/(.*)//; s/ //g')
assured() {
        [ -n "$1" ] && { [ "$(dpkg-query -W -f='${Essential}' "$1")" = yes ] ||
                grep -qx "$1" <<<"$depends"; }
}
for b in "${programs[@]}"; do
        sections=$(readelf -S "/usr/bin/$b") || { fail "readelf $b"; continue; }
        ! grep -q '\.symtab' <<<"$sections" || fail "/usr/bin/$b is not stripped"
        for lib in $(readelf -d "/usr/bin/$b" |
                     sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
                path=$(ldd "/usr/bin/$b" | awk -v l="$lib" '$1 == l { print $3 }')
                pkg=$(owner "${path:-/nonexistent}")
                assured "$pkg" ||
                        fail "$b needs $lib ($path, package '$pkg'), not in Depends"
        done
done
# (the output taken whole first: under pipefail, grep -q leaving early
# made ldd die of SIGPIPE and the check fail with the right line shown)
dyn=$(readelf -d /usr/bin/gossipnode)
grep -q 'RUNPATH.*blis-serial' <<<"$dyn" || fail "no RUNPATH to blis-serial"
libs=$(ldd /usr/bin/gossipnode)
grep -q 'libblis.so.4 => .*/blis-serial/' <<<"$libs" ||
        fail "libblis.so.4 not from blis-serial: $(grep blis <<<"$libs")"
getent passwd gossipnode >/dev/null || fail "no user gossipnode"
[ "$(stat -c %a /etc/gossipnode/node.key)" = 600 ] || fail "key mode"
for m in gossipnode gossipctl gossip-keygen gossip-import gossip-model \
         gossipnode-peers; do
        man -w "$m" >/dev/null || fail "no man page $m"
done
# Debian policy 12.3: man pages gzip -9n
while read -r f; do
        [ -d "$f" ] && continue
        [[ $f == *.gz ]] || fail "man page not compressed: $f"
        gzip -t "$f" || fail "bad gzip: $f"
done < <(dpkg -L gossipnode | grep '^/usr/share/man/')
doc=/usr/share/doc/gossipnode
head -1 "$doc/copyright" 2>/dev/null | grep -qx \
        'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
        fail "no machine-readable $doc/copyright"
grep -q '^License: ' "$doc/copyright" || fail "$doc/copyright names no licence"
changelog=
for f in "$doc"/changelog.gz "$doc"/changelog.Debian.gz; do
        [ -e "$f" ] && changelog=$f
done
[ -n "$changelog" ] || fail "no $doc/changelog.gz or changelog.Debian.gz"
[ -z "$changelog" ] || zcat "$changelog" | head -1 |
        grep -q "^gossipnode ($version)" ||
        fail "$changelog does not start with version $version"
bash -c 'source /usr/share/bash-completion/completions/gossipctl &&
         complete -p gossipctl' >/dev/null || fail "completion"
unit=/usr/lib/systemd/system/gossipnode.service
systemd-analyze verify "$unit" || fail "systemd-analyze verify"
# Reload: its program must be on a minimal system (/bin/kill is in procps,
# neither essential nor a dependency: status=203/EXEC), and running it as
# systemd would (MAINPID substituted and in the environment) must send
# SIGHUP to the main process.
reload=$(sed -n 's/^ExecReload=[-@:+!]*//p' "$unit")
[ -n "$reload" ] || fail "no ExecReload="
# the "main process": exits 42 on SIGHUP, 0 if none came within 30 s.
# Python, not a shell trap: a shell cannot trap a signal it was started
# with ignored (under nohup, say), and the handler must be in place
# before the reload runs (the ready file says it is).
ready=$(mktemp -u /tmp/gn-reload.XXXXXX)
python3 -c 'import os, signal, sys, time
signal.signal(signal.SIGHUP, lambda *a: os._exit(42))
open(sys.argv[1], "w").close()
time.sleep(30)' "$ready" &
pid=$!
for _ in $(seq 200); do [ -e "$ready" ] && break; sleep 0.05; done
rm -f "$ready"
reload=${reload//\$\{MAINPID\}/$pid}
reload=${reload//\$MAINPID/$pid}
eval "reload_argv=($reload)" # systemd's quoting is the shell's here
pkg=$(owner "${reload_argv[0]}")
assured "$pkg" || fail "ExecReload's ${reload_argv[0]} (package '$pkg')" \
        "is neither essential nor in Depends"
env -i MAINPID=$pid "${reload_argv[@]}" || fail "ExecReload= failed"
st=0
wait $pid || st=$?
[ $st -eq 42 ] || fail "ExecReload= did not SIGHUP the main pid ($st)"
# time-sync.target is passive: wanting it does not wait for a synchronised
# clock (systemd-time-wait-sync.service does, if the operator enables it).
! grep -q '^Wants=.*time-sync\.target' "$unit" ||
        fail "the unit Wants=time-sync.target, which does not wait for sync"
# The firewall example (docs/operations.md step 5): loaded for real in a
# network namespace of its own (gone when unshare exits): an input chain
# of policy drop that lets 7955 in.
command -v nft >/dev/null ||
        apt-get install -y -q --no-install-recommends nftables >/dev/null
nfconf=$doc/examples/nftables.conf
unshare -n nft -c -f "$nfconf" || fail "nft -c -f $nfconf"
rules=$(unshare -n sh -c "nft -f '$nfconf' && nft list chain inet filter input") ||
        fail "nft -f $nfconf in a netns"
grep -q 'hook input priority filter; policy drop;' <<<"$rules" ||
        fail "$nfconf: the input chain's policy is not drop"
for p in udp tcp; do
        grep -q "$p dport 7955 accept" <<<"$rules" ||
                fail "$nfconf: no $p 7955 rule"
done
score=$(systemd-analyze security --offline=true "$unit" 2>/dev/null |
        sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
echo "check-package: systemd-analyze security: $score"
awk -v s="$score" 'BEGIN { exit !(s != "" && s <= 2.5) }' ||
        fail "exposure $score > 2.5"
tmp=$(mktemp -d /tmp/gn-pkg.XXXXXX)
chown gossipnode: "$tmp"
# the service's own command line, run as its user, with the key copied
# where LoadCredential= would put it
install -m 0400 -o gossipnode /etc/gossipnode/node.key "$tmp/node.key"
setpriv --reuid gossipnode --regid gossipnode --clear-groups \
        /usr/bin/gossipnode --config /etc/gossipnode/gossipnode.conf \
        --key "$tmp/node.key" --checkpoint-dir "$tmp" \
        --control "$tmp/ctl.sock" --steps 40 --name pkg >"$tmp/log" 2>&1 ||
        { cat "$tmp/log"; fail "training run"; }
grep -q 'done' "$tmp/log" || { cat "$tmp/log"; fail "no 'done' line"; }
[ -s "$tmp/model.ckpt" ] || fail "no checkpoint written"
rm -rf "$tmp"
# Enabled by the operator (systemctl works on the files without a running
# systemd), then purged: the links must go, or a reinstall starts enabled.
systemctl enable gossipnode.service 2>/dev/null || fail "systemctl enable"
[ -L "$wants" ] || fail "systemctl enable made no $wants"
# Removed (not purged) and installed again: the mask the removal set is
# lifted and the operator's enablement kept, as for any Debian unit.
mask=/etc/systemd/system/gossipnode.service
dpkg --remove gossipnode >/dev/null
dpkg --install "$deb" >/dev/null
[ ! -L "$mask" ] || fail "reinstalled after remove, the unit is masked"
[ -L "$wants" ] || fail "reinstalled after remove, the unit is not enabled"
dpkg --purge gossipnode >/dev/null
[ ! -e /etc/gossipnode/gossipnode.conf ] || fail "purge left the config"
[ ! -L "$wants" ] || { rm -f "$wants"; fail "purge left $wants"; }
[ ! -L "$mask" ] || fail "purge left a mask"
trap - EXIT
[ $failed -eq 0 ] || exit 1
echo "check-package: $(basename "$deb"): all checks passed"
