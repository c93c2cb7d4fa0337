#!/bin/sh
# t_badinput.sh: the bad inputs of issue 12, tool by tool. Each must end in one clear
# error line naming the file and the problem, exit 1 (2 for usage errors), and leave no
# output behind; never a crash, a hang, a silently wrong number or an exit 0.
# Packs are edited by the Python below, with their checksums recomputed (XXH64 from
# tests/shardio.py), so that only the check under test can refuse them.
. tests/lib.sh
E="$BIN/best-eval" M="$BIN/best-mask" TR="$BIN/best-train" P="$BIN/best-pack" TK="$BIN/best-tokenize"
D=tests/fixtures/model/llama
if ! have_py numpy; then skip "bad inputs: python3 numpy missing"; finish; fi
python3 -c "
import sys; sys.path.insert(0, 'tests'); from shardio import write_shard
write_shard('$TMP/toks.bin', list(range(3, 90)) * 20, 97)"

cat >"$TMP/packedit.py" <<'PY'
# packedit.py PACK OUT WHAT: a copy of PACK with its manifest's sizes and hashes made
# right again after the edit, so that only the property under test is wrong:
#   config:KEY:VALUE   config.json's KEY set to VALUE (a JSON number)
#   swapmembers        the first two tensors' members swapped in the tar (not in the manifest)
#   swaptensors        the same, and the manifest's tensor list too (out of the table's order)
#   fileslast          config.json moved after the tensors
import io, json, re, sys, tarfile
sys.path.insert(0, "tests")
from shardio import xxh64

