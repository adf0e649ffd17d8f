#!/usr/bin/env bash
# One device call's worth of GPU work, in phases, every step logged to $OUT and bounded, so one
# failure or hang never costs the steps after it (device time is scarce: see notes/perf.md).
#
#   bash scripts/gpu-session.sh PHASE [OUT_DIR]      (OUT_DIR defaults to $OUT)
#
#   core    the GPU suite's foundation, transports, model kernels and parent graph files
#   decode  the GPU suite's decode walk on tiny and small (weights, GPU vs CPU, every transport,
#           the EP graph, the step graph)
#   decode-bench  the same on bench
#   bench   the decode and ep suites, a profile of bench (committed as the example), sanitize
#   joins   the joins suite (every transport and op)
#
# Each phase's bounds add up to under the device tool's 600 s a call.
set -uo pipefail
phase=${1:?usage: gpu-session.sh core|decode|decode-bench|bench|joins [OUT_DIR]}
out=${2:-${OUT:?set OUT or pass OUT_DIR}}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off on the lent machines
step() { # name seconds command...
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  timeout --kill-after=10 "$secs" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s"
  grep -E "passing|failing|pending|Error|exit|wrote|SUMMARY" "$out/$name.log" | tail -8
}
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$out/gpus.txt" 2>&1
case $phase in
  core)
    step test-foundation 100 npx mocha --timeout 120000 dist/test/gpu/foundation.test.js
    step test-transports 200 npx mocha --timeout 120000 dist/test/gpu/transports.test.js
    step test-model-kernels 150 npx mocha --timeout 120000 dist/test/gpu/model-kernels.test.js
    step test-ep-graph 100 npx mocha --timeout 120000 dist/test/gpu/ep-graph.test.js ;;
  decode)
    step test-decode 570 npx mocha --timeout 120000 --grep 'bench, t=' --invert dist/test/gpu/decode.test.js ;;
  decode-bench)
    step test-decode-bench 570 npx mocha --timeout 120000 --grep 'bench, t=' dist/test/gpu/decode.test.js ;;
  bench)
    step bench-decode 200 node dist/bench/main.js decode --out "$out"
    step bench-ep 150 node dist/bench/main.js ep --out "$out"
    step profile-bench 90 node dist/src/cli/main.js profile --backend cuda --preset bench --tokens 12 --out "$out/profile-bench"
    step sanitize 130 bash scripts/sanitize.sh "$out/sanitize" ;;
  joins)
    step bench-joins 540 node dist/bench/main.js joins --out "$out" ;;
  *) echo "gpu-session.sh: unknown phase '$phase' (core, decode, decode-bench, bench or joins)" >&2; exit 2 ;;
esac
