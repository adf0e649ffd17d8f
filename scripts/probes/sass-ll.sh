#!/usr/bin/env bash
# The SASS of the launched LL kernel (ll_exchange) in this build and in each build/ab/*.node, into
# $OUT/sass.tgz: cuobjdump is on the GPU host, not here. Run it once .gpu/run.sh has unpacked the
# built tree:  bash .gpu/run.sh bash scripts/probes/sass-ll.sh
# (The kernel's speed follows its instruction shape closely: two builds whose PTX differs by one
# register move read 0.07 us apart, notes/perf.md, seventh session.)
set -euo pipefail
: "${OUT:?set OUT to the folder that comes back}"
dir=$(mktemp -d /tmp/memra-sass.XXXXXX)
for f in build/Release/memra.node build/ab/*.node; do
  [ -e "$f" ] || continue
  cuobjdump -sass "$f" | awk '/Function : /{p = ($0 ~ /ll_exchange/)} p' > "$dir/$(basename "$f" .node).txt"
done
tar -C "$dir" -czf "$OUT/sass.tgz" . && ls -la "$dir"
