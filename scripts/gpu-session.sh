#!/usr/bin/env bash
# The GPU work for a host reached by one batch job (a GPU host without Node.js runs it through a
# packed Node and built tree), in phases under one shared deadline, every step logged and bounded,
# so one failure or hang never costs the steps after it.
#
#   bash scripts/gpu-session.sh [--budget SECONDS] PHASE... [--out DIR]
#
#   core    the GPU suite's foundation, transports, model kernels and parent graph files
#   decode  the GPU suite's decode walk on tiny and small (weights, GPU vs CPU, every transport,
#           the EP graph, the step graph), the replicated walk on small and the join profile's
#           self-timed joins
#   decode-bench  the same on bench
#   bench   the decode and ep suites, a profile of bench (committed as the example), sanitize
#   joins   the joins suite (every transport and op)
#   ring    the ring suite (a join's host cost: the handshake, one launch, two at once)
#   one-gpu what a machine of one GPU runs (docs/one-gpu.md): the whole GPU suite (its two-rank
#           suites in loopback there), `npm start`, `memra selfcheck` and the decode suite (its
#           unsharded rows, eager and from the step graph); about 6 minutes
#   loopback-bench  the ring, joins and ep suites with both ranks on device 0, written as
#           <suite>-<machine>-loopback-<date>.json (never two-GPU figures)
#   reliability  `npm run soak` sized to about 150 s (20,000 steps on one GPU and 2,000 a loopback
#           row, 100 and 20 open/close cycles, each fault 4 times, 1,000 invalid inputs) into
#           soak-<machine>-<date>.json, then `npm run sanitize` (every tool over every target)
#   sanitize  `npm run sanitize` alone, every tool over every target, racecheck last, with what the
#           others leave of the step (over every target it runs past 110 s)
#   smoke   the LL server probe (build it first, here: nvcc -O2 -std=c++17 -arch=sm_90 -I. -o
#           build/probes/ll-server-probe scripts/probes/ll-server-probe.cu cu/tp_ll_server.cu), the
#           node diagnostic (scripts/probes/ll-server-node.mjs) and
#           the GPU suite's LL server tests alone; if either fails, the session stops there (a new
#           device-side protocol that hangs would otherwise spend every later step's bound)
#   probe   scripts/probes/launch-probe.cu without Node (build it first, here:
#           nvcc -O2 -std=c++17 -arch=sm_90 -I. -o build/probes/launch-probe scripts/probes/launch-probe.cu -lpthread)
#   phases  scripts/probes/ll-phase-probe.cu: where an 8 KB LL join's time goes in a graph (build it
#           first, here: nvcc -O3 -std=c++17 -arch=sm_90 -I. -DMEMRA_LL_PHASE_TRACE -o
#           build/probes/ll-phase-probe scripts/probes/ll-phase-probe.cu cu/tp_ll.cu)
#   graph-ops  the ll joins bench with 1000 and with 100 ops per graph, twice each, alternating,
#           into graph-ops-N-I: what share of a device row is the replay's fixed cost
#   ab-ll   the ll joins bench on this build and on each variant in build/ab (NAME.node or a
#           package NAME/: ab_rounds below; copy earlier or variant builds there first), in
#           rounds (MEMRA_AB_ROUNDS, default 2), each round this build first, into ab-this-R and
#           ab-NAME-R: changes to the LL kernels against their base on one machine, in one run
#   ab-roofline  the same for the one-GPU decode against its floor (the roofline suite), into
#           ab-roofline-this-R and ab-roofline-NAME-R: changes to the model kernels against their base
#   hang    the loopback hazard (docs/reliability.md): the sharded `bench` t = 4 GPU test, which
#           failed about one run in four on an H100 and one in thirty on an H200 before launched
#           LL joins were capped in loopback, again and again until the budget (or
#           MEMRA_HANG_SECONDS, default 420) is spent, with
#           MEMRA_DEVICE_PROGRESS=1 so that a stop names the record each rank's device stopped
#           before; each run's log kept, one line a failure with its first words
#   ab-serve  the ll joins bench once with the LL server's host rows left out
#           (MEMRA_JOINS_LL_SERVER=off), into ab-serve-off: do the server's earlier grids change
#           the device rows after them? (compare with the ab-this rounds of the same run)
#
# A step gets its own bound or what is left of the budget (default 570 s, under a batch
# job's 600 s), whichever is less; one that would get under 20 s is skipped and says so. Logs go
# to a scratch folder and are packed into ONE file, DIR/gpu-session.tgz (DIR defaults to $OUT),
# because a batch job brings back few files.
set -uo pipefail
budget=570 phases=() out=${OUT:-}
while [ $# -gt 0 ]; do
  case $1 in
    --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    core|decode|decode-bench|bench|joins|ring|one-gpu|loopback-bench|reliability|sanitize|probe|smoke|\
      ab-ll|ab-roofline|ab-serve|graph-ops|phases|hang) phases+=("$1"); shift ;;
    *) echo "gpu-session.sh: unknown phase '$1' (core, decode, decode-bench, bench, joins, ring, one-gpu," \
         "loopback-bench, reliability, sanitize, probe, smoke, ab-ll, ab-roofline, ab-serve, graph-ops," \
         "phases or hang)" >&2; exit 2 ;;
  esac
