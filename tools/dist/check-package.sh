#!/usr/bin/env bash
# check-package.sh DEB - install gossipnode's .deb on this (Debian, root)
# machine as a user would, check what it installed, train briefly from the
# installed paths, and purge it again. Used by tools/setup.sh test (CI).
# Checks: dependencies resolve (apt), --version on every binary, RUNPATH
# pins the serial BLIS build and the loader resolves it there, postinst
# made the user and a 0600 key, man pages and completion are found,
# `systemd-analyze verify` is clean and `security` rates the unit <= 2.5,
# a 40-step run trains from the installed config, unit and data paths.
set -euo pipefail
deb=$(readlink -f "${1:?usage: check-package.sh DEB}")
fail() { echo "check-package: FAIL: $*" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "$deb" >/dev/null
trap 'dpkg --purge gossipnode >/dev/null 2>&1 || true' EXIT
for b in gossipnode gossipctl gossip-keygen; do
        v=$("/usr/bin/$b" --version) || fail "$b --version"
        v=${v%%$'\n'*} # the first line; gossipnode adds its BLIS kernels
        [ "$v" = "$b $(dpkg-query -W -f='${Version}' gossipnode)" ] ||
                fail "$b --version printed '$v'"
done
readelf -d /usr/bin/gossipnode | grep -q 'RUNPATH.*blis-serial' ||
        fail "no RUNPATH to blis-serial"
ldd /usr/bin/gossipnode | grep -q 'libblis.so.4 => .*/blis-serial/' ||
        fail "libblis.so.4 not from blis-serial: $(ldd /usr/bin/gossipnode | grep blis)"
getent passwd gossipnode >/dev/null || fail "no user gossipnode"
[ "$(stat -c %a /etc/gossipnode/node.key)" = 600 ] || fail "key mode"
for m in gossipnode gossipctl gossip-keygen gossipnode-peers; do
        man -w "$m" >/dev/null || fail "no man page $m"
done
bash -c 'source /usr/share/bash-completion/completions/gossipctl &&
         complete -p gossipctl' >/dev/null || fail "completion"
unit=/usr/lib/systemd/system/gossipnode.service
systemd-analyze verify "$unit" || fail "systemd-analyze verify"
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
dpkg --purge gossipnode >/dev/null
[ ! -e /etc/gossipnode/gossipnode.conf ] || fail "purge left the config"
trap - EXIT
echo "check-package: $(basename "$deb"): all checks passed"
