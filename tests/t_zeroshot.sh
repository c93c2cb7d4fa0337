#!/bin/sh
# t_zeroshot.sh: best-eval --tasks against tests/zeroshot_ref.py, lm-evaluation-harness's
# requests and loglikelihoods written again in Python with transformers (fp32): every
# loglikelihood within 1e-4, the gold answers equal, acc and acc_norm as the reference's
# loglikelihoods give them. Cases: a random Qwen3 with a byte-level BPE tokenizer.json
# (no BOS; a context of 96 tokens, so that long requests are cut on the left) on
# hand-written records of all seven tasks; with ../shared, stories260K (SentencePiece,
# BOS) on the first documents of its six tasks. Then a pack gives exactly its folder's
# numbers; --limit, --log-samples and --json hold what they say; bad task input fails with
# one line. torch and transformers come from the venv of tests/hf_env.sh.
. tests/lib.sh
. tests/hf_env.sh
BLAS_TORCH=$HF_PY # (a failed line names torch's BLAS beside ours: tests/lib.sh)
E="$BIN/best-eval"
TASKS=arc_easy,arc_challenge,boolq,hellaswag,openbookqa,rte,winogrande

# usage errors first: they need no Python
T0="$TMP/t0"
mkdir -p "$T0"
printf '{"sentence1": "a", "sentence2": "b", "label": 0}\n' >"$T0/rte.jsonl"
expect_error "--tasks without --task-dir (nor BEST_TASK_DIR, nor an installed folder)" 2 \
    "needs the folder of the tasks' files: --task-dir DIR, BEST_TASK_DIR=DIR, or the files in .*/share/best/tasks" \
    env -u BEST_TASK_DIR "$E" --model tests/fixtures/model/qwen3 --tasks rte
expect_error "--tasks with an unknown task" 2 'unknown task "piqa"' "$E" --model tests/fixtures/model/qwen3 --tasks rte,piqa --task-dir "$TMP"
# (it ran arc_easy twice and counted it twice in the mean until 2026-11-28)
expect_error "--tasks naming a task twice" 2 '--tasks: arc_easy named twice' "$E" --model tests/fixtures/model/qwen3 \
    --tasks arc_easy,rte,arc_easy --task-dir "$TMP"
expect_error "--tasks and --data together" 2 "exactly one of" "$E" --model tests/fixtures/model/qwen3 --tasks rte --task-dir "$TMP" --data x
expect_error "--limit without --tasks" 2 "go with --tasks" "$E" --model tests/fixtures/model/qwen3 --data x --limit 3
if ! nvidia-smi -L >/dev/null 2>&1; then
    expect_error "--tasks --device cuda without a GPU" 1 "device cuda" "$E" --model tests/fixtures/model/qwen3 --tasks rte --task-dir "$T0" --device cuda
fi

if [ ! -f "$HF_VENV/.complete" ] || ! "$HF_PY" -c 'import torch, transformers, tokenizers' 2>/dev/null; then
    skip "zero-shot reference: no torch + transformers environment at $HF_VENV (run make deps)"
    finish
fi

