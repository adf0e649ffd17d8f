#!/usr/bin/env bash
# compute-sanitizer's memcheck (with leak checking), racecheck, synccheck and initcheck over the
# paths that put two ranks' kernels on the GPU, on whatever GPUs are here (test/sanitize/run.ts):
# the transports battery, the sharded walk and the EP parent graph in loopback (both ranks on
# device 0), the same on devices 0 and 1 where there are two, and small's unsharded walk.
#
#   npm run sanitize [-- OUT_DIR [TARGET...]]     (default OUT_DIR: ./sanitize-logs)
#
# Each tool runs once over every target, in one process (a tool's start-up is most of its cost),
# bounded by SANITIZE_TIMEOUT seconds (default 300) and by what is left of SANITIZE_DEADLINE
# seconds for the whole (default none); SANITIZE_TOOLS picks tools, in order (default all four).
# Its full output goes to OUT_DIR/<tool>.log; each report there is counted against the target it
# came during (the targets print `sanitize-target NAME begin/ok/FAILED`), and a report
# after the last target (memcheck's leaks, at exit) is counted as "at exit". Printed, and kept in
# OUT_DIR/summary.txt: one verdict line per tool, then a line per target. An "Internal Sanitizer
# Error" (the tool lost track of something) is named with the target it came in.
#
# The targets first run without a sanitizer (OUT_DIR/native.log), and every tool's run then gets
# the same seed, so the same start tokens, and holds each walk to the native run's bits: the walk
# is deterministic, so a tool that changed what a kernel computed shows as a target that failed
# (test/sanitize/native-bits.ts). SANITIZE_SEED replays a run's starts; the seed is printed.
# Exits 1 when a tool reports anything or a target fails, 2 when it cannot run.
set -uo pipefail
out=${1:-sanitize-logs}
shift || true
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
runner="$root/dist/test/sanitize/run.js"
[ -f "$runner" ] || { echo "sanitize: $runner is missing: run npm run build first" >&2; exit 2; }
# SANITIZE_BACKEND=cpu runs the targets on the CPU reference: a test of this script, not of the
# kernels (test/unit/sanitize-script.test.ts runs it so, under a stand-in for the tool).
backend=${SANITIZE_BACKEND:-cuda}
case $backend in
  cuda)
    gpus=$(node -e "import('$root/dist/src/runtime/binding.js')
      .then(b => console.log(b.loadBinding().deviceCount())).catch(() => console.log(0))")
    [ "${gpus:-0}" -ge 1 ] || { echo "sanitize: no CUDA device is visible; compute-sanitizer needs one" >&2; exit 2; }
    where="$gpus GPU(s)" ;;
  cpu) where="the CPU reference" ;;
  *) echo "sanitize: SANITIZE_BACKEND must be cuda or cpu, got '$backend'" >&2; exit 2 ;;
esac
# On PATH, else where the CUDA toolkit puts it.
cs=$(command -v compute-sanitizer || true)
for c in "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" /usr/local/cuda/compute-sanitizer/compute-sanitizer \
  /opt/nvidia/compute-sanitizer/compute-sanitizer; do
  [ -n "$cs" ] || { [ -x "$c" ] && cs=$c; }
done
[ -n "$cs" ] || {
  echo "sanitize: compute-sanitizer not found on PATH or in the CUDA toolkit (it ships with it)" >&2
  exit 2
}
"$cs" --version | tail -1 > "$out/version.txt" 2>&1
summary="$out/summary.txt"
seed=${SANITIZE_SEED:-$(((RANDOM << 15) | RANDOM))}
[[ $seed =~ ^[0-9]+$ ]] && [ "$seed" -lt 4294967296 ] ||
  { echo "sanitize: SANITIZE_SEED must be an integer in [0, 2^32), got '$seed'" >&2; exit 2; }
# The whole run's bound: SANITIZE_DEADLINE seconds, else the bound scripts/gpu-session.sh gave
# its step (STEP_BOUND), else none.
deadline=${SANITIZE_DEADLINE:-${STEP_BOUND:-}}
[ -z "$deadline" ] || [[ $deadline =~ ^[0-9]+$ ]] ||
  { echo "sanitize: SANITIZE_DEADLINE must be whole seconds, got '$deadline'" >&2; exit 2; }
