#!/bin/sh
# t_demo.sh: the README's `make demo`, run as on a fresh Debian 12 machine, end to end.
#
# A copy of the tree (the files git tracks, and untracked ones it does not ignore: what a
# clone of this working tree would hold, no build outputs) goes into $TMP/src, and `make
# demo` runs there with shims first on PATH that make the machine look fresh: pkg-config
# and dpkg-query find none of the packages until apt-get (and sudo) "install" them, which
# only creates a marker file (no network, nothing installed for real; from then on the
# real pkg-config and dpkg-query answer). `python3 -m pip` is a no-op there too. The shims
# are on PATH for those make commands only. Checks: a plain `make` before that stops with
# one line naming the missing packages; `make demo` then works the first time (deps
# installs, the tools are built and linked, the pipeline runs) and builds only the tools;
# the printed table (BEST at 90% close to the dense model, one-shot magnitude at 90% far
# worse, the pack lossless), a sample, the report's SVGs (parsed and rendered), that the corpus and
# tokenizer are reproducible, that the BEST heatmap is drawn from the run's own mask and
# says so in its title, that the README's output block is this run's (tests/readme_demo.py),
# and that a finished demo is up to date for make. The copy builds without CUDA, as a
# fresh machine would (NVCC=none).
# About a minute on 2 cores (46 to 77 s measured, the build of the tools included); not in
# the sanitizer pass.
. tests/lib.sh
if [ "${SAN:-0}" = 1 ]; then skip "demo: not in the sanitizer pass (minutes under ASan)"; finish; fi
for t in python3 pkg-config dpkg-query tar; do
    command -v $t >/dev/null || { fail "demo: $t is not installed (make deps installs it)"; finish; }
done
export OMP_WAIT_POLICY=PASSIVE

# --- a copy of the tree, as a clone would have it --------------------------------------------
SRC=$TMP/src
mkdir -p "$SRC"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # tracked files (deleted ones are skipped with a warning) and untracked, not ignored ones
    git ls-files -z --cached --others --exclude-standard |
        tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$SRC"
else
    tar --exclude=./build --exclude=./build-san --exclude=./build-fuzz --exclude=./bin --exclude=./out \
        --exclude=./lib/libbest.a --exclude='*.o' --exclude='*.d' -cf - . | tar -xf - -C "$SRC"
fi
if [ -f "$SRC/Makefile" ] && [ -f "$SRC/pipelines/demo.mk" ] && [ ! -e "$SRC/bin" ] && [ ! -e "$SRC/build" ]; then
    ok "a copy of the tree without build outputs"
else
    fail "could not copy the tree into $SRC"; finish
fi

# --- shims: a machine without the packages, whose apt-get "installs" by creating $MARK ------
SHIM=$TMP/shim MARK=$TMP/installed
mkdir -p "$SHIM"
for t in pkg-config dpkg-query python3; do
    real=$(command -v $t)
    case $t in
        python3) body="if [ \"\$1\" = -m ] && [ \"\$2\" = pip ]; then echo \"\$*\" >>'$TMP/pip.log'; exit 0; fi" ;;
        *) body="[ -e '$MARK' ] || exit 1" ;;
    esac
    printf '#!/bin/sh\n%s\nexec %s "$@"\n' "$body" "$real" >"$SHIM/$t"