# hand-written records of the seven tasks in the Hugging Face layout: long passages (cut
# at 96 tokens), labels of every spelling, HellaSwag's brackets and lower-case ctx_b
T="$TMP/tasks"
mkdir -p "$T"
python3 - "$T" <<'EOF'
import json, sys, os
d = sys.argv[1]
long = "The committee met again on Tuesday, and after a long debate about the budget, the roads and the new school, " * 3
recs = {
    "arc_easy": [
        {"id": "Mercury_7", "question": "Which of these is a gas at room temperature?", "choices": {"text": ["ice", "steam", "granite", "iron"], "label": ["A", "B", "C", "D"]}, "answerKey": "B"},
        {"id": "NYSEDREGENTS_1", "question": "What do plants need to make food?", "choices": {"text": ["sunlight", "sand", "salt"], "label": ["1", "2", "3"]}, "answerKey": "1"},
        {"id": "x", "question": long + "what happened?", "choices": {"text": ["they agreed", "they left", "nothing", "a storm", "a vote"], "label": ["A", "B", "C", "D", "E"]}, "answerKey": "E"}],
    "arc_challenge": [
        {"id": "c1", "question": "An astronomer observes that a planet rotates faster. What is the most likely effect?", "choices": {"text": ["Shorter days", "Longer years", "Colder poles", "More moons"], "label": ["A", "B", "C", "D"]}, "answerKey": "A"}],
    "boolq": [
        {"question": "is the sky blue on a clear day", "passage": "On a clear day the sky looks blue because air scatters blue light more than red light.", "idx": 0, "label": 1},
        {"question": "do fish breathe air", "passage": long, "idx": 1, "label": 0}],
    "hellaswag": [
        {"ind": 24, "activity_label": "Roof shingle removal", "ctx_a": "A man is sitting on a roof.", "ctx_b": "he", "endings": ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.", "is holding a rubik's cube.", "starts pulling up roofing on a roof."], "source_id": "activitynet~v_-JhWjGDPHMY", "split": "val", "split_type": "indomain", "label": "3"},
        {"ind": 92, "activity_label": "Home and Garden", "ctx_a": "[header] How to plant a tree [title] Dig a hole. [step] Make it twice as wide as the roots.", "ctx_b": "", "endings": ["[substeps] Water  the hole.", "Put the tree in upside down.", "Eat the tree.", "[title] Add soil around the roots."], "label": "3"}],
    "openbookqa": [
        {"id": "7-980", "question_stem": "The sun is responsible for", "choices": {"text": ["puppies learning new tricks", "children growing up and getting old", "flowers wilting in a vase", "plants sprouting, blooming and wilting"], "label": ["A", "B", "C", "D"]}, "answerKey": "D"}],
    "rte": [
        {"sentence1": "Dana Reeve, the widow of the actor Christopher Reeve, has died of lung cancer at age 44.", "sentence2": "Christopher Reeve had an accident.", "label": 1, "idx": 0},
        {"sentence1": long, "sentence2": "The committee met.", "label": 0, "idx": 1}],
    "winogrande": [
        {"sentence": "Sarah was a much better surgeon than Maria so _ always got the harder cases.", "option1": "Sarah", "option2": "Maria", "answer": "1"},
        {"sentence": "The trophy doesn't fit into the brown suitcase because the _ is too large.", "option1": "trophy", "option2": "suitcase", "answer": "1"}],
}
for name, rs in recs.items():
    with open(os.path.join(d, name + ".jsonl"), "w") as f:
        for r in rs:
            f.write(json.dumps(r) + "\n")
EOF

# a byte-level BPE tokenizer with merges (so that tokens straddle the context's end) and a
# random Qwen3 of its vocabulary with a context of 96 tokens
python3 pipelines/make_corpus.py "$TMP/corpus.jsonl" 60 3
python3 pipelines/make_tokenizer.py "$TMP/tok" "$TMP/corpus.jsonl" 80 2>/dev/null
V=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); print(len(t["model"]["vocab"]) + len(t["added_tokens"]))' "$TMP/tok/tokenizer.json")
"$HF_PY" tests/zeroshot_ref.py model "$TMP/qwen" "$V" 96 qwen3 2>"$TMP/py.err" || fail "make the random Qwen3: $(tail -n 1 "$TMP/py.err")"
"$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks $TASKS --task-dir "$T" --log-samples "$TMP/qs.jsonl" --json \
    --quiet >"$TMP/qr.json" 2>"$TMP/qerr" || fail "best-eval --tasks on the random Qwen3 ($(tail -n 1 "$TMP/qerr"))"
# the reference (not again under the sanitizers: the same numbers)
if [ "$SAN" != 1 ]; then
    "$HF_PY" tests/zeroshot_ref.py check "$TMP/qwen" "$TMP/tok/tokenizer.json" none "$T" $TASKS 0 "$TMP/qs.jsonl" "$TMP/qr.json" 2>"$TMP/py.err" |
        sed 's/^\(n*o*t* *ok - \)/\1random Qwen3, byte-level BPE: /' >"$TMP/ref.out"
    cat "$TMP/ref.out"
    grep -q "^not ok" "$TMP/ref.out" && FAILED=1
    [ "$(grep -c '^ok' "$TMP/ref.out")" = 7 ] || fail "the reference checked all seven tasks ($(tail -n 1 "$TMP/py.err"))"
    grep -q "([1-9][0-9]* truncated" "$TMP/ref.out" && ok "requests were cut on the left (the truncation path ran)" ||
        fail "no request was long enough to be cut on the left"
