#!/bin/sh
# same_outputs.sh: are the tools' outputs the same bytes as a base commit's? For refactors
# that promise "behaviour unchanged" (issue 37): perplexities, masks, packs and logs.
#
#   sh tests/same_outputs.sh [BASE]      BASE a commit (default HEAD~1)
#
# Builds BASE's tools (make tools, CPU only: NVCC=none) in a temporary git worktree, and
# takes the new side's from $BIN (the working tree's bin/, built by the caller with make).
# BASE is built with the new side's version string (BEST_VERSION, from best-train
# --version), which best-train writes into config.json's "best" block and a pack copies:
# a difference there would name the build, not the behaviour.
# Runs the same fixed commands with each (below), one side after the other in the same
# folder ($TMP/run), so that every path a tool records is the same on both sides, then
# compares every file the two sides wrote, byte for byte: one "ok - ..." or "not ok - ..."
# line per file (tests/lib.sh's protocol), a summary of what differs under each "not ok".
# Not in make test (it builds another commit: minutes on 2 cores).
#
# The commands, on stories260K with ../shared (tokenizer, corpus, tasks), else on the tiny
# LLaMA fixture with a random shard (tokenize, text perplexity, tasks and generation skipped):
#   best-tokenize  a corpus to a shard, and --ids
#   best-train     8 steps with a cubic sparsity schedule to 0.5 (2 updates), masks and
#                  moments saved: the model folder, the state, masks/, moments/, log.jsonl
#   best-mask      second-order from the run's moments (mask, --report, --plot), and
#                  --method magnitude, wanda, sparsegpt (--apply: the pruned folder)
#   best-pack      the trained folder; the sparsegpt folder in int8; --info --json
#   best-eval      --json perplexity on the shard with the folder and with the pack, on
#                  text; --tasks (arc_easy, hellaswag, 5 documents, --log-samples);
#                  --generate greedy from the folder and from the pack
# and each command's exit status. stderr is kept for failures, not compared (timings).
#
# Removed before comparing, from the JSON and JSON lines of files whose bytes differ, at any
# depth: the timings, keys that are or end in seconds, elapsed, time, date or timestamp
# (seconds, prompt_seconds), that end in _s or _ms (mask_update_s), or hold a per_s
# (tokens_per_s, tokens_per_s_avg, overall_tokens_per_s). Not compared at all: stderr, and
# best-train's OUT/.lock (the pid of the last writer). Paths are the same on both sides
# (one folder, $TMP/run). Every other difference fails, in safetensors metadata too.
. tests/lib.sh
BASE=${1:-HEAD~1}
SHA=$(git rev-parse --verify -q "$BASE^{commit}") || { fail "$BASE: not a commit"; finish; }
for t in tokenize train mask pack eval; do
    [ -x "$BIN/best-$t" ] || { fail "$BIN/best-$t not built (make tools first)"; finish; }
done
WT="$TMP/base"
trap 'git worktree remove --force "$WT" 2>/dev/null; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

# --- BASE's tools ------------------------------------------------------------------------
echo "# building $BASE ($(git log -1 --format='%h %s' "$SHA" | cut -c1-70)) in a worktree"
if ! git worktree add -q --detach "$WT" "$SHA" 2>"$TMP/wt.err"; then
    fail "git worktree add $BASE: $(cat "$TMP/wt.err")"; finish
fi
VERSION=$("$BIN/best-train" --version | awk '{ print $2; exit }')
if ! (cd "$WT" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -j"${JOBS:-2}" tools NVCC=none \
        BEST_VERSION="$VERSION") >"$TMP/build.log" 2>&1; then
    fail "make tools at $BASE: $(tail -n 5 "$TMP/build.log")"; finish
fi
OLD="$WT/bin"

# --- the inputs, the same for both sides --------------------------------------------------
IN="$TMP/in"
mkdir -p "$IN"
S="$SHARED/models/stories260K"
if [ -d "$S" ] && [ -f "$SHARED/data/stories260K/valid.jsonl" ]; then
    M=$(cd "$S" && pwd)
    head -n 300 "$SHARED/data/stories260K/valid.jsonl" >"$IN/corpus.jsonl"
    TASKS=$( [ -d "$SHARED/tasks" ] && cd "$SHARED/tasks" && pwd)
else
    M=$(pwd)/tests/fixtures/model/llama
    python3 -c "
import json, random, sys; sys.path.insert(0, 'tests'); from shardio import write_shard
v = json.load(open('$M/config.json'))['vocab_size']; random.seed(37)
write_shard('$IN/tok.bin', [random.randrange(v) for _ in range(4096)], v)" ||
        { fail "the random shard (python3 tests/shardio.py)"; finish; }
    skip "no $S: best-tokenize, text perplexity, --tasks and --generate not compared"
    TASKS=
fi

# run NAME CMD...: CMD in the current folder, its stdout in NAME.out (when non-empty),
# stderr in NAME.err (not compared), its exit status appended to ./status
run() {
    name=$1; shift
    "$@" >"$name.out" 2>"$name.err"
    echo "$name $?" >>status
    [ -s "$name.out" ] || rm -f "$name.out"
}