done
cat >"$SHIM/apt-get" <<EOF
#!/bin/sh
echo "\$*" >>'$TMP/apt.log'
for a; do [ "\$a" = install ] && touch '$MARK'; done
exit 0
EOF
printf '#!/bin/sh\nexec "$@"\n' >"$SHIM/sudo"
chmod +x "$SHIM"/*
# fresh_make ARGS...: make in the copy, with the shims first on PATH and no make state
# from a make that runs this test. NVCC=none: a fresh Debian machine has no CUDA toolkit,
# so the build it gets is the CPU-only one (which once failed there alone: a warning that
# -Werror turned into an error only without BEST_CUDA).
fresh_make() { (cd "$SRC" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL NVCC=none PATH="$SHIM:$PATH" make "$@"); }

# --- before deps: a build stops at once, with one line naming what is missing ----------------
fresh_make >"$TMP/early.out" 2>&1; rc=$?
if [ "$rc" = 2 ] && [ "$(wc -l <"$TMP/early.out")" = 1 ] && grep -q 'missing pkg-config packages: .*jansson.*make deps' "$TMP/early.out" &&
    [ ! -e "$SRC/build" ] && [ ! -e "$SRC/lib/libbest.a" ]; then
    ok "make before make deps: exit 2, one line naming the missing packages, nothing compiled"
else
    fail "make before make deps: exit $rc, want 2 and one line: $(head -c 400 "$TMP/early.out")"
fi

# --- the README's command, the first time -----------------------------------------------------
start=$(date +%s)
if fresh_make demo >"$TMP/demo.out" 2>&1; then
    ok "make demo works the first time on a fresh machine ($(( $(date +%s) - start ))s)"
else
    fail "make demo failed on a fresh machine: $(grep -m 3 -E 'error|Error' "$TMP/demo.out") $(tail -n 5 "$TMP/demo.out")"; finish
fi
check "make deps asked apt-get for the missing packages (libjansson-dev among them), and installed them first" sh -c \
    "grep -q '^install .*libjansson-dev' '$TMP/apt.log' && [ -e '$MARK' ] && grep -q '^deps: installing Debian packages:' '$TMP/demo.out'"
check "make demo built the five tools, and not the test and bench programs" sh -c \
    "for t in tokenize train mask eval pack; do [ -x '$SRC/bin/best-'\$t ] || exit 1; done; [ ! -e '$SRC/build/tests' ] && [ ! -e '$SRC/build/bench' ]"

D=$SRC/out/demo
# (issue 36: the two training runs were --quiet for most of the demo's minute)
check "the demo shows both training runs' progress (train: 100% 300/300 and 200/200 steps)" sh -c \
    "grep -q 'train: 100% 300/300 steps' '$TMP/demo.out' && grep -q 'train: 100% 200/200 steps' '$TMP/demo.out'"
check "the printed table: dense, BEST, magnitude rows and a sample" sh -c \
    "grep -q '^| dense | 0 |' '$TMP/demo.out' && grep -q '^| BEST | 0.9 |' '$TMP/demo.out' && grep -q '^| magnitude | 0.9 |' '$TMP/demo.out' && grep -q '^Sample (BEST 90%, greedy): \"Once upon a time, ' '$TMP/demo.out'"
check "perplexity: dense < 3, BEST 90% within 25% of dense, one-shot magnitude 90% over 10x BEST" python3 -c "
import json; p = {n: json.load(open('$D/eval/%s.json' % n))['ppl'] for n in ('dense', 'best', 'magnitude')}
print(p); assert p['dense'] < 3 and p['best'] < 1.25 * p['dense'] and p['magnitude'] > 10 * p['best'], p"
check "the pack: smaller than the folder, and lossless (same perplexity), decodes the same tokens" python3 -c "
import json, os
a, b = (json.load(open('$D/eval/%s.json' % n))['ppl'] for n in ('best', 'best-packed'))
assert abs(a - b) <= 1e-6 * a, (a, b)
assert os.path.getsize('$D/pack/best.pack') < 0.6 * os.path.getsize('$D/best/model/model.safetensors')
ids = lambda f: [json.loads(l)['ids'] for l in open(f)]
assert ids('$D/speed/best.jsonl') == ids('$D/speed/packed.jsonl')"
check "report: loss.svg has the pretraining (300 steps) and BEST (200 steps) curves, in step order" python3 -c "
import xml.etree.ElementTree as ET
ns = '{http://www.w3.org/2000/svg}'
r = ET.parse('$D/report/loss.svg').getroot()
pl = [[tuple(map(float, p.split(','))) for p in e.get('points').split()] for e in r.iter(ns + 'polyline')]
assert [len(p) for p in pl] == [300, 200], [len(p) for p in pl]
assert all(all(a[0] < b[0] for a, b in zip(p, p[1:])) for p in pl)
assert [t.text for t in r.iter(ns + 'text') if t.get('class') == 'xlabel'] == ['step']
h = ET.parse('$D/report/heatmap-1.svg').getroot()
assert len([c for c in h.iter(ns + 'rect') if c.get('class') == 'cell']) == 4 * 7"
# The BEST heatmap is the run's own last mask, titled by what made it; not a magnitude
# mask of the trained model (it was, and said "magnitude saliency").
check "report: the BEST heatmap is titled 'BEST, cubic schedule, second-order saliency, global, sparsity 0.9, mask set at step 100 of 200', the magnitude one 'magnitude saliency, ...'" python3 -c "
import xml.etree.ElementTree as ET
title = lambda f: next(ET.parse(f).getroot().iter('{http://www.w3.org/2000/svg}text')).text
t = [title('$D/report/heatmap-%d.svg' % i) for i in (1, 2)]
assert t == ['BEST, cubic schedule, second-order saliency, global, sparsity 0.9, mask set at step 100 of 200',
             'magnitude saliency, global, sparsity 0.9'], t"
check "the BEST mask report is of the run's last mask: per tensor, its kept count is the trained model's nonzero count" python3 -c "
import array, json, sys
sys.path.insert(0, 'tests'); from safetensors_py import raw
w = raw('$D/best/model/model.safetensors')
r = json.load(open('$D/best/mask-report.json'))
assert (r['method'], r['schedule'], r['step']) == ('BEST', 'cubic', 100), r
for t in r['tensors']:
    dtype, _, b = w[t['name']]; assert dtype == 'F32', dtype
    a = array.array('f'); a.frombytes(b)
    assert t['kept'] == sum(1 for x in a if x != 0) and t['numel'] == len(a), (t, sum(1 for x in a if x != 0))"
check "report: ppl.svg has BEST and magnitude, and dense as a reference line" python3 -c "
import xml.etree.ElementTree as ET
ns = '{http://www.w3.org/2000/svg}'
r = ET.parse('$D/report/ppl.svg').getroot()
got = {e.get('data-label') for e in r.iter() if e.get('class') in ('series', 'ref')}
assert {'BEST', 'magnitude', 'dense'} <= got, got"
# Every picture of the report, rendered by rsvg-convert (tests/svgcheck.py): on its canvas,
# every line, marker and reference line visible (BEST's dot not hidden under BEST packed's)
for f in "$D"/report/*.svg; do python3 tests/svgcheck.py render "$f"; done

# The README shows what `make demo` printed on one machine: its figures must be this run's
# (tests/readme_demo.py: perplexities within 0.2%, the pack within 1%, as they differ
# between CPUs; timings, token counts and the sample text are not compared).
if python3 tests/readme_demo.py README.md "$D/report/table.md" 2>"$TMP/readme.err"; then
    ok "README: the demo's output block matches this run (perplexities within 0.2%, the pack within 1%)"
else
    fail "README: the demo's output block is not this run's: $(tr '\n' ';' <"$TMP/readme.err")"
fi
python3 pipelines/make_corpus.py "$TMP/again.jsonl" 20000 1234
python3 pipelines/make_tokenizer.py "$TMP/tok" "$TMP/again.jsonl" 255 2>/dev/null
check "corpus and tokenizer are reproducible byte for byte" sh -c \
    "cmp -s '$TMP/again.jsonl' '$D/corpus/train.jsonl' && cmp -s '$TMP/tok/tokenizer.json' '$D/tokenizer/tokenizer.json'"
check "a finished demo is up to date (make -q report)" fresh_make -q -f pipelines/demo.mk report
finish