pack, out, what = sys.argv[1:4]
t = tarfile.open(pack)
ms = [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
man = json.loads(ms[0][1])
ms = ms[1:]
tensor_of = lambda name: next((x["name"] for x in man["tensors"] if name == x["name"] or
                               re.fullmatch(re.escape(x["name"]) + r"\.(nnz|index|ixptr|slots|values|scales)", name)), None)
if what.startswith("config:"):
    _, key, value = what.split(":")
    ms = [(n, re.sub(rb'"%s": *[0-9]+' % key.encode(), b'"%s": %s' % (key.encode(), value.encode()), d)
           if n == "config.json" else d) for n, d in ms]
elif what in ("swapmembers", "swaptensors"):
    a, b = man["tensors"][0]["name"], man["tensors"][1]["name"]
    ta = [m for m in ms if tensor_of(m[0]) == a]
    tb = [m for m in ms if tensor_of(m[0]) == b]
    i = ms.index(ta[0])
    rest = [m for m in ms if m not in ta and m not in tb]
    ms = rest[:i] + tb + ta + rest[i:]
    if what == "swaptensors":
        man["tensors"][0], man["tensors"][1] = man["tensors"][1], man["tensors"][0]
elif what == "fileslast":
    ms = [m for m in ms if m[0] != "config.json"] + [m for m in ms if m[0] == "config.json"]
man["members"] = [{"name": n, "size": len(d), "xxh64": "%016x" % xxh64(d)} for n, d in ms]
del man["xxh64"]
head = json.dumps(man, separators=(",", ":"))[:-1].encode()
head += b',"xxh64":"%016x"}' % xxh64(head)
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as w:
    for name, data in [("manifest.json", head)] + ms:
        ti = tarfile.TarInfo(name)
        ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
        w.addfile(ti, io.BytesIO(data))
b = buf.getvalue()
end = 0
while b[end:end + 512] != bytes(512):  # exactly the two end blocks, as best-pack writes
    end += 512 + (int(b[end + 124:end + 135].decode().strip("\0 ") or "0", 8) + 511) // 512 * 512
open(out, "wb").write(b[:end + 1024])
PY
EDIT="python3 $TMP/packedit.py"

# --- config.json: every size range-checked before anything is allocated ----------------
# (954437177 layers wrapped an int counter: SIGSEGV in every tool that opens a model)
mkdir -p "$TMP/layers" "$TMP/vocab" "$TMP/vocab24"
for d in layers vocab vocab24; do cp $D/model.safetensors "$TMP/$d/"; done
sed 's/"num_hidden_layers": 2/"num_hidden_layers": 954437177/' $D/config.json >"$TMP/layers/config.json"
sed 's/"vocab_size": 97/"vocab_size": 2147483647/' $D/config.json >"$TMP/vocab/config.json"
sed 's/"vocab_size": 97/"vocab_size": 16777216/' $D/config.json >"$TMP/vocab24/config.json"
L="num_hidden_layers 954437177 is out of range \[1, 1024\]"
expect_error "best-eval: 954437177 layers" 1 "layers/config.json: $L" "$E" --model "$TMP/layers" --data "$TMP/toks.bin"
expect_error "best-mask: 954437177 layers" 1 "$L" "$M" --model "$TMP/layers" --sparsity 0.5 --saliency magnitude \
    --out "$TMP/never.mask"
expect_error "best-train --model: 954437177 layers" 1 "$L" "$TR" --model "$TMP/layers" --data "$TMP/toks.bin" \
    --out "$TMP/never.train" --steps 1 --seq 8 --batch 1 --quiet
expect_error "best-train --init random: 954437177 layers" 1 "$L" "$TR" --init random --config "$TMP/layers/config.json" \
    --data "$TMP/toks.bin" --out "$TMP/never.train" --steps 1 --seq 8 --batch 1 --quiet
expect_error "best-pack --model: 954437177 layers" 1 "$L" "$P" --model "$TMP/layers" --out "$TMP/never.pack"
# one position predicts nothing; the tools cap --seq at it, and blamed --seq ("--seq must be
# at least 2 (got 1)") for a value that only the config had
mkdir -p "$TMP/pos1"
cp $D/model.safetensors "$TMP/pos1/"
python3 -c "
import json, sys; c = json.load(open(sys.argv[1])); c['max_position_embeddings'] = 1; json.dump(c, open(sys.argv[2], 'w'))" \
    $D/config.json "$TMP/pos1/config.json"
P1="pos1/config.json: max_position_embeddings 1: a model needs at least 2 positions"
expect_error "best-eval: max_position_embeddings 1 names the config, not --seq" 1 "$P1" "$E" --model "$TMP/pos1" --data "$TMP/toks.bin"
expect_error "best-train: max_position_embeddings 1 names the config, not --seq" 1 "$P1" "$TR" --model "$TMP/pos1" \
    --data "$TMP/toks.bin" --out "$TMP/never.train" --steps 1 --seq 8 --batch 1 --quiet
expect_error "best-eval: vocab_size 2^31-1" 1 "vocab_size 2147483647 is out of range \[1, 16777216\]" \
    "$E" --model "$TMP/vocab" --data "$TMP/toks.bin"
# In range but not the tensors' shape: refused from the file's header, before the 6.4 GB
# block such a vocabulary needs is allocated (a 3 GB address space proves it; not under
# ASan, which reserves terabytes of shadow).
if [ "$SAN" = 1 ]; then
    expect_error "vocab_size 2^24 against a [97, 48] embedding" 1 "shape \[97, 48\], config.json implies \[16777216, 48\]" \
        "$E" --model "$TMP/vocab24" --data "$TMP/toks.bin"
else
    expect_error "vocab_size 2^24 against a [97, 48] embedding: the shapes first" 1 \
        "shape \[97, 48\], config.json implies \[16777216, 48\]" \
        sh -c "ulimit -v 3000000 && exec '$E' --model '$TMP/vocab24' --data '$TMP/toks.bin'"
fi

# The same in a pack: open, --verify and --unpack all refuse it.
"$P" --model $D --out "$TMP/ok.pack" --quiet
$EDIT "$TMP/ok.pack" "$TMP/layers.pack" config:num_hidden_layers:954437177
expect_error "best-pack --verify: a pack whose config.json has 954437177 layers" 1 "layers.pack: config.json: $L" \
    "$P" --verify "$TMP/layers.pack"
expect_error "best-pack --unpack: 954437177 layers" 1 "$L" "$P" --unpack "$TMP/layers.pack" --out "$TMP/never.un"
expect_error "best-eval: a pack with 954437177 layers" 1 "$L" "$E" --model "$TMP/layers.pack" --data "$TMP/toks.bin"
# --verify checks all that opening the pack as a model checks
check "the edited pack's checksums are right (an unedited copy verifies)" sh -c \
    "$EDIT '$TMP/ok.pack' '$TMP/same.pack' config:vocab_size:97 && '$P' --verify '$TMP/same.pack'"
$EDIT "$TMP/ok.pack" "$TMP/inter.pack" config:intermediate_size:65
expect_error "--verify: config.json does not fit the tensors" 1 "config.json implies \[65, 48\]" \
    "$P" --verify "$TMP/inter.pack"
expect_error "--unpack: config.json does not fit the tensors" 1 "config.json implies \[65, 48\]" \
    "$P" --unpack "$TMP/inter.pack" --out "$TMP/never.un"
$EDIT "$TMP/ok.pack" "$TMP/swapm.pack" swapmembers
expect_error "--verify: members out of the documented order" 1 "out of the documented order" \
    "$P" --verify "$TMP/swapm.pack"
$EDIT "$TMP/ok.pack" "$TMP/last.pack" fileslast
expect_error "--verify: config.json after the tensors" 1 "member config.json comes after" "$P" --verify "$TMP/last.pack"
$EDIT "$TMP/ok.pack" "$TMP/swapt.pack" swaptensors
expect_error "--verify: tensors out of the parameter table's order" 1 "out of order: the parameter table has" \
    "$P" --verify "$TMP/swapt.pack"
expect_error "best-eval: tensors out of the parameter table's order" 1 "out of order" \
    "$E" --model "$TMP/swapt.pack" --data "$TMP/toks.bin"
check "nothing written by the refusals" sh -c "! ls -d '$TMP'/never* 2>/dev/null | grep -q ."

# --- best-eval: what it measures must be a number, of enough tokens ----------------------
mkdir -p "$TMP/nan"
cp $D/config.json "$TMP/nan/"
python3 - $D/model.safetensors "$TMP/nan/model.safetensors" <<'PY'
# one weight of layer 0's q_proj set to NaN (F32), with nothing but the standard library
import struct, sys
sys.path.insert(0, "tests"); from safetensors_py import header
b = bytearray(open(sys.argv[1], "rb").read())
entries, _, base = header(sys.argv[1])
t = entries["model.layers.0.self_attn.q_proj.weight"]
assert t["dtype"] == "F32"
struct.pack_into("<f", b, base + t["data_offsets"][0] + 4 * 7, float("nan"))
open(sys.argv[2], "wb").write(b)
PY
"$E" --model "$TMP/nan" --data "$TMP/toks.bin" --json --quiet >"$TMP/nan.json" 2>"$TMP/nan.err"; rc=$?
check "a NaN weight: exit 1 with one error line" sh -c "[ $rc = 1 ] && [ \$(grep -c error '$TMP/nan.err') = 1 ] &&
    grep -q 'perplexity on .* is not a finite number' '$TMP/nan.err'"
check "a NaN weight: --json still prints JSON, ppl and nll null" python3 -c "
import json, sys; j = json.load(open(sys.argv[1])); assert j['ppl'] is None and j['nll'] is None and j['tokens'] > 0" "$TMP/nan.json"
python3 -c "
import sys; sys.path.insert(0, 'tests'); from shardio import write_shard
write_shard('$TMP/empty.bin', [], 97); write_shard('$TMP/one.bin', [5], 97)"
expect_error "an empty shard: too few tokens, not --seq" 1 "empty.bin: 0 tokens, too few to measure perplexity" \
    "$E" --model $D --data "$TMP/empty.bin"
expect_error "a one-token shard: too few tokens" 1 "one.bin: 1 token, too few" "$E" --model $D --data "$TMP/one.bin"

# best-mask: a NaN weight or moment names the file, the tensor and the element
expect_error "best-mask: a NaN weight names the model folder" 1 "nan: tensor model.layers.0.self_attn.q_proj.weight: weight 7 is nan" \
    "$M" --model "$TMP/nan" --sparsity 0.5 --saliency magnitude --out "$TMP/never.mask"
# best-train: the same check, at load: not "training diverged" at step 1 with an empty log
expect_error "best-train: a NaN weight at load names the folder, the tensor and the element" 1 \
    "nan: tensor model.layers.0.self_attn.q_proj.weight: weight 7 is nan" \
    "$TR" --model "$TMP/nan" --data "$TMP/toks.bin" --out "$TMP/never.nantrain" --steps 1 --seq 8 --batch 1 --quiet
check "best-train: nothing written for a NaN weight" test ! -e "$TMP/never.nantrain"
python3 - $D/model.safetensors "$TMP/moments.safetensors" <<'PY'
# Adam moments for every prunable tensor (exp_avg 0, exp_avg_sq 1), one exp_avg_sq NaN
import json, struct, sys
import numpy as np
sys.path.insert(0, "tests"); from safetensors_py import header
head = header(sys.argv[1])[0]
ts = {}
for k, v in head.items():
    if k.endswith("_proj.weight"):
        ts[k + ".exp_avg"] = np.zeros(v["shape"], np.float32)
        ts[k + ".exp_avg_sq"] = np.ones(v["shape"], np.float32)
ts["model.layers.1.mlp.down_proj.weight.exp_avg_sq"].flat[5] = np.nan
out, off, blobs = {}, 0, []
for k, a in ts.items():
    out[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
    off += a.nbytes
    blobs.append(a.tobytes())
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
expect_error "best-mask: a NaN moment names the moments file" 1 \
    "moments.safetensors: tensor model.layers.1.mlp.down_proj.weight.exp_avg_sq: element 5 is nan" \
    "$M" --model $D --moments "$TMP/moments.safetensors" --sparsity 0.5 --out "$TMP/never.mask"

# A best-train output folder (OUT/model, OUT/state, OUT/log.jsonl) is read as OUT/model.
"$TR" --model $D --data "$TMP/toks.bin" --out "$TMP/trained" --steps 1 --seq 8 --batch 1 --quiet
"$E" --model "$TMP/trained" --data "$TMP/toks.bin" --json --quiet >"$TMP/out.json"
"$E" --model "$TMP/trained/model" --data "$TMP/toks.bin" --json --quiet >"$TMP/outmodel.json"
check "best-eval --model OUT gives the perplexity of OUT/model" python3 -c "
import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:]); assert a['ppl'] == b['ppl'] and a['tokens'] == b['tokens']" \
    "$TMP/out.json" "$TMP/outmodel.json"