fi

# MMLU (issue 40): hand-written records of six subjects of its four groups in cais/mmlu's
# layout, questions with whitespace to strip (ASCII, no-break and ideographic spaces), and
# a dev split of 5 records a subject; at 0, 1 and 5 shots against the reference's prompts
# and loglikelihoods (the long ones cut on the left at 96 tokens), each subject's acc and
# stderr, each group's and mmlu's pooled as the harness does
M="$TMP/mmlu"
mkdir -p "$M" "$TMP/badm"
python3 - "$M" <<'EOF'
import json, os, sys
d = sys.argv[1]
subjects = ["abstract_algebra", "anatomy", "business_ethics", "econometrics", "formal_logic", "world_religions"]
with open(os.path.join(d, "mmlu.jsonl"), "w") as f:
    for i, s in enumerate(subjects):
        for j in range(2 + i % 2):
            q = ["  What is %d + %d? " % (i, j), "\u00a0Which one is %s?\u3000" % s.replace("_", " "), "Name it.\n"][j]
            f.write(json.dumps({"question": q, "subject": s, "choices": ["one", "two %d" % j, "a long third choice", "four"],
                                "answer": (i + j) % 4}) + "\n")
with open(os.path.join(d, "mmlu_dev.jsonl"), "w") as f:
    for s in subjects:
        for j in range(5):
            f.write(json.dumps({"question": "Dev %d of %s?" % (j, s), "subject": s, "choices": ["w", "x", "y", "z"],
                                "answer": j % 4}) + "\n")
EOF
for K in 0 1 5; do
    "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks mmlu --num-fewshot $K --task-dir "$M" \
        --log-samples "$TMP/ms$K.jsonl" --json --quiet >"$TMP/mr$K.json" 2>"$TMP/merr" ||
        fail "best-eval --tasks mmlu --num-fewshot $K ($(tail -n 1 "$TMP/merr"))"
    if [ "$SAN" != 1 ]; then
        "$HF_PY" tests/zeroshot_ref.py check "$TMP/qwen" "$TMP/tok/tokenizer.json" none "$M" mmlu 0 "$TMP/ms$K.jsonl" \
            "$TMP/mr$K.json" $K 2>"$TMP/py.err" | sed "s/^\(n*o*t* *ok - \)/\1mmlu $K-shot, random Qwen3: /" >"$TMP/ref.out"
        cat "$TMP/ref.out"
        grep -q "^not ok" "$TMP/ref.out" && FAILED=1
        [ "$(grep -c '^ok' "$TMP/ref.out")" = 11 ] ||
            fail "mmlu $K-shot: the reference checked 6 subjects, 4 groups and mmlu ($(tail -n 1 "$TMP/py.err"))"
    fi
done
expect_error "--num-fewshot for a task without its training split" 1 "no rte_train.jsonl" \
    "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks rte --num-fewshot 1 --task-dir "$T"
# the seven tasks at 1 and 2 shots: their records twice over as a training split (the
# sampler draws K + 1 for the tasks evaluated on validation), against the reference's
# prompts (its prompt_hash), loglikelihoods and metrics
F="$TMP/fewshot"
mkdir -p "$F"
for t in $(echo $TASKS | tr ',' ' '); do
    cp "$T/$t.jsonl" "$F/$t.jsonl"
    cat "$T/$t.jsonl" "$T/$t.jsonl" "$T/$t.jsonl" >"$F/${t}_train.jsonl"
