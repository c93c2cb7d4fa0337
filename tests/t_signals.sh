#!/bin/sh
# t_signals.sh: a tool killed by SIGTERM, SIGHUP or SIGINT while it writes an output
# removes its temporary file (".NAME.tmp.XXXXXX", lib/base/fileio.h) and dies of the
# signal (exit status 128 + signal, as the shell reports it), leaving nothing behind.
# best-tokenize reads from a FIFO that this script holds open: the shard's temp file
# exists from the start, and the tool stays mid-run (waiting for more text) until killed.
. tests/lib.sh
T="$BIN/best-tokenize"
python3 - "$TMP/docs.jsonl" <<'PY'
import json, random, sys
random.seed(2)
words = "the cat and the hat sat on a mat in the sun while it was raining outside".split()
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for i in range(2000):
        f.write(json.dumps({"text": " ".join(random.choice(words) for _ in range(random.choice([1, 20, 200])))}) + "\n")
PY
python3 pipelines/make_tokenizer.py "$TMP/tok" "$TMP/docs.jsonl" 20 >/dev/null 2>&1 || { fail "make the tokenizer"; finish; }
TOK="$TMP/tok/tokenizer.json"

# kill_mid_write NAME SIGNAL [LAUNCHER...]: starts best-tokenize --out into a fresh folder
# (through LAUNCHER, e.g. env --default-signal=INT), feeds it text through a FIFO, waits
# until its temp file exists, sends SIGNAL, and checks what it left.
kill_mid_write() {
    name=$1 sig=$2; shift 2
    d="$TMP/$sig"
    mkdir "$d" && mkfifo "$d/in.jsonl"
    "$@" "$T" --tokenizer "$TOK" --threads 1 --quiet --out "$d/out.bin" "$d/in.jsonl" 2>"$d/err" &
    pid=$!
    # read-write: never blocks, even if the tool died before opening its end; and less
    # than a pipe's buffer of text, so that the write does not block either
    exec 3<>"$d/in.jsonl"
    head -c 16000 "$TMP/docs.jsonl" >&3
    i=0
    while [ $i -lt 100 ] && ! ls -a "$d" | grep -q '^\.out\.bin\.tmp\.'; do sleep 0.1; i=$((i + 1)); done
    if ! ls -a "$d" | grep -q '^\.out\.bin\.tmp\.'; then
        fail "$name: no temp file appeared (stderr: $(head -c 300 "$d/err"))"
        kill -KILL $pid 2>/dev/null; exec 3>&-; wait $pid 2>/dev/null
        return
    fi
    kill -"$sig" $pid
    # still alive after 10 s (a handler that swallowed the signal): kill it for good
    i=0
    while [ $i -lt 100 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    kill -KILL $pid 2>/dev/null
    wait $pid
    rc=$?
    exec 3>&-
    left=$(ls -A "$d" | grep -v '^in\.jsonl$' | grep -v '^err$' | tr '\n' ' ')
    if [ "$(kill -l $rc 2>/dev/null)" = "$sig" ] && [ -z "$left" ]; then ok "$name"
    else fail "$name (exit $rc = $(kill -l $rc 2>/dev/null), want $sig; left: '$left'; stderr: $(head -c 300 "$d/err"))"; fi
}

# The tools keep a signal they were started with ignored ignored, as sort does: sh starts
# background commands with SIGINT ignored, and nohup (or a runner started by it) ignores
# SIGHUP for everything below. env --default-signal gives the tool the default again.
if env --default-signal=INT true 2>/dev/null; then
    for sig in TERM HUP INT; do
        kill_mid_write "SIG$sig mid-write: temp removed, died of SIG$sig" $sig env --default-signal=$sig
    done
else
    kill_mid_write "SIGTERM mid-write: temp removed, died of SIGTERM" TERM
    kill_mid_write "SIGHUP mid-write: temp removed, died of SIGHUP" HUP
    skip "SIGINT: this env has no --default-signal (a background job's SIGINT is ignored)"
fi

# best-train interrupted (issue 36: it died saying "projected: 57 more steps"): its last line
# says which step is saved where and the command that continues it, and that command does;
# stopped before its first save, it says there is nothing to resume.
python3 -c "
import sys; sys.path.insert(0, 'tests'); from shardio import write_shard
write_shard('$TMP/train.bin', [(7 * i) % 97 for i in range(4000)], 97)"
interrupt_train() { # NAME SIGNAL SAVE_EVERY [LAUNCHER...]: interrupted after step 50 (BEST_TEST_PAUSE)
    name=$1 sig=$2 every=$3; shift 3
    o="$TMP/tr$sig$every"
    BEST_TEST_PAUSE=step-50 "$@" "$BIN/best-train" --model tests/fixtures/model/llama --data "$TMP/train.bin" --seq 16 \
        --batch 2 --steps 1000 --save-every "$every" --threads 1 --out "$o" 2>"$o.err" &
    pid=$!
    i=0 # until it stops itself after step 50
    while [ $i -lt 300 ] && [ "$(sed 's/.*) //' /proc/$pid/stat 2>/dev/null | cut -d' ' -f1)" != T ]; do
        sleep 0.1; i=$((i + 1))
    done
    kill -"$sig" $pid
    kill -CONT $pid
    wait $pid
    rc=$?
    last=$(tail -n 1 "$o.err")
    if [ "$every" -gt 50 ]; then
        check "$name" sh -c "[ '$(kill -l $rc 2>/dev/null)' = $sig ] && [ '$last' = 'best-train: interrupted before the first save (every $every steps): nothing to resume; start the run again' ]"
        return
    fi
    step=$(python3 -c "
from safetensors import safe_open
print(safe_open('$o/state/state.safetensors', 'np').metadata()['step'])" 2>/dev/null)
    check "$name" sh -c "[ '$(kill -l $rc 2>/dev/null)' = $sig ] && [ '$step' = 40 ] && [ '$last' = 'best-train: interrupted; step 40 is saved in $o; continue with: best-train --resume $o' ]"
    check "... and that command continues it (--stop-at step 41)" "$BIN/best-train" --resume "$o" --stop-at 41 --quiet
}
if env --default-signal=INT true 2>/dev/null; then
    interrupt_train "best-train, Ctrl-C (SIGINT) after step 50: step 40 saved, and the command that continues it" INT 40 \
        env --default-signal=INT
fi
interrupt_train "best-train, SIGTERM after step 50: step 40 saved, and the command that continues it" TERM 40
interrupt_train "best-train, SIGTERM before any save: nothing to resume, it says" TERM 100
finish
