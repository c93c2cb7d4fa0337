#!/bin/sh
# t_demo.sh: `make demo`'s pipeline (pipelines/demo.mk) end to end into $TMP, as a user
# runs it: nothing from ../shared. Checks the printed table (BEST at 90% close to the dense
# model, one-shot magnitude at 90% far worse, the pack lossless when best-pack is built), a
# sample, the report's SVGs (parsed), that the corpus and tokenizer are reproducible, and
# that a finished demo is up to date for make. About 1-2 minutes on 2 cores; not in the
# sanitizer pass.
. tests/lib.sh
if [ "${SAN:-0}" = 1 ]; then skip "demo: not in the sanitizer pass (minutes under ASan)"; finish; fi
if ! command -v python3 >/dev/null; then skip "demo: python3 missing"; finish; fi
export OMP_WAIT_POLICY=PASSIVE
D=$TMP/demo
if make --no-print-directory -f pipelines/demo.mk OUT="$D" BIN="$BIN" >"$TMP/demo.out" 2>&1; then
    ok "the demo ran end to end"
else
    fail "the demo failed: $(tail -n 5 "$TMP/demo.out")"; finish
fi
if [ -x "$BIN/best-pack" ]; then PACKED=1; else PACKED=0; skip "demo pack steps: $BIN/best-pack is not built yet"; fi
check "the printed table: dense, BEST, magnitude rows and a sample" sh -c \
    "grep -q '^| dense | 0 |' '$TMP/demo.out' && grep -q '^| BEST | 0.9 |' '$TMP/demo.out' && grep -q '^| magnitude | 0.9 |' '$TMP/demo.out' && grep -q '^Sample (BEST 90%, greedy): \"Once upon a time, ' '$TMP/demo.out'"
check "perplexity: dense < 3, BEST 90% within 25% of dense, one-shot magnitude 90% over 10x BEST" python3 -c "
import json; p = {n: json.load(open('$D/eval/%s.json' % n))['ppl'] for n in ('dense', 'best', 'magnitude')}
print(p); assert p['dense'] < 3 and p['best'] < 1.25 * p['dense'] and p['magnitude'] > 10 * p['best'], p"
if [ $PACKED = 1 ]; then
    check "the pack: smaller than the folder, and lossless (same perplexity), decodes the same tokens" python3 -c "
import json, os
a, b = (json.load(open('$D/eval/%s.json' % n))['ppl'] for n in ('best', 'best-packed'))
assert abs(a - b) <= 1e-6 * a, (a, b)
assert os.path.getsize('$D/pack/best.pack') < 0.6 * os.path.getsize('$D/best/model/model.safetensors')
ids = lambda f: [json.loads(l)['ids'] for l in open(f)]
assert ids('$D/speed/best.jsonl') == ids('$D/speed/packed.jsonl')"
fi
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
check "report: ppl.svg has BEST and magnitude, and dense as a reference line" python3 -c "
import xml.etree.ElementTree as ET
ns = '{http://www.w3.org/2000/svg}'
r = ET.parse('$D/report/ppl.svg').getroot()
got = {e.get('data-label') for e in r.iter() if e.get('class') in ('series', 'ref')}
assert {'BEST', 'magnitude', 'dense'} <= got, got"
python3 pipelines/make_corpus.py "$TMP/again.jsonl" 20000 1234
python3 pipelines/make_tokenizer.py "$TMP/tok" "$TMP/again.jsonl" 255 2>/dev/null
check "corpus and tokenizer are reproducible byte for byte" sh -c \
    "cmp -s '$TMP/again.jsonl' '$D/corpus/train.jsonl' && cmp -s '$TMP/tok/tokenizer.json' '$D/tokenizer/tokenizer.json'"
check "a finished demo is up to date (make -q report)" make -q -f pipelines/demo.mk OUT="$D" BIN="$BIN" report
finish
