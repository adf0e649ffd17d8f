#!/usr/bin/env bash
# compute-sanitizer over the EP graph path: `tiny` decoded on two GPUs with the EP step
# through seed 003's parent graph, under memcheck, racecheck and synccheck in turn.
#
#   npm run sanitize [-- OUT_DIR]      (default OUT_DIR: ./sanitize-logs)
#
# `push` joins, not `ll`: the LL kernels spin on flags the peer's kernel writes, and under a
# sanitizer each spin iteration is instrumented; push moves the same bytes without spinning.
# Each run's full output goes to OUT_DIR/<run>.log; the summary lines are echoed. Exits non-zero
# when a tool reports errors or the decode fails.
set -uo pipefail
out=${1:-sanitize-logs}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
# On PATH, else where the CUDA toolkit puts it.
cs=$(command -v compute-sanitizer || true)
for c in "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" /usr/local/cuda/compute-sanitizer/compute-sanitizer /opt/nvidia/compute-sanitizer/compute-sanitizer; do
  [ -n "$cs" ] || { [ -x "$c" ] && cs=$c; }
done
[ -n "$cs" ] || { echo "sanitize: compute-sanitizer not found on PATH or in the CUDA toolkit (it ships with it)" >&2; exit 2; }
"$cs" --version | tail -1 > "$out/version.txt" 2>&1
status=0
# The EP graph path under all three tools, then racecheck once more over the eager twin: on
# 2026-11-30 racecheck lost track of a launch in the graph path ("Internal Sanitizer Error:
# Detected a failure to track a kernel launch") and counted that as its one error, so the eager
# run shows whether the kernels themselves have a shared-memory hazard.
run() { # name tool config
  local log="$out/$1.log"
  "$cs" --tool "$2" --error-exitcode 99 --print-limit 50 \
    node "$root/dist/src/cli/main.js" decode --backend cuda --preset tiny --tokens 4 --no-profile \
    --config "$root/bench/configs/$3.json" --json > "$log" 2>&1
  local rc=$?
  echo "sanitize: $1 exit $rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Internal Sanitizer Error' "$log" | tail -2 | tr '\n' ' ')"
  [ $rc -eq 0 ] || status=1
}
for tool in memcheck racecheck synccheck; do run "$tool" "$tool" ep-graph; done
run racecheck-eager racecheck ep-eager
exit $status
