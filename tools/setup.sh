#!/usr/bin/env bash
# gossipnode set-up: installs what is missing (Debian 12, as root), builds,
# and runs one of:
#   cluster  a local multi-node cluster training on Fashion-MNIST (main job)
#   test     the whole test suite (normal build, then ASan+UBSan unit tests)
#   build    just install + build
#   bench    install + build, plus PyTorch (the benchmarks' peer, not
#            needed by the tests): tests/bench/run_*_bench.sh
# Environment: GN_NODES (cluster size, default 4), GN_BUILD_DIR (default build).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
build=${GN_BUILD_DIR:-build}

pkgs=(build-essential cmake pkg-config git
      libuv1-dev libsodium-dev libmsgpack-dev libblis-dev libblis-serial-dev
      libcmocka-dev
      zlib1g-dev libpng-dev dataset-fashion-mnist
      gnuplot-nox iproute2 iptables procps python3 python3-numpy
      libnetfilter-queue-dev iputils-ping)
# The benchmarks' peer (tests/bench/*.py under /usr/bin/python3); large,
# so only `bench` installs it.
bench_pkgs=(python3-torch)

install_missing() {
        local missing=() p
        for p in "${pkgs[@]}" "$@"; do
                dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
                        grep -q "install ok installed" || missing+=("$p")
        done
        if [ ${#missing[@]} -eq 0 ]; then
                echo "setup: all packages present"
                return
        fi
        echo "setup: installing ${missing[*]}"
        if [ "$(id -u)" -ne 0 ]; then
                echo "setup: need root to install packages (run with sudo)" >&2
                exit 1
        fi
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q --no-install-recommends "${missing[@]}"
}

do_build() { # dir, extra cmake args...
        local dir=$1
        shift
        cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DGN_WERROR=ON "$@"
        cmake --build "$dir" -j "$(nproc)"
}

cmd=${1:-cluster}
case "$cmd" in
build)
        install_missing
        do_build "$build"
        ;;
test)
        install_missing
        do_build "$build"
        (cd "$build" && ctest --output-on-failure -j 2 --timeout 900)
        echo "setup: ASan+UBSan build, unit and simulation tests"
        do_build "$build-asan" -DGN_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
        (cd "$build-asan" && ASAN_OPTIONS=detect_leaks=1 \
                ctest --output-on-failure -j 2 -L 'unit|sim' --timeout 900)
        echo "setup: ThreadSanitizer build, node unit tests and a 3-node cluster"
        do_build "$build-tsan" -DGN_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
        (cd "$build-tsan/tests/node" &&
                TSAN_OPTIONS="halt_on_error=1 exitcode=66" \
                ctest --output-on-failure -j 2 -L unit --timeout 900)
        bash tests/node/tsan_cluster.sh "$build-tsan"
        ;;
bench)
        install_missing "${bench_pkgs[@]}"
        do_build "$build"
        ;;
cluster)
        install_missing
        do_build "$build"
        # default: 10 passes over each node's shard (about 1500 steps per
        # node with 4 nodes); any arguments replace it
        args=("${@:2}")
        [ ${#args[@]} -gt 0 ] || args=(--epochs 10)
        exec "$build/tools/gossip-cluster" --nodes "${GN_NODES:-4}" \
                --build "$build" "${args[@]}"
        ;;
*)
        echo "usage: $0 {cluster|test|build|bench}" >&2
        exit 2
        ;;
esac