check "best-mask --model OUT" "$M" --model "$TMP/trained" --sparsity 0.5 --saliency magnitude --report "$TMP/out.report" --quiet
check "best-pack --model OUT" "$P" --model "$TMP/trained" --out "$TMP/trained.pack" --quiet

if have_shared; then
    S="$SHARED/models/stories260K"
    expect_error "--data /dev/null: too few tokens" 1 "/dev/null: 1 token, too few" "$E" --model "$S" --data /dev/null
    expect_error "--generate with a tokenizer of a larger vocabulary names it" 1 "stories260K: tokenizer vocab 512 is larger than the model's 97" \
        "$E" --model $D --tokenizer "$S" --generate "Once" --max-new-tokens 5
else
    skip "best-eval --data /dev/null and a larger tokenizer: $SHARED not found"
fi

# --- inputs through pipes and FIFOs: read once (the sniff for a shard's magic read the
# first 4 KB of a pipe, then the file was opened again: those bytes were lost, exit 0;
# a FIFO hung) -----------------------------------------------------------------------------
python3 - "$TMP/docs.jsonl" <<'PY'
import json, random, sys
random.seed(2)
words = "the cat and the hat sat on a mat in the sun ünïcödé".split()
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for i in range(400):
        f.write(json.dumps({"text": " ".join(random.choice(words) for _ in range(random.choice([1, 20, 90])))}) + "\n")
