#!/usr/bin/env bash
# Profiles each operator of the operators suite in its own process, with call graphs, so that
# its CPU can be split by whose code spends it (bench/profile/attribute.py):
#
#   bash bench/profile/operators.sh OUT_DIR [kore-bench options]
#
# Runs `kore-bench --suite operators --rounds 1` (the release build in $CARGO_TARGET_DIR or
# target/, or $KORE_BENCH) and attaches `perf record --call-graph dwarf` to every operator
# child as soon as it starts. Each profile lands in OUT_DIR as
# <implementation>-<concurrency>.data (e.g. Kore-4.data, KubeRuntime-4.data), the suite's
# own results in OUT_DIR/results. KORE_BENCH_OPERATORS and KORE_BENCH_OPERATORS_IDLE are
# passed through (KORE_BENCH_OPERATORS=kore,kube-runtime KORE_BENCH_OPERATORS_IDLE=0 runs
# just the pair that is compared, without the idle minute). Needs perf; exits 2 without it.
set -euo pipefail

out="${1:?usage: bash bench/profile/operators.sh OUT_DIR [kore-bench options]}"
shift
command -v perf > /dev/null || { echo "perf is not installed: nothing to profile with" >&2; exit 2; }
bench="${KORE_BENCH:-${CARGO_TARGET_DIR:-target}/release/kore-bench}"
[ -x "$bench" ] || { echo "no kore-bench at $bench: cargo build --release -p kore-bench" >&2; exit 2; }
mkdir -p "$out"

"$bench" --suite operators --rounds 1 --out "$out/results" "$@" > "$out/kore-bench.log" 2>&1 &
parent=$!
recorders=()
seen=" "
# The operator children are the parent's children that carry KORE_BENCH_OPERATOR_CHILD (a
# JSON spec naming the implementation and its concurrency); attach as each appears.
while kill -0 "$parent" 2> /dev/null; do
    for pid in $(pgrep -P "$parent" || true); do
        case "$seen" in *" $pid "*) continue ;; esac
        spec=$(tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | sed -n 's/^KORE_BENCH_OPERATOR_CHILD=//p' || true)
        [ -n "$spec" ] || continue
        seen="$seen$pid "
        name=$(sed -n 's/.*"implementation":"\([A-Za-z]*\)".*"concurrency":\([0-9]*\).*/\1-\2/p' <<< "$spec")
        perf record -F 999 --call-graph dwarf,16384 -p "$pid" -o "$out/${name:-child-$pid}.data" \
            > /dev/null 2>&1 &
        recorders+=($!)
        echo "profiling $name (pid $pid)" >&2
    done
    sleep 0.05
done
status=0
wait "$parent" || status=$?
for r in "${recorders[@]}"; do wait "$r" || true; done
grep -h "operator CPU" "$out/results/operators.md" >&2 || true
exit "$status"