end=${deadline:+$((SECONDS + deadline))}
echo "sanitize: $(cat "$out/version.txt"), $where, targets: ${*:-all}, SANITIZE_SEED=$seed" | tee "$summary"
status=0

# Reports per target: a line "========= <Capitalised>..." starts one, except the tool's own
# banner and summaries.
attribute() { # log
  awk '
    /^sanitize-target [^ ]+ begin/ { cur = $2; order[++n] = cur; next }
    /^sanitize-target [^ ]+ (ok|FAILED):/ {
      st = $3; sub(/:$/, "", st); state[$2] = st
      if (st == "FAILED") why[$2] = substr($0, index($0, "FAILED:") + 8)
      cur = "at exit"; next
    }
    /^========= (ERROR SUMMARY|RACECHECK SUMMARY|COMPUTE-SANITIZER|Target application returned)/ { next }
    /^========= [A-Z]/ {
      k = (cur == "" ? "before the first target" : cur)
      reports[k]++
      if (!(k in first)) first[k] = substr($0, 11)
      if ($0 ~ /Internal Sanitizer Error/ && !(k in lost)) lost[k] = substr($0, 11)
    }
    END {
      if (reports["before the first target"] > 0) order[++n] = "before the first target"
      if (reports["at exit"] > 0) order[++n] = "at exit"
      for (i = 1; i <= n; i++) {
        k = order[i]
        s = (k in state) ? state[k] : ((k ~ / /) ? "" : "did not finish")
        line = sprintf("  %s: %s%s%d report(s)", k, s, (s == "" ? "" : ", "), reports[k] + 0)
        if (k in first) line = line "; first: " first[k]
        if (k in lost) line = line "; the tool lost track here: " lost[k]
        if (k in why) line = line "; failed: " why[k]
        print line
      }
    }' "$1"
}

# One run (the native one, or a tool's) to LOG, bounded by SANITIZE_TIMEOUT and by what is left
# of SANITIZE_DEADLINE (less the 30 s a timed-out run may take to stop), judged and summarised:
# a run with too little time left is skipped and counts against the whole.
run() { # label log command...
  local label=$1 log=$2 bound=${SANITIZE_TIMEOUT:-300} rc verdict said lost failed ok
  shift 2
  if [ -n "$end" ] && [ $((end - SECONDS - 40)) -lt "$bound" ]; then bound=$((end - SECONDS - 40)); fi
  if [ "$bound" -lt 20 ]; then
    echo "sanitize: $label: skipped, $((end - SECONDS)) s left of the run's ${deadline} s bound" | tee -a "$summary"
    status=1
    return
  fi
  timeout --signal=INT --kill-after=30 "$bound" "$@" > "$log" 2>&1
  rc=$?
  said=$(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY)' "$log" | sed 's/^========= //' | tr '\n' ' ')
  lost=$(grep -c 'Internal Sanitizer Error' "$log")
  failed=$(grep -c '^sanitize-target [^ ]* FAILED' "$log")
  ok=$(grep -c '^sanitize-target [^ ]* ok' "$log")
  case $rc in
    0) verdict=clean ;;
    99) verdict="reported errors" ;;
    1) verdict="a target failed" ;;
    124) verdict="timed out after $bound s" ;;
    *) verdict="exit $rc" ;;
  esac
  [ $((ok + failed)) -gt 0 ] || verdict="$verdict, no target ran (its last line: $(tail -1 "$log"))"
  [ "$lost" -eq 0 ] || verdict="$verdict, lost track $lost time(s)"
  [ "$failed" -eq 0 ] || verdict="$verdict, $failed target(s) failed"
  [ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$lost" -eq 0 ] && [ $((ok + failed)) -gt 0 ] || status=1
  # A tool prints a summary line; the native run has none to miss.
  [ "$1" = node ] || said=${said:-no summary line}
  echo "sanitize: $label: $verdict; ${said:+$said; }$ok target(s) ok" | tee -a "$summary"
  attribute "$log" | tee -a "$summary"
}

run "native (no tool)" "$out/native.log" node "$runner" --backend "$backend" --seed "$seed" "$@"
for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  run "$tool" "$out/$tool.log" "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit 100 \
    node "$runner" --backend "$backend" --seed "$seed" --native "$out/native.log" "$@"
done
exit $status