PY
if python3 pipelines/make_tokenizer.py "$TMP/tok" "$TMP/docs.jsonl" 20 >/dev/null 2>&1; then
    TOK="$TMP/tok/tokenizer.json"
    "$TK" --tokenizer "$TOK" --ids --quiet "$TMP/docs.jsonl" >"$TMP/ids.txt"
    "$TK" --tokenizer "$TOK" --decode --quiet "$TMP/ids.txt" >"$TMP/dec.file"
    cat "$TMP/ids.txt" | "$TK" --tokenizer "$TOK" --decode --quiet /dev/stdin >"$TMP/dec.pipe"
    check "best-tokenize --decode of a pipe by name (/dev/stdin) decodes every line" cmp "$TMP/dec.file" "$TMP/dec.pipe"
    mkfifo "$TMP/fifo"
    timeout 60 sh -c "cat '$TMP/ids.txt' >'$TMP/fifo'" &
    timeout 60 "$TK" --tokenizer "$TOK" --decode --quiet "$TMP/fifo" >"$TMP/dec.fifo"
    check "best-tokenize --decode of a FIFO: no hang, every line" cmp "$TMP/dec.file" "$TMP/dec.fifo"
    wait
else
    fail "make a tokenizer with pipelines/make_tokenizer.py"
fi
expect_error "a shard through a pipe: a clear error" 1 "must be a named regular file" \
    sh -c "cat '$TMP/toks.bin' | exec '$E' --model $D --data /dev/stdin"