done
for K in 1 2; do
    "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks $TASKS --num-fewshot $K --task-dir "$F" \
        --log-samples "$TMP/fs$K.jsonl" --json --quiet >"$TMP/fr$K.json" 2>"$TMP/ferr" ||
        fail "best-eval --tasks (seven) --num-fewshot $K ($(tail -n 1 "$TMP/ferr"))"
    if [ "$SAN" != 1 ]; then
        "$HF_PY" tests/zeroshot_ref.py check "$TMP/qwen" "$TMP/tok/tokenizer.json" none "$F" $TASKS 0 "$TMP/fs$K.jsonl" \
            "$TMP/fr$K.json" $K 2>"$TMP/py.err" | sed "s/^\(n*o*t* *ok - \)/\1$K-shot, random Qwen3: /" >"$TMP/ref.out"
        cat "$TMP/ref.out"
        grep -q "^not ok" "$TMP/ref.out" && FAILED=1
        [ "$(grep -c '^ok' "$TMP/ref.out")" = 7 ] || fail "$K-shot: the reference checked the seven tasks ($(tail -n 1 "$TMP/py.err"))"
    fi
done
expect_error "--num-fewshot 6 with 5 dev records a subject" 1 "5 records of subject abstract_algebra, fewer than the 6" \
    "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks mmlu_abstract_algebra --num-fewshot 6 --task-dir "$M"
mkdir -p "$TMP/nodev" && cp "$M/mmlu.jsonl" "$TMP/nodev/"
expect_error "--num-fewshot without mmlu_dev" 1 "no mmlu_dev.jsonl" \
    "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks mmlu_stem --num-fewshot 1 --task-dir "$TMP/nodev"
printf '{"question": "q", "subject": "cooking", "choices": ["a", "b", "c", "d"], "answer": 0}\n' >"$TMP/badm/mmlu.jsonl"
expect_error "an MMLU record of an unknown subject" 1 'mmlu.jsonl:1: subject "cooking" is not one of' \
    "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks mmlu --task-dir "$TMP/badm"

# GSM8K (issue 40): hand-written records in openai/gsm8k's layout and a train split for the
# examples; a random Qwen3 with a context of 320 tokens (the harness leaves 256 of them to
# the generation); at 0 and 3 shots against tests/gsm8k_ref.py: the prompts byte for byte
# (the examples drawn as random.Random(1234).sample does), the greedy generations, both
# filters' answers, exact_match and its stderr
G="$TMP/gsm"
mkdir -p "$G"
python3 - "$G" <<'EOF'
import json, os, sys
d = sys.argv[1]
test = [("Natalia sold clips to 48 of her friends in April, and then half as many in May. How many in all?",
         "In May she sold 48/2 = <<48/2=24>>24.\nAltogether 48+24 = <<48+24=72>>72.\n#### 72"),
        ("Weng earns $12 an hour. She worked 50 minutes. How much did she earn?",
         "12/60 = $<<12/60=0.2>>0.2 a minute, so 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10"),
        ("A shop had 1,200 pens and sold 350. How many are left?", "1,200 - 350 = 850\n#### 850"),
        ("Is the answer negative? 3 - 5 = ?", "3 - 5 = -2.\n#### -2")]
with open(os.path.join(d, "gsm8k.jsonl"), "w") as f:
    for q, a in test:
        f.write(json.dumps({"question": q, "answer": a}) + "\n")
with open(os.path.join(d, "gsm8k_train.jsonl"), "w") as f:
    for i in range(9):
        f.write(json.dumps({"question": "Tom has %d apples and buys %d more. How many now?" % (i, i + 1),
                            "answer": "He has %d + %d = %d apples.\n#### %d" % (i, i + 1, 2 * i + 1, 2 * i + 1)}) + "\n")
