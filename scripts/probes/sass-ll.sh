#!/usr/bin/env bash
# The SASS of the launched LL kernel (ll_exchange) in this build and in each build/ab/*.node, into
# $OUT/sass.tgz, on a GPU host with cuobjdump, from the built tree:  bash scripts/probes/sass-ll.sh
# (The kernel's speed follows its instruction shape closely: two builds whose PTX differs by one
# register move read 0.07 us apart, docs/performance.md.)
set -euo pipefail
: "${OUT:?set OUT to the folder that comes back}"
dir=$(mktemp -d /tmp/memra-sass.XXXXXX)
for f in build/Release/memra.node build/ab/*.node; do
  [ -e "$f" ] || continue
  cuobjdump -sass "$f" | awk '/Function : /{p = ($0 ~ /ll_exchange/)} p' > "$dir/$(basename "$f" .node).txt"
done
tar -C "$dir" -czf "$OUT/sass.tgz" . && ls -la "$dir"