head -c 1000 "$TMP/toks.bin" >"$TMP/cut.bin"
expect_error "a truncated shard: its real size named" 1 "cut.bin: file is 1000 bytes but its header promises" \
    "$E" --model $D --data "$TMP/cut.bin"
if have_shared; then
    S="$SHARED/models/stories260K" V="$SHARED/data/stories260K/valid.jsonl"
    EV="--model $S --seq 256 --max-tokens 16384 --json --quiet"
    "$E" $EV --data "$V" >"$TMP/v.file"
    cat "$V" | "$E" $EV --data /dev/stdin >"$TMP/v.pipe"
    mkfifo "$TMP/vfifo"
    timeout 120 sh -c "cat '$V' >'$TMP/vfifo'" &
    timeout 120 "$E" $EV --data "$TMP/vfifo" >"$TMP/v.fifo"
    wait
    cat >"$TMP/same.py" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["ppl"] == b["ppl"] and a["tokens"] == b["tokens"], (a, b)
PY
    check "best-eval --data /dev/stdin (a pipe by name): the file's perplexity" python3 "$TMP/same.py" "$TMP/v.file" "$TMP/v.pipe"
    check "best-eval --data FIFO: no hang, the file's perplexity" python3 "$TMP/same.py" "$TMP/v.file" "$TMP/v.fifo"
else
    skip "best-eval on text through a pipe and a FIFO: $SHARED not found"
fi

# --- --threads: bounded (100000 crashed inside libgomp, leaving temp files) ----------------
T="--threads 100000 is more than 4 per core"
expect_error "best-eval --threads 100000" 2 "$T" "$E" --model $D --data "$TMP/toks.bin" --threads 100000
expect_error "best-mask --threads 100000" 2 "$T" "$M" --model $D --sparsity 0.5 --saliency magnitude \
    --out "$TMP/never.mask" --threads 100000
expect_error "best-train --threads 100000" 2 "$T" "$TR" --model $D --data "$TMP/toks.bin" --out "$TMP/never.train" \
    --steps 1 --seq 8 --batch 1 --threads 100000
expect_error "best-eval --threads -3 (not a complaint about --seq)" 2 "--threads -3 is negative" \
    "$E" --model $D --data "$TMP/toks.bin" --threads -3
most=$((4 * $(nproc)))
check "--threads $most (4 per core) is accepted" "$E" --model $D --data "$TMP/toks.bin" --threads $most --quiet
if have_shared; then
    expect_error "best-tokenize --threads 100000" 2 "$T" "$TK" --tokenizer "$SHARED/models/stories260K" \
        --out "$TMP/never.bin" --threads 100000 "$SHARED/data/stories260K/valid.jsonl"
else
    skip "best-tokenize --threads: $SHARED not found"
fi

# --- NaN and inf options: refused where they are read (a NaN passes x < lo || x > hi) ------
expect_error "best-mask --sparsity nan (not 'is required')" 2 "--sparsity wants a finite number, got 'nan'" \
    "$M" --model $D --sparsity nan --saliency magnitude --out "$TMP/never.mask"
expect_error "best-eval --temperature nan" 2 "--temperature wants a finite number" \
    "$E" --model $D --data "$TMP/toks.bin" --temperature nan
expect_error "best-eval --top-p nan" 2 "--top-p wants a finite number" "$E" --model $D --data "$TMP/toks.bin" --top-p nan
expect_error "best-eval --top-p 0" 2 "--top-p 0 is outside (0, 1\]" "$E" --model $D --data "$TMP/toks.bin" --top-p 0
expect_error "best-train --lr inf" 2 "--lr wants a finite number, got 'inf'" "$TR" --model $D --data "$TMP/toks.bin" \
    --out "$TMP/never.train" --steps 1 --seq 8 --batch 1 --lr inf

