#!/bin/sh
# t_layout.sh: the layout of lib/ that docs/layout.md promises. Every #include "x/y.h"
# (in lib/, tools/, tests/, bench/) names a header that exists as lib/x/y.h; a folder
# of lib/ includes only from itself and the folders before it in the order
#   base dist io tok nn sparse pack engine run
# (so the folders are acyclic by construction); and no header or source file reaches
# itself through includes (no cycle such as the old model.c <-> pack.c). The run layer
# and the tools ask the engine (engine/engine.h) which device they are on, never the
# build: no BEST_CUDA in a preprocessor line of lib/run/ or tools/. Each check is also
# run on a planted violation, to show that it can fail.
. tests/lib.sh
cat >"$TMP/layout.py" <<'PY'
import os, re, sys
ORDER = "base dist io tok nn sparse pack engine run".split()
root = sys.argv[1]
inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
def files(top):
    for d, _, fs in os.walk(os.path.join(root, top)):
        for f in fs:
            if f.endswith(('.c', '.h', '.cu', '.cuh')):
                yield os.path.relpath(os.path.join(d, f), root)
problems = {'missing': [], 'order': [], 'cycle': []}
graph = {}
for top in ('lib', 'tools', 'tests', 'bench'):
    for f in files(top):
        deps = []
        for name in inc.findall(open(os.path.join(root, f), errors='replace').read()):
            if '/' not in name:  # a file beside it (tests/test.h) or a system-like header
                continue
            target = os.path.join('lib', name)
            if not os.path.exists(os.path.join(root, target)):
                problems['missing'].append(f'{f}: {name}')
                continue
            deps.append(target)
            if f.startswith('lib/'):
                a, b = f.split('/')[1], name.split('/')[0]
                if a not in ORDER or b not in ORDER:
                    problems['order'].append(f'{f}: folder {a if a not in ORDER else b} is not in the order')
                elif ORDER.index(b) > ORDER.index(a):
                    problems['order'].append(f'{f} ({a}) includes {name} ({b}, later in the order)')
        graph[f] = deps
# a file's unit: x.c and x.h are one node, so x.c -> y.h and y.c -> x.h is a cycle
unit = lambda p: os.path.splitext(p)[0]
g = {}
for f, deps in graph.items():
    g.setdefault(unit(f), set()).update(unit(d) for d in deps if unit(d) != unit(f))
state = {}
def dfs(u, path):
    state[u] = 1
    for v in sorted(g.get(u, ())):
        if state.get(v) == 1:
            problems['cycle'].append(' -> '.join(path[path.index(v):] + [v]) if v in path else f'{u} -> {v}')
        elif not state.get(v):
            dfs(v, path + [v])
    state[u] = 2
for u in sorted(g):
    if not state.get(u):
        dfs(u, [u])
for k, v in problems.items():
    print(k, len(v))
    for line in v[:10]:
        print('  ' + line)
PY
# run ROOT: prints the three counts and the problems
run() { python3 "$TMP/layout.py" "$1"; }
run . >"$TMP/real.out"
check "every quoted include names an existing lib/ header" grep -qx 'missing 0' "$TMP/real.out"
check "lib/ folders include only from earlier folders (base dist io tok nn sparse pack engine run)" grep -qx 'order 0' "$TMP/real.out"
check "no include cycle between modules (lib/, tools/, tests/, bench/)" grep -qx 'cycle 0' "$TMP/real.out"
grep -v ' 0$' "$TMP/real.out" | sed 's/^/# /'
# The checks on a copy with planted violations: each must be seen.
mkdir -p "$TMP/copy" && cp -r lib "$TMP/copy/" && mkdir -p "$TMP/copy/tools" "$TMP/copy/tests" "$TMP/copy/bench"
printf '#include "pack/spmv.h"\n' >>"$TMP/copy/lib/nn/layers.h"   # nn -> pack: order, and with
printf '#include "nn/layers.h"\n' >>"$TMP/copy/lib/pack/spmv.c"   # pack/spmv -> nn/layers: a cycle
printf '#include "nn/nothere.h"\n' >>"$TMP/copy/lib/run/eval.c"
run "$TMP/copy" >"$TMP/planted.out"
check "planted: a missing header, a later folder and a cycle are all reported" sh -c \
    "grep -qx 'missing 1' '$TMP/planted.out' && grep -q 'nn/layers.h (nn) includes pack/spmv.h' '$TMP/planted.out' && grep -Eq 'lib/nn/layers -> lib/pack/spmv|lib/pack/spmv -> lib/nn/layers' '$TMP/planted.out'"
# devif DIR...: the preprocessor lines of DIR's C files that test BEST_CUDA
devif() { grep -rnE '^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif)\b.*BEST_CUDA' --include='*.c' --include='*.h' "$@"; }
devif lib/run tools >"$TMP/devif.out"
check "no #if on BEST_CUDA in lib/run/ or tools/ (the engine decides the device)" test ! -s "$TMP/devif.out"
sed 's/^/# /' "$TMP/devif.out"
printf '#ifdef BEST_CUDA\n#endif\n' >>"$TMP/copy/lib/run/eval.c"
planted_devif() { devif "$TMP/copy/lib/run" | grep -q 'eval.c:'; }
check "planted: an #ifdef BEST_CUDA in lib/run is reported" planted_devif
finish
