#!/bin/bash
# Alternating rounds of the chain probe (step-timeline-probe.cu) over several builds of the model
# kernels, on one GPU: how docs/performance.md compares a kernel change with the build before.
#
#   bash scripts/probes/chain-ab.sh [-r ROUNDS] [-c CASES] [-n REPLAYS] [-a 'PROBE ARGS'] [-b] NAME=TREE[:FLAGS] ...
#
# TREE: a directory holding cu/ and scripts/probes/ (this checkout is `.`), or a .tar.xz of one,
# e.g. `git archive REV cu scripts/probes | xz -1 > base.tar.xz` for a revision. FLAGS: extra
# nvcc flags for that build (`-DMEMRA_TRACE` for the traced timeline, or a macro a tree reads).
# Each build's translation units compile in parallel into build/probes/chain-ab/NAME; then each
# round runs every build once, in the order given, so that a card's drift falls on all of them
# alike. Prints each case's graph replay per build as the min-max of the rounds' medians, and each
# build after the first named as its median of those against the first's (in %); and each case's
# residual digest, one line saying whether every build and round agreed (the same sums give the
# same bits, so a change that keeps every sum's order must leave it alone); and, a line a case and
# build, how its last layer's rows share experts, which is not how a decode's tokens do (judge a
# change to the expert groups with the roofline suite instead).
#
# -b: no build; each NAME's probe is the one already in build/probes/chain-ab/NAME. The builds take
# minutes a tree, so they can be made on another machine with nvcc (`-r 0` builds and runs no
# round) and carried, leaving the GPU's time to the rounds.
#
# Defaults: 5 rounds, cases 1:16,1:1023,1:4000,2:16,4:16,8:16, 30 replays.
set -euo pipefail

rounds=5 cases=1:16,1:1023,1:4000,2:16,4:16,8:16 replays=30 extra= prebuilt=0
while getopts "r:c:n:a:b" o; do
  case $o in
    r) rounds=$OPTARG ;;
    c) cases=$OPTARG ;;
    n) replays=$OPTARG ;;
    a) extra=$OPTARG ;;
    b) prebuilt=1 ;;
    *) echo "usage: $0 [-r ROUNDS] [-c CASES] [-n REPLAYS] [-a 'PROBE ARGS'] [-b] NAME=TREE[:FLAGS] ..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
  echo "$0: name at least one build, NAME=TREE[:FLAGS]" >&2
  exit 2
fi
if [ "$prebuilt" = 0 ] && ! command -v nvcc > /dev/null; then
  echo "$0: nvcc not found (build elsewhere, then -b)" >&2
  exit 2
fi

out=build/probes/chain-ab
mkdir -p "$out"
names=()