# --- write errors on stdout: exit 1, not 0 ----------------------------------------------
if [ -w /dev/full ]; then
    F="write failed"
    expect_error "best-eval --json > /dev/full" 1 "<stdout>: $F" sh -c "exec '$E' --model $D --data '$TMP/toks.bin' --json --quiet >/dev/full"
    expect_error "best-eval (human line) > /dev/full" 1 "<stdout>: $F" sh -c "exec '$E' --model $D --data '$TMP/toks.bin' --quiet >/dev/full"
    expect_error "best-pack --info > /dev/full" 1 "<stdout>: $F" sh -c "exec '$P' --info '$TMP/ok.pack' >/dev/full"
    expect_error "best-pack --info --json > /dev/full" 1 "<stdout>: $F" sh -c "exec '$P' --info '$TMP/ok.pack' --json >/dev/full"
    expect_error "best-pack --verify > /dev/full" 1 "<stdout>: $F" sh -c "exec '$P' --verify '$TMP/ok.pack' >/dev/full"
    expect_error "best-mask --help > /dev/full" 1 "<stdout>: $F" sh -c "exec '$M' --help >/dev/full"
    if have_shared; then
        S="$SHARED/models/stories260K"
        expect_error "best-eval --generate > /dev/full" 1 "<stdout>: $F" sh -c \
            "exec '$E' --model '$S' --generate 'Once' --max-new-tokens 5 --quiet >/dev/full"
        expect_error "best-eval --generate --json > /dev/full" 1 "<stdout>: $F" sh -c \
            "exec '$E' --model '$S' --generate 'Once' --max-new-tokens 5 --json --quiet >/dev/full"
        echo "Once upon a time" >"$TMP/once.txt"
        expect_error "best-tokenize --ids > /dev/full" 1 "$F" sh -c "exec '$TK' --tokenizer '$S' --ids --quiet '$TMP/once.txt' >/dev/full"
    else
        skip "best-eval --generate and best-tokenize > /dev/full: $SHARED not found"
    fi
else
    skip "write errors on stdout: no writable /dev/full"
fi

check "no temp files left in $TMP" sh -c "! find '$TMP' -name '.*.tmp.*' | grep -q ."
# Error lines are for users: the source location only with BEST_DEBUG=1.
"$BIN/best-eval" --model "$TMP/no-such-model" --data x.bin 2>"$TMP/loc.err"
BEST_DEBUG=1 "$BIN/best-eval" --model "$TMP/no-such-model" --data x.bin 2>"$TMP/loc-dbg.err"
check "an error line names no source location; with BEST_DEBUG=1 it does" sh -c \
    "grep -q 'error: .*no-such-model: not a model folder' '$TMP/loc.err' && ! grep -q '\\[[a-z/_]*\\.c:[0-9]*\\]' '$TMP/loc.err' && grep -q '\\[lib/pack/pack_model.c:[0-9]*\\]\$' '$TMP/loc-dbg.err'"
# --help: no option with two defaults; a string default that is a space is shown quoted
bad=""
for t in best-tokenize best-train best-mask best-eval best-pack; do
    "$BIN/$t" --help >"$TMP/help.$t" 2>&1
    grep -q 'default.*(default' "$TMP/help.$t" && bad="$bad $t"
done
check "--help: no option names two defaults (${bad:-none})" test -z "$bad"
check "--help: best-eval's --join default shown quoted" grep -q -- '--join STR .*(default " ")' "$TMP/help.best-eval"
bad=""
for t in best-tokenize best-train best-mask best-eval best-pack; do
    v=$("$BIN/$t" --version) || bad="$bad $t"
    printf '%s' "$v" | grep -q "^$t [0-9a-z.-]* (OpenBLAS [0-9.]*, [A-Za-z0-9]* kernels[a-zA-Z_, ]*)\$" || bad="$bad $t($v)"
done
check "--version on every tool: NAME, the build's git describe and the BLAS kernels (${bad:-all five})" test -z "$bad"
finish