EOF
"$HF_PY" tests/zeroshot_ref.py model "$TMP/qwen320" "$V" 320 qwen3 2>"$TMP/py.err" || fail "make the random Qwen3 of 320 positions: $(tail -n 1 "$TMP/py.err")"
for K in 0 3; do
    "$E" --model "$TMP/qwen320" --tokenizer "$TMP/tok" --tasks gsm8k --num-fewshot $K --task-dir "$G" \
        --log-samples "$TMP/gs$K.jsonl" --json --quiet >"$TMP/gr$K.json" 2>"$TMP/gerr" ||
        fail "best-eval --tasks gsm8k --num-fewshot $K ($(tail -n 1 "$TMP/gerr"))"
    if [ "$SAN" != 1 ]; then
        "$HF_PY" tests/gsm8k_ref.py "$TMP/qwen320" "$TMP/tok/tokenizer.json" none "$G" $K 0 "$TMP/gs$K.jsonl" \
            "$TMP/gr$K.json" 2>"$TMP/py.err" | sed 's/^\(n*o*t* *ok - \)/\1random Qwen3: /' >"$TMP/ref.out"
        cat "$TMP/ref.out"
        grep -q "^not ok" "$TMP/ref.out" && FAILED=1
        grep -q "^ok" "$TMP/ref.out" || grep -q "^not ok" "$TMP/ref.out" || fail "gsm8k $K-shot: no reference line ($(tail -n 1 "$TMP/py.err"))"
    fi
done
expect_error "--tasks gsm8k on a model whose context leaves no room for 256 new tokens" 1 "leaves no room" \
    "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks gsm8k --task-dir "$G"
expect_error "--num-fewshot 10 with 9 train records" 1 "9 train records (gsm8k_train), fewer than the 10" \
    "$E" --model "$TMP/qwen320" --tokenizer "$TMP/tok" --tasks gsm8k --num-fewshot 10 --task-dir "$G"

# --json and --log-samples hold what they say
python3 - "$TMP/qr.json" "$TMP/qs.jsonl" <<'EOF' && ok "--json: every task, acc and stderr, acc_norm where the harness has it, the means; --log-samples: a line per document" || fail "--json / --log-samples contents"
import json, sys, math
r = json.load(open(sys.argv[1]))
s = [json.loads(l) for l in open(sys.argv[2])]
t = r["tasks"]
assert set(t) == {"arc_easy", "arc_challenge", "boolq", "hellaswag", "openbookqa", "rte", "winogrande"}, t.keys()
assert all(("acc_norm" in t[k]) == (k in ("arc_easy", "arc_challenge", "hellaswag", "openbookqa")) for k in t)
assert t["arc_easy"]["n"] == 3 and t["arc_easy"]["requests"] == 12 and t["winogrande"]["requests"] == 4
for k in t:
    docs = [x for x in s if x["task"] == k]
    assert len(docs) == t[k]["n"], k
    acc = sum(x["acc"] for x in docs) / len(docs)
    assert abs(acc - t[k]["acc"]) < 1e-12, (k, acc)
    sd = math.sqrt(sum((x["acc"] - acc) ** 2 for x in docs) / (len(docs) - 1)) / math.sqrt(len(docs)) if len(docs) > 1 else None
    assert (sd is None and t[k]["acc_stderr"] is None) or abs(sd - t[k]["acc_stderr"]) < 1e-12, (k, sd)
    assert all(x["pred"] == max(range(len(x["lls"])), key=lambda i: (x["lls"][i], -i)) for x in docs)
    assert all(len(x["prompt_hash"]) == 64 for x in docs)
assert abs(r["mean_acc"] - sum(t[k]["acc"] for k in t) / 7) < 1e-12
assert r["n_tasks"] == 7 and "harness" in r and r["tokenizer"].startswith("no BOS")
EOF

# a pack gives its folder's numbers exactly (the chunks decode each weight as model_eval does)
"$BIN/best-mask" --model "$TMP/qwen" --sparsity 0.7 --saliency magnitude --apply --out-model "$TMP/q70" --quiet &&
    cp "$TMP/tok/tokenizer.json" "$TMP/q70/" &&
    "$BIN/best-pack" --model "$TMP/q70" --out "$TMP/q70.pack" --quiet || fail "prune and pack the random Qwen3"
"$E" --model "$TMP/q70" --tasks $TASKS --task-dir "$T" --log-samples "$TMP/f.jsonl" --quiet >"$TMP/f.txt" 2>&1 &&
    "$E" --model "$TMP/q70.pack" --tasks $TASKS --task-dir "$T" --log-samples "$TMP/p.jsonl" --quiet >"$TMP/p.txt" 2>&1 &&
    cmp -s "$TMP/f.jsonl" "$TMP/p.jsonl" && cmp -s "$TMP/f.txt" "$TMP/p.txt" &&
    ok "a pack of the model pruned to 70%: the same loglikelihoods (every bit) and table as its folder" ||
    fail "pack against folder: $(diff "$TMP/f.jsonl" "$TMP/p.jsonl" | head -c 300)"

