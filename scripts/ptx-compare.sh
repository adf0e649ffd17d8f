#!/usr/bin/env bash
# Compares the PTX of cu/*.cu on two sides, kernel by kernel and by body rather than by name: a
# kernel that only moved or was renamed (a namespace, a template's mangled name) keeps its body.
# Compiled as the addon's CMake build compiles them (C++17, -O3 -DNDEBUG, the repository root
# on the include path), for compute_90 unless PTX_ARCH says otherwise.
#
#   scripts/ptx-compare.sh BASE [HEAD]
#
# A side is a git revision, `.` (the work tree; HEAD's default) or a directory of .ptx files from
# an earlier run (PTX_KEEP=DIR keeps each side's PTX under DIR/base and DIR/head).
# Prints per file the kernels whose body is unchanged, those whose body moved to or from another
# file (a split file), and the bodies found on one side only; exits 1 when any body differs.
set -euo pipefail
base=${1:?usage: scripts/ptx-compare.sh BASE [HEAD]}
head=${2:-.}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
arch=${PTX_ARCH:-compute_90}

side() {  # side SPEC NAME: prints the directory holding SPEC's PTX
  local spec=$1 dir=$work/$2
  if [ -d "$spec" ] && ls "$spec"/*.ptx >/dev/null 2>&1; then echo "$spec"; return; fi
  mkdir -p "$dir/ptx"
  if [ "$spec" = . ]; then cp -r "$root/cu" "$dir/"; else git -C "$root" archive "$spec" cu | tar -x -C "$dir"; fi
  ls "$dir"/cu/*.cu | xargs -P "$(nproc)" -I{} sh -c \
    'nvcc -std=c++17 -O3 -DNDEBUG -arch='"$arch"' -ptx -I"$1" -o "$1/ptx/$(basename "$2" .cu).ptx" "$2"' _ "$dir" {}
  if [ -n "${PTX_KEEP:-}" ]; then mkdir -p "$PTX_KEEP/$2"; cp "$dir"/ptx/*.ptx "$PTX_KEEP/$2/"; fi
  echo "$dir/ptx"
}
a=$(side "$base" base)
b=$(side "$head" head)
python3 - "$a" "$b" <<'PY'
import hashlib, os, re, sys

def funcs(path):
    """Each .entry/.func definition: its name and its text from the parameter list to the closing brace."""
    out, cur, name = {}, None, None
    if not os.path.exists(path):
        return out
    for line in open(path):
        m = re.match(r'^(?:\.visible\s+|\.weak\s+)*\.(?:entry|func)\s+(?:\(.*?\)\s*)?([\w$]+)', line)
        if m:
            cur, name = [line[m.end():]], m.group(1)
            continue
        if cur is not None:
            cur.append(line)
            if line.startswith('}'):
                out[name] = cur
                cur = None
            elif line.rstrip().endswith(';') and len(cur) <= 2 and not line.startswith('\t'):
                cur = None  # a declaration, not a definition
    return out

def digest(body):
    text = ''.join(body)
    text = re.sub(r'_Z[\w$]+', 'NAME', text)  # mangled names: the kernel's own, its params, shared variables
    text = re.sub(r'\$L__\w+', 'LABEL', text)
    text = re.sub(r'__local_depot\d+', 'DEPOT', text)  # numbered in the order of the file's kernels
    text = re.sub(r'//.*', '', text)
    # A static __shared__ array is declared at module scope or, once its function has external
    # linkage (a template in a named namespace), demoted into the one kernel that uses it: where
    # it is declared changes no instruction.
    text = re.sub(r'(?m)^\s*\.shared\s[^;]*;\s*$', '', text)
    text = re.sub(r'\n\s*\n', '\n', text)
    return hashlib.sha1(text.encode()).hexdigest()[:12]

a_dir, b_dir = sys.argv[1:]
files = sorted(set(os.listdir(a_dir)) | set(os.listdir(b_dir)))
side_a = {f: {n: digest(t) for n, t in funcs(os.path.join(a_dir, f)).items()} for f in files}
side_b = {f: {n: digest(t) for n, t in funcs(os.path.join(b_dir, f)).items()} for f in files}

def where(side, h):
    """The files of a side that hold a body: a kernel moved to another file keeps its body."""
    return sorted(f for f, hs in side.items() if h in hs.values())

differ = 0
for f in files:
    ha, hb = side_a[f], side_b[f]
    only_a = sorted(n for n, h in ha.items() if h not in hb.values())
    only_b = sorted(n for n, h in hb.items() if h not in ha.values())
    moved_out = [n for n in only_a if where(side_b, ha[n])]
    moved_in = [n for n in only_b if where(side_a, hb[n])]
    same = len(ha) - len(only_a)
    notes = [f'{len(moved_out)} moved out'] if moved_out else []
    notes += [f'{len(moved_in)} moved in'] if moved_in else []
    new = len(only_b) - len(moved_in)
    notes += [f'{new} new'] if new else []
    print(f'{f}: {same} of {len(ha)} unchanged' + ''.join(', ' + n for n in notes))
    for n in only_a:
        if n in moved_out: continue
        print(f'  before only: {n}')
    for n in only_b:
        if n in moved_in: continue
        print(f'  after only:  {n}')
    differ += len(only_a) - len(moved_out) + new
sys.exit(1 if differ else 0)
PY