# side BIN: every command with BIN's tools, in $TMP/run
side() {
    B=$1 R="$TMP/run" T2="--threads 2"
    rm -rf "$R" && mkdir -p "$R" && cd "$R" || return 1
    if [ -f "$IN/corpus.jsonl" ]; then
        run tokenize "$B/best-tokenize" --tokenizer "$M/tokenizer.model" --out tok.bin $T2 --quiet "$IN/corpus.jsonl"
        run tokenize-ids "$B/best-tokenize" --tokenizer "$M/tokenizer.model" --ids $T2 --quiet "$IN/corpus.jsonl"
    else
        cp "$IN/tok.bin" tok.bin
    fi
    run train "$B/best-train" --model "$M" --data tok.bin --out train --steps 8 --batch 2 --seq 64 --lr 1e-3 \
        --sparsity 0.5 --prune-updates 2 --save-masks --moments-every 4 $T2 --device cpu --quiet
    run mask-second "$B/best-mask" --model train/model --moments train/moments/step-8.safetensors --sparsity 0.6 \
        --saliency second --out second.mask --report second.json --plot second.svg $T2 --quiet
    run mask-magnitude "$B/best-mask" --model "$M" --sparsity 0.5 --method magnitude --out magnitude.mask $T2 --quiet
    run mask-wanda "$B/best-mask" --model "$M" --sparsity 0.5 --method wanda --calib tok.bin --nsamples 4 --seq 64 \
        --out wanda.mask $T2 --quiet
    run mask-sparsegpt "$B/best-mask" --model "$M" --sparsity 0.5 --method sparsegpt --calib tok.bin --nsamples 4 \
        --seq 64 --out sparsegpt.mask --apply --out-model sparsegpt $T2 --quiet
    run pack "$B/best-pack" --model train/model --out train.pack --quiet
    run pack-int8 "$B/best-pack" --model sparsegpt --quant int8 --out sparsegpt-int8.pack --quiet
    run pack-info "$B/best-pack" --info train.pack --json
    E="$B/best-eval"
    run ppl-folder "$E" --model train/model --data tok.bin --seq 64 --batch 4 --json $T2 --device cpu --quiet
    run ppl-pack "$E" --model train.pack --data tok.bin --seq 64 --batch 4 --json $T2 --device cpu --quiet
    run ppl-int8 "$E" --model sparsegpt-int8.pack --data tok.bin --seq 64 --batch 4 --json $T2 --device cpu --quiet
    if [ -f "$IN/corpus.jsonl" ]; then
        run ppl-text "$E" --model "$M" --data "$IN/corpus.jsonl" --seq 64 --batch 4 --json $T2 --device cpu --quiet
        run generate "$E" --model "$M" --generate "Once upon a time" --max-new-tokens 40 --json $T2 --device cpu --quiet
        run generate-pack "$E" --model train.pack --tokenizer "$M/tokenizer.model" --generate "Once upon a time" \
            --max-new-tokens 40 --json $T2 --device cpu --quiet
    fi
    if [ -n "$TASKS" ]; then
        run tasks "$E" --model train/model --tokenizer "$M/tokenizer.model" --tasks arc_easy,hellaswag \
            --task-dir "$TASKS" --limit 5 --log-samples tasks-samples.jsonl --json $T2 --device cpu --quiet
    fi
    cd - >/dev/null
}

# The side that runs second could find the first one's files if both wrote into one
# folder: each side starts from an empty $TMP/run and is moved away when done.
echo "# running the commands with $BASE's tools"
side "$OLD" && mv "$TMP/run" "$TMP/old" || { fail "could not run the old side"; finish; }
echo "# running the commands with $BIN"
side "$BIN" && mv "$TMP/run" "$TMP/new" || { fail "could not run the new side"; finish; }

# --- the comparison ----------------------------------------------------------------------
cat >"$TMP/same.py" <<'PY'
# same.py OLD NEW FILE: exit 0 when FILE is the same in both once normalised, else print
# what differs (a few lines) and exit 1. Called only for files whose bytes differ.
import json, os, re, sys
sys.path.insert(0, "tests")
TIMING = re.compile(r"(^|_)(seconds|elapsed|time|date|timestamp)$|_m?s$|(^|_)per_s(_|$)")

def strip(x, path=()):
    if isinstance(x, dict):
        return {k: strip(v, path + (k,)) for k, v in x.items() if not TIMING.search(k)}
    if isinstance(x, list):
        return [strip(v, path) for v in x]
    return x

