#!/usr/bin/env bash
# Branch next/ll-server's build (packed under alt/): is the stall CUDA's lazy module loading?
# A resident grid plus the first launch of a not-yet-loaded kernel can deadlock (loading may
# synchronize the context). Runs the node diagnostic with the default loading and with EAGER,
# and the joins bench (ll only) with EAGER if that passed. Logs packed into $OUT/alt.tgz.
set -uo pipefail
logs=$(mktemp -d /tmp/memra-alt.XXXXXX)
trap 'tar -C "$logs" -czf "$OUT/alt.tgz" .' EXIT
export NCCL_NVLS_ENABLE=0
cd alt
timeout -k 5 20 build/probes/ll-server-probe > "$logs/probe.log" 2>&1; echo "== probe exit $?"; tail -2 "$logs/probe.log"
MEMRA_LL_SERVE_IDLE_US=1000000 timeout -k 5 30 node scripts/probes/ll-server-node.mjs > "$logs/node-lazy.log" 2>&1; echo "== node-lazy exit $?"; tail -4 "$logs/node-lazy.log"
CUDA_MODULE_LOADING=EAGER MEMRA_LL_SERVE_IDLE_US=1000000 timeout -k 5 60 node scripts/probes/ll-server-node.mjs > "$logs/node-eager.log" 2>&1; rc=$?; echo "== node-eager exit $rc"; tail -4 "$logs/node-eager.log"
CUDA_MODULE_LOADING=EAGER timeout -k 5 40 node scripts/probes/ll-server-node.mjs > "$logs/node-eager-idle1ms.log" 2>&1; echo "== node-eager-idle1ms exit $?"; tail -3 "$logs/node-eager-idle1ms.log"
if [ $rc -eq 0 ]; then
  CUDA_MODULE_LOADING=EAGER MEMRA_LL_SERVE_IDLE_US=1000000 timeout -k 5 ${JOINS_S:-100} node dist/bench/main.js joins --transports ll --joins 4000 --out "$logs" > "$logs/joins.log" 2>&1; echo "== joins exit $?"; tail -3 "$logs/joins.log"
fi
