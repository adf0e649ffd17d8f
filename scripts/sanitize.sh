#!/usr/bin/env bash
# compute-sanitizer over the EP graph path (issue 5): `tiny` decoded on two GPUs with the EP step
# through seed 003's parent graph, under memcheck, racecheck and synccheck in turn.
#
#   npm run sanitize [-- OUT_DIR]      (default OUT_DIR: ./sanitize-logs)
#
# `push` joins, not `ll`: the LL kernels spin on flags the peer's kernel writes, and under a
# sanitizer each spin iteration is instrumented; push moves the same bytes without spinning.
# Each tool's full output goes to OUT_DIR/<tool>.log; the summary lines are echoed. Exits non-zero
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
for tool in memcheck racecheck synccheck; do
  log="$out/$tool.log"
"$cs" --tool "$tool" --error-exitcode 99 --print-limit 50 \
    node "$root/dist/src/cli/main.js" decode --backend cuda --preset tiny --tokens 4 --no-profile \
    --config "$root/bench/configs/ep-graph.json" --json > "$log" 2>&1
  rc=$?
  echo "sanitize: $tool exit $rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|error' "$log" | tail -2 | tr '\n' ' ')"
  [ $rc -eq 0 ] || status=1
done
exit $status