# build NAME TREE FLAGS: the probe and every cu/model*.cu of the tree, one nvcc a unit, then the link.
build() {
  local name=$1 tree=$2 flags=$3 dir=$out/$1/src
  rm -rf "$dir" && mkdir -p "$dir"
  if [ -d "$tree" ]; then
    (cd "$tree" && tar cf - cu scripts/probes) | tar xf - -C "$dir"
  else
    tar xJf "$tree" -C "$dir"
  fi
  local pids=() units
  units=$(cd "$dir" && ls scripts/probes/step-timeline-probe.cu cu/model*.cu)
  for u in $units; do
    # shellcheck disable=SC2086  # FLAGS are words
    (cd "$dir" && nvcc -std=c++17 -O3 -arch=sm_90 -I. $flags -c "$u" -o "$(basename "$u" .cu).o") &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  (cd "$dir" && nvcc -arch=sm_90 ./*.o -o "../probe")
}

pids=()
for spec in "$@"; do
  name=${spec%%=*} rest=${spec#*=}
  tree=${rest%%:*} flags=
  [ "$rest" != "$tree" ] && flags=${rest#*:}
  if [ "$name" = "$spec" ] || [ -z "$name" ] || [ ! -e "$tree" ]; then
    echo "$0: '$spec' is not NAME=TREE[:FLAGS] with an existing TREE" >&2
    exit 2
  fi
  names+=("$name")
  if [ "$prebuilt" = 1 ]; then
    [ -x "$out/$name/probe" ] || { echo "$0: -b, but $out/$name/probe is not there" >&2; exit 2; }
    continue
  fi
  build "$name" "$tree" "$flags" > "$out/$name.build.log" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "$0: ${names[$i]} did not build ($out/${names[$i]}.build.log):" >&2
    tail -20 "$out/${names[$i]}.build.log" >&2
    exit 1
  fi
done
[ "$prebuilt" = 1 ] && echo "prebuilt ${names[*]}" || echo "built ${names[*]}"

log=$out/rounds.log
: > "$log"
for r in $(seq 1 "$rounds"); do
  for name in "${names[@]}"; do
    # shellcheck disable=SC2086  # PROBE ARGS are words
    if ! "$out/$name/probe" --cases "$cases" --replays "$replays" $extra 2>&1 | sed "s/^/$name | /" >> "$log"; then
      echo "$0: $name's probe failed in round $r (every round's output: $log):" >&2
      grep "^$name | " "$log" | tail -5 >&2
      exit 1
    fi
  done
  echo "round $r of $rounds done"
done

# One line a case and build: t, position, the min-max of the rounds' graph replays (ms), and for
# every build after the first named, its median of the rounds against the first's.
awk -F' [|] ' '
  # a[1..m]: the replays of build k in increasing order; returns m.
  function sorted(k, a,   m, i, j, t) {
    m = cnt[k]
    for (i = 1; i <= m; i++) a[i] = val[k, i]
    for (i = 2; i <= m; i++)
      for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return m
  }
  # "the graph replay 3.912 ms", or with -a "--eager N" "the eager replay, gated, 4.01 ms".
  /the (graph|eager) replay/ {
    if (!match($2, /t = [0-9]+, position [0-9]+/)) next
    c = substr($2, RSTART, RLENGTH)
    r = $2; sub(/.* replay[a-z, -]* /, "", r)
    v = r + 0
    k = c " | " $1
    if (!(k in cnt)) { order[n++] = k; if (!(c in first)) first[c] = $1 }
    val[k, ++cnt[k]] = v
  }
  /differ/ { print }
  # The residual after each case, as the probe digests it: builds of the same sums agree.
  # (No apostrophe in these comments: the program is one single-quoted shell word.)
  # ref[case]: the first digest seen of a case; dig[case | build]: the distinct digests of that build.
  / h digest / {
    if (!match($2, /t = [0-9]+, position [0-9]+/)) next
    c = substr($2, RSTART, RLENGTH); d = $2; sub(/.* h digest /, "", d)
    if (!(c in ref)) { dorder[nd++] = c; ref[c] = d }
    if (d != ref[c]) apart[c] = 1
    k = c " | " $1
    if (index(dig[k] " ", " " d " ") == 0) dig[k] = dig[k] " " d
  }
  # How the rows of the probe share experts (its last layer), once a case and build: its rows are
  # not the tokens of a decode, so a change to how the expert groups run is judged elsewhere.
  / past four$/ {
    if (!match($2, /t = [0-9]+, position [0-9]+/)) next
    c = substr($2, RSTART, RLENGTH); r = $2; sub(/.*: the last layer /, "", r)
    k = c " | " $1
    if (!(k in routed)) { routed[k] = 1; printf "%s | %s: the last layer %s\n", c, $1, r }
  }
  END {
    for (i = 0; i < nd; i++) {
      c = dorder[i]
      if (!(c in apart)) { printf "%s | digest %s, every build and round\n", c, ref[c]; continue }
      line = ""
      for (j = 0; j < n; j++) {
        k = order[j]
        if (index(k, c " | ") == 1) line = line (line == "" ? "" : ";") " " substr(k, length(c) + 4) dig[k]
      }
      printf "%s | digests differ between builds or rounds:%s\n", c, line
    }
    for (i = 0; i < n; i++) {
      k = order[i]; m = sorted(k, a)
      lo[k] = a[1]; hi[k] = a[m]; med[k] = m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    for (i = 0; i < n; i++) {
      k = order[i]; c = substr(k, 1, index(k, " | ") - 1); b = c " | " first[c]
      vs = ""
      if (k != b) vs = sprintf(" (median %+.2f%% against %s)", 100 * (med[k] / med[b] - 1), first[c])
      printf "%s: %.3f-%.3f ms%s\n", k, lo[k], hi[k], vs
    }
  }
' "$log" | sort -t'|' -k1,1 -s
echo "every round's output: $log"