def diffs(a, b, where=""):
    """Every difference, as "PATH: OLD -> NEW" lines."""
    if type(a) != type(b) or not isinstance(a, (dict, list)):
        return [] if a == b else [f"{where or '.'}: {json.dumps(a)[:80]} -> {json.dumps(b)[:80]}"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += [f"{where}.{k}: only in {'new' if k not in a else 'old'}"] if k not in a or k not in b \
                else diffs(a[k], b[k], f"{where}.{k}")
        return out
    out = [f"{where}: {len(a)} items -> {len(b)}"] if len(a) != len(b) else []
    for i, (x, y) in enumerate(zip(a, b)):
        out += diffs(x, y, f"{where}[{i}]")
    return out


def show(lines):
    print("\n".join(lines[:6] + ([f"... and {len(lines) - 6} more"] if len(lines) > 6 else [])))

old, new, name = sys.argv[1], sys.argv[2], sys.argv[3]
a, b = os.path.join(old, name), os.path.join(new, name)
ba, bb = open(a, "rb").read(), open(b, "rb").read()
try:
    if name.endswith(".jsonl"):
        ja = [json.loads(l) for l in ba.decode().splitlines() if l.strip()]
        jb = [json.loads(l) for l in bb.decode().splitlines() if l.strip()]
    else:
        ja, jb = json.loads(ba), json.loads(bb)
except ValueError:
    ja = jb = None
if ja is not None:
    d = diffs(strip(ja), strip(jb))
    if not d:
        print("timing fields aside")
        sys.exit(0)
    show(d)
    sys.exit(1)
if name.endswith(".pack"):             # a tar: the members that differ
    import tarfile
    def members(path):
        with tarfile.open(path) as t:
            return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
    try:
        ma, mb = members(a), members(b)
        show([f"member {k}: " + ("only in " + ("new" if k not in ma else "old") if k not in ma or k not in mb
                                  else f"{len(ma[k])} -> {len(mb[k])} bytes")
              for k in ma | mb if ma.get(k) != mb.get(k)] or ["the same members, in another layout"])
        sys.exit(1)
    except tarfile.TarError:
        pass
if name.endswith((".safetensors", ".mask")):
    from safetensors_py import SIZE, header, raw
    try:
        (ha, ma, _), (hb, mb, _) = header(a), header(b)
        ra, rb = raw(a), raw(b)
    except ValueError as e:
        print(f"not safetensors: {e}"); sys.exit(1)
    lines = [f"metadata {k}: {ma.get(k)!r:.60} -> {mb.get(k)!r:.60}" for k in sorted(set(ma) | set(mb)) if ma.get(k) != mb.get(k)]
    lines += [f"tensor {k}: only in {'new' if k not in ra else 'old'}" for k in sorted(set(ra) ^ set(rb))]
    for k in [k for k in ra if k in rb and ra[k] != rb[k]]:
        (da, sa, xa), (db, sb, xb) = ra[k], rb[k]
        if (da, sa) != (db, sb):
            lines.append(f"tensor {k}: {da} {sa} -> {db} {sb}")
        else:
            w = SIZE.get(da, 1)
            n = sum(1 for i in range(0, len(xa), w) if xa[i:i + w] != xb[i:i + w])
            lines.append(f"tensor {k}: {da} {sa}, {n} of {len(xa) // w} elements differ")
    show(lines or ["the same tensors and metadata, in another layout"])
    sys.exit(1)
i = next((i for i in range(min(len(ba), len(bb))) if ba[i] != bb[i]), min(len(ba), len(bb)))
print(f"{len(ba)} -> {len(bb)} bytes, first difference at byte {i}")
sys.exit(1)
PY

(cd "$TMP/old" && find . -type f | sed 's|^\./||') >"$TMP/old.list"
(cd "$TMP/new" && find . -type f | sed 's|^\./||') >"$TMP/new.list"
sort -u "$TMP/old.list" "$TMP/new.list" | grep -v -e '\.err$' -e '^train/\.lock$' >"$TMP/all.list"
n=0
while IFS= read -r f; do
    n=$((n + 1))
    if [ ! -f "$TMP/old/$f" ] || [ ! -f "$TMP/new/$f" ]; then
        fail "$f: written only by the $( [ -f "$TMP/old/$f" ] && echo "$BASE side" || echo 'working tree')"
    elif cmp -s "$TMP/old/$f" "$TMP/new/$f"; then
        ok "$f"
    elif why=$(python3 "$TMP/same.py" "$TMP/old" "$TMP/new" "$f" 2>&1); then
        ok "$f ($why)"
    else
        fail "$f differs"
        echo "$why" | sed 's/^/#   /'
    fi
done <"$TMP/all.list"
if ! cmp -s "$TMP/old/status" "$TMP/new/status"; then
    for s in "$TMP/old" "$TMP/new"; do
        awk '$2 != 0 { print $1 }' "$s/status" | while read -r c; do
            echo "# $(basename "$s") side, $c exited non-zero: $(tail -n 2 "$s/$c.err" | tr '\n' ' ')"
        done
    done
fi
grep -q ' [^0]' "$TMP/new/status" && fail "commands that failed on the working tree's side: $(awk '$2 != 0 { printf "%s ", $1 }' "$TMP/new/status")"
echo "# $n files compared, $BASE ($(git rev-parse --short "$SHA")) against the working tree"
finish