# --limit keeps the first documents; a bad record fails with one line naming file:line
"$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks arc_easy,rte --task-dir "$T" --limit 1 --json --quiet >"$TMP/l.json" &&
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["tasks"]; assert t["arc_easy"]["n"] == 1 and t["rte"]["n"] == 1 and t["rte"]["acc_stderr"] is None' "$TMP/l.json" &&
    ok "--limit 1: one document a task (no standard error of one)" || fail "--limit 1"
mkdir -p "$TMP/bad"
printf '{"sentence1": "a", "sentence2": "b", "label": 0}\n{"sentence1": "a", "label": 0}\n' >"$TMP/bad/rte.jsonl"
expect_error "a record without a field" 1 'rte.jsonl:2: no string field "sentence2"' "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks rte --task-dir "$TMP/bad"
expect_error "a task file that is not there" 1 "no boolq.jsonl" "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks boolq --task-dir "$TMP/bad"
# (issue 36) every task is read before the table: a missing second one is the one line, no
# header printed first; "all" names the seven; BEST_TASK_DIR stands for --task-dir
"$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks rte,boolq --task-dir "$T0" >"$TMP/hdr.out" 2>"$TMP/hdr.err"
rc=$?
check "--tasks rte,boolq without boolq's file: exit 1, nothing on stdout (no table header)" sh -c \
    "[ $rc = 1 ] && [ ! -s '$TMP/hdr.out' ] && grep -q 'no boolq.jsonl' '$TMP/hdr.err'"
expect_error "--tasks all: the seven tasks (the first file missing here: arc_easy)" 1 "no arc_easy.jsonl" \
    "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks all --task-dir "$T0"
check "BEST_TASK_DIR=DIR stands for --task-dir DIR" sh -c \
    "BEST_TASK_DIR='$T0' '$E' --model '$TMP/qwen' --tokenizer '$TMP/tok' --tasks rte --json --quiet | grep -q '\"rte\"'"
[ ! -e "$TMP/bad/s.jsonl" ] && "$E" --model "$TMP/qwen" --tokenizer "$TMP/tok" --tasks rte,boolq --task-dir "$TMP/bad" --log-samples "$TMP/bad/s.jsonl" >/dev/null 2>&1
[ ! -e "$TMP/bad/s.jsonl" ] && [ -z "$(ls -A "$TMP/bad" | grep -v rte.jsonl)" ] && ok "a failed run leaves no --log-samples file" || fail "a failed run left $(ls "$TMP/bad")"

# stories260K (SentencePiece, BOS) on the first documents of ../shared/tasks
if have_shared; then
    S="$SHARED/models/stories260K" ST=arc_easy,arc_challenge,hellaswag,openbookqa,rte,winogrande
    "$E" --model "$S" --tasks $ST --task-dir "$SHARED/tasks" --limit 12 --log-samples "$TMP/ss.jsonl" --json --quiet \
        >"$TMP/sr.json" 2>"$TMP/serr" || fail "best-eval --tasks on stories260K ($(tail -n 1 "$TMP/serr"))"
    if [ "$SAN" != 1 ]; then
        "$HF_PY" tests/zeroshot_ref.py check "$S" "best:$BIN:$S" 1 "$SHARED/tasks" $ST 12 "$TMP/ss.jsonl" "$TMP/sr.json" 2>"$TMP/py.err" |
            sed 's/^\(n*o*t* *ok - \)/\1stories260K, SentencePiece with BOS: /' >"$TMP/sref.out"
        cat "$TMP/sref.out"
        grep -q "^not ok" "$TMP/sref.out" && FAILED=1
        [ "$(grep -c '^ok' "$TMP/sref.out")" = 6 ] || fail "the reference checked stories260K's six tasks ($(tail -n 1 "$TMP/py.err"))"
    fi
else
    skip "stories260K on ../shared/tasks: ../shared not found"
fi
finish
