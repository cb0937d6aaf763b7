#!/usr/bin/env bash
# The kore benchmarks, in one command:  bash bench/run.sh [kore-bench options]
# (the API server suite by default; `--suite runtime`, `--suite crd`, `--suite operators` or
# `--suite workloads` for the others, `--quick` for a reduced smoke run of one of them)
#
# Builds the release binaries, installs etcd (Debian's etcd-server) when it is missing, runs
# target/release/kore-bench and leaves the results in bench/results/ (apiserver.md, .json,
# .svg, and .png when rsvg-convert is available). Extra arguments go to kore-bench, e.g.
# `bash bench/run.sh --window 2` for a quicker, noisier run. See docs/design/benchmarks.md.
set -euo pipefail

cd "$(dirname "$0")/.."
started=$(date +%s)
# Where cargo puts the binaries (a shared CARGO_TARGET_DIR is honoured).
target="${CARGO_TARGET_DIR:-target}"

# `--suite NAME` runs another suite (runtime, crd, operators, workloads): no etcd; only the
# workloads suite starts a kore process (its controller manager).
suite=""
prev=""
for arg in "$@"; do
    case "$arg" in
        --suite=*) suite="${arg#--suite=}" ;;
    esac
    if [ "$prev" = "--suite" ]; then suite="$arg"; fi
    prev="$arg"
done
if [ -n "$suite" ]; then
    kore_args=()
    if [ "$suite" = "workloads" ]; then
        # The workloads suite runs `kore controller-manager` as its own process, to measure it,
        # and itself runs in kore-bench-mimalloc (kore's allocator), built by `-p kore-bench`.
        echo "==> building kore and kore-bench (release)" >&2
        cargo build --release -p kore-cli -p kore-bench >&2
        kore_args=(--kore "$target/release/kore")
    else
        echo "==> building kore-bench (release)" >&2
        cargo build --release -p kore-bench >&2
    fi
    if [ "$suite" = "runtime" ] && [ -z "${KORE_BENCH_CLIENT_GO_QUEUE:-}" ]; then
        # The workqueue row's peer, client-go's queue, needs Go and its module proxy; without
        # them the row is judged on the issue's absolute figure and says how to add the peer.
        peer_bin="$(cd "$target" && pwd)/client-go-queue"
        if command -v go >/dev/null 2>&1 &&
            (cd bench/peers/client-go-queue && go mod tidy && go build -o "$peer_bin" .) >&2; then
            export KORE_BENCH_CLIENT_GO_QUEUE="$peer_bin"
        else
            echo "==> client-go's queue not built (needs go and proxy.golang.org): the" \
                "workqueue row runs without its peer" >&2
        fi
    fi
    echo "==> running the $suite suite" >&2
    "$target/release/kore-bench" --out bench/results --scratch "$target/kore-bench" \
        "${kore_args[@]}" "$@"
    if command -v rsvg-convert >/dev/null 2>&1; then
        rsvg-convert -f png -o "bench/results/$suite.png" "bench/results/$suite.svg"
    fi
    echo "==> done in $(($(date +%s) - started)) s (including the build)" >&2
    exit 0
fi

echo "==> building kore and kore-bench (release)" >&2
cargo build --release -p kore-cli -p kore-bench >&2

apt_install() {
    # Installs Debian packages when possible (root and apt-get present); never fails the run.
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        return 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2 2>/dev/null && return 0
    apt-get update -qq >&2 2>/dev/null || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

etcd_args=()
if ! command -v etcd >/dev/null 2>&1; then
    echo "==> etcd not found: installing Debian's etcd-server" >&2
    apt_install etcd-server || true
fi
if command -v etcd >/dev/null 2>&1; then
    etcd_args=(--etcd "$(command -v etcd)")
else
    reason="etcd is not installed and 'apt-get install -y etcd-server' failed or was not possible (needs root and apt)"
    echo "==> WARNING: $reason; the etcd column will read n/a" >&2
    etcd_args=(--etcd-unavailable "$reason")
fi

if ! command -v rsvg-convert >/dev/null 2>&1; then
    echo "==> rsvg-convert not found: trying to install librsvg2-bin for the PNG chart" >&2
    apt_install librsvg2-bin || true
fi

echo "==> running the benchmark" >&2
"$target/release/kore-bench" --kore "$target/release/kore" --out bench/results \
    --scratch "$target/kore-bench" "${etcd_args[@]}" "$@"

if command -v rsvg-convert >/dev/null 2>&1; then
    rsvg-convert -f png -o bench/results/apiserver.png bench/results/apiserver.svg
    echo "==> wrote bench/results/apiserver.png" >&2
else
    echo "==> no rsvg-convert: skipped bench/results/apiserver.png (the SVG is there)" >&2
fi
echo "==> done in $(($(date +%s) - started)) s (including the build)" >&2