done
[ ${#phases[@]} -gt 0 ] || { echo "usage: gpu-session.sh [--budget S] PHASE... [--out DIR]" >&2; exit 2; }
[ -n "$out" ] || { echo "gpu-session.sh: set OUT or pass --out DIR" >&2; exit 2; }
mkdir -p "$out"
logs=$(mktemp -d /tmp/memra-gpu-session.XXXXXX)
pack() {
  tar -C "$logs" -czf "$out/gpu-session.tgz" . &&
    echo "packed $(du -sh "$out/gpu-session.tgz" | cut -f1) into $out/gpu-session.tgz"
}
trap pack EXIT
export NCCL_NVLS_ENABLE=0   # NVLink multicast (NVLS) stays off: on a shared host it can take the GPUs out of service
deadline=$((SECONDS + budget))
step() { # name seconds command...
  local name=$1 secs=$2; shift 2
  local left=$((deadline - SECONDS - 10))
  [ "$secs" -le "$left" ] || secs=$left
  if [ "$secs" -lt 20 ]; then echo "== $name: skipped, ${left} s of the budget left"; return 1; fi
  local t0=$SECONDS
  # STEP_BOUND: a command that runs several bounded parts (scripts/sanitize.sh) fits them in it.
  STEP_BOUND=$secs timeout --kill-after=5 "$secs" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s (bound $secs s)"
  grep -E -e "passing|failing|pending|Error|exit|wrote|SUMMARY|chose:|tokens/s" \
    -e "^  [0-9]+\) |^(held|FAILED) |^sanitize: " "$logs/$name.log" | tail -24
  return $rc
}
# ab_rounds PREFIX SECONDS SUITE-ARGS...: the bench on this build and on each variant in build/ab,
# in rounds (MEMRA_AB_ROUNDS, default 2), this build first, into PREFIX-this-R and PREFIX-NAME-R.
# A variant is NAME.node, an addon with this build's interface, or NAME/, a whole package of
# another build (its package.json, dist/, bench/configs/ and build/Release/memra.node: an addon
# whose interface differs runs with its own JS). The runtime loads build/Release/memra.node, so a
# NAME.node takes its place for its runs; a trap would not outlive `timeout`, so the swap back
# follows every variant's run.
ab_rounds() {
  local prefix=$1 secs=$2 i v name main
  shift 2
  local variants=()
  for v in build/ab/*.node build/ab/*/dist/bench/main.js; do [ -e "$v" ] && variants+=("$v"); done
  [ ${#variants[@]} -gt 0 ] || { echo "== $prefix: no variant in build/ab: skipped"; return; }
  cp build/Release/memra.node build/ab-this.node
  for ((i = 1; i <= ${MEMRA_AB_ROUNDS:-2}; i++)); do
    step "$prefix-this-$i" "$secs" node dist/bench/main.js "$@" --out "$logs/$prefix-this-$i"
    for v in "${variants[@]}"; do
      if [[ $v == *.node ]]; then
        name=$(basename "$v" .node) main=dist/bench/main.js
        cp "$v" build/Release/memra.node
      else
        name=$(basename "${v%/dist/bench/main.js}") main=$v
      fi
      step "$prefix-$name-$i" "$secs" node "$main" "$@" --out "$logs/$prefix-$name-$i"
      cp build/ab-this.node build/Release/memra.node
    done
  done
}
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$logs/gpus.txt" 2>&1
nvidia-smi topo -m >> "$logs/gpus.txt" 2>&1
for phase in "${phases[@]}"; do
  case $phase in
    core)
      step test-foundation 100 npx mocha --timeout 120000 dist/test/gpu/foundation.test.js
      step test-transports 200 npx mocha --timeout 120000 dist/test/gpu/transports.test.js
      step test-model-kernels 150 npx mocha --timeout 120000 dist/test/gpu/model-kernels.test.js
      step test-ep-graph 100 npx mocha --timeout 120000 dist/test/gpu/ep-graph.test.js ;;
    decode)
      step test-decode 570 npx mocha --timeout 120000 --grep 'bench, t=' --invert dist/test/gpu/decode.test.js
      step test-replicated-walk 180 npx mocha --timeout 120000 --grep 'small, t = 1' \
        dist/test/gpu/replicated-walk.test.js
      step test-join-profile 120 npx mocha --timeout 120000 dist/test/gpu/join-profile.test.js ;;
    decode-bench)
      step test-decode-bench 570 npx mocha --timeout 120000 --grep 'bench, t=' dist/test/gpu/decode.test.js
      step test-replicated-walk-bench 300 npx mocha --timeout 120000 --grep 'bench, t = 1' \
        dist/test/gpu/replicated-walk.test.js ;;
    bench)
      step bench-decode 200 node dist/bench/main.js decode --out "$logs"
      step bench-ep 150 node dist/bench/main.js ep --out "$logs"
      step profile-bench 90 node dist/src/cli/main.js profile --backend cuda --preset bench --tokens 12 \
        --out "$logs/profile-bench"
      step sanitize 130 bash scripts/sanitize.sh "$logs/sanitize" ;;
    joins)
      step bench-joins 540 node dist/bench/main.js joins --out "$logs" ;;
    ring)
      step bench-ring 100 node dist/bench/main.js ring --out "$logs" ;;
    one-gpu)
      step test-gpu 360 npx mocha --timeout 120000 'dist/test/gpu/**/*.test.js'
      step start 60 node dist/src/cli/main.js decode
      step selfcheck 30 node dist/src/cli/main.js selfcheck
      step bench-decode 150 node dist/bench/main.js decode --out "$logs" ;;
    reliability)
      # As `npm run soak` starts it: RSS measured with the young generation and malloc's mmap threshold fixed.
      step soak 200 env MALLOC_MMAP_THRESHOLD_=131072 \
        node --expose-gc --min-semi-space-size=1 --max-semi-space-size=1 \
        dist/bench/soak/main.js --steps 20000 --cycles 100 --faults 4 --time-limit 150 --out "$logs"
      step sanitize 300 bash scripts/sanitize.sh "$logs/sanitize" ;;
    sanitize)
      step sanitize 560 env SANITIZE_TOOLS="memcheck synccheck initcheck racecheck" SANITIZE_TIMEOUT=400 \
        bash scripts/sanitize.sh "$logs/sanitize" ;;
    loopback-bench)
      step bench-ring 80 node dist/bench/main.js ring --loopback --out "$logs"
      step bench-joins 300 node dist/bench/main.js joins --loopback --out "$logs"
      step bench-ep 120 node dist/bench/main.js ep --loopback --out "$logs" ;;
    probe)
      step launch-probe 60 build/probes/launch-probe ;;
    phases)
      step ll-phase-probe 60 build/probes/ll-phase-probe ;;
    graph-ops)
      for i in 1 2; do
        for n in 1000 100; do
          MEMRA_JOINS_PER_GRAPH=$n step "graph-ops-$n-$i" 60 node dist/bench/main.js joins --transports ll \
            --out "$logs/graph-ops-$n-$i"
        done
      done ;;
    ab-ll)
      ab_rounds ab 60 joins --transports ll ;;
    ab-roofline)
      ab_rounds ab-roofline 90 roofline ;;
    hang)
      # A run takes about 20 s and a stopped one 60 s more; each gets 150 s, and none starts
      # with less than that left of its own budget or the session's.
      hang_end=$((SECONDS + ${MEMRA_HANG_SECONDS:-420})) runs=0 failed=0
      while [ $((hang_end - SECONDS)) -ge 150 ] && [ $((deadline - SECONDS - 10)) -ge 150 ]; do
        runs=$((runs + 1))
        if ! MEMRA_DEVICE_PROGRESS=1 timeout --kill-after=5 150 npx mocha --timeout 130000 \
          dist/test/gpu/decode.test.js --grep 'bench, t=4: 16 greedy' > "$logs/hang-$runs.log" 2>&1; then
          failed=$((failed + 1))
          echo "== hang run $runs failed: $(grep -m1 -E 'Error|Refusal' "$logs/hang-$runs.log" | cut -c1-300)"
        fi
      done
      echo "== hang: $failed of $runs runs failed" ;;
    ab-serve)
      MEMRA_JOINS_LL_SERVER=off step ab-serve-off 60 node dist/bench/main.js joins --transports ll \
        --out "$logs/ab-serve-off" ;;
    smoke)
      step ll-server-probe 40 build/probes/ll-server-probe &&
      step ll-server-node 60 node scripts/probes/ll-server-node.mjs &&
      step smoke 120 npx mocha --timeout 120000 --grep 'LL server' dist/test/gpu/transports.test.js ||
        { echo "== smoke failed: the session stops here"; break; } ;;
  esac
done
