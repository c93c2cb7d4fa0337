"""zeroshot_ref.py: lm-evaluation-harness's zero-shot loglikelihoods, written again from its
task files and its HFLM (lm_eval/models/huggingface.py) with PyTorch and transformers, to
check best-eval --tasks (tests/t_zeroshot.sh).

  zeroshot_ref.py model OUT_DIR VOCAB MAX_POS ARCH
      a random transformers model (LLaMA or Qwen3) saved to OUT_DIR (fp32 safetensors)
  zeroshot_ref.py check MODEL TOKENIZER BOS TASK_DIR TASKS LIMIT SAMPLES.jsonl RESULT.json [K]
      the harness's requests of TASKS (comma-separated, first LIMIT documents) built here,
      tokenized with the Hugging Face `tokenizers` library (TOKENIZER a tokenizer.json),
      or, for a SentencePiece tokenizer.model (no `sentencepiece` package in the venv), by
      best-tokenize --ids (TOKENIZER "best:BIN:PATH"; t_tokenize_oracle checks it against
      sentencepiece); BOS id or "none" before every encoding, as the tokenizer's
      post-processor puts it (LLaMA: <s>; byte-level BPE: none); scored
      by transformers in fp32; compared with best-eval's --log-samples SAMPLES.jsonl (each
      loglikelihood within its bound, below; the gold indices equal) and its --json
      RESULT.json (acc and acc_norm recomputed from the reference's loglikelihoods, a
      document whose choices the bounds cannot order excepted). Prints one "ok - " or
      "not ok - " line per task; exit status 1 on any difference.

The bound of a request's loglikelihood follows from the logits' (tests/hf_check.py's
LOGIT_TOL, tests/test_model.c's TOL: every logit within 1e-5 of the largest |logit|): a
log-softmax moves by at most twice the largest change of its inputs, and a loglikelihood
sums k of them (k the continuation's tokens), so |ours - reference| <= 2 k 1e-5 Z, Z the
largest |logit| of the k rows scored (the reference's). Two BLAS libraries round both sides
(ours: Debian's OpenBLAS, kernels by CPU; torch's MKL), so the bound is stated in the
arithmetic's terms rather than as the few 1e-5 this machine measures.

The harness's rules as implemented here (its files, version 0.4.9.2 and later):
  contexts / choices: arc "Question: {question}\\nAnswer:" over choices.text; boolq
  "{passage}\\nQuestion: {question}?\\nAnswer:" over no/yes; hellaswag utils.process_docs
  (preprocess of activity_label + ": " + ctx_a + " " + ctx_b.capitalize(), and of every
  ending); openbookqa question_stem; rte "{sentence1}\\nQuestion: {sentence2} True or
  False?\\nAnswer:" over True/False; winogrande partial scoring. Continuation " " + choice.
  _encode_pair: trailing whitespace of the context moves to the continuation; whole =
  enc(ctx + cont), ctx_enc = enc(ctx), cont_enc = whole[len(ctx_enc):]. Input
  (ctx_enc + cont_enc)[-(L+1):][:-1], L = max_position_embeddings; ll = sum of
  log_softmax at the continuation's tokens.
  mmlu (lm_eval/tasks/mmlu/default, 0.4.13): TASKS names it as mmlu (the subjects of
  MMLU_GROUPS below, which the test's records hold) or mmlu_SUBJECT; each subject a task of
  its own, its documents the records of mmlu.jsonl with that subject (LIMIT of each);
  context = "The following are multiple choice questions (with answers) about " + subject
  with spaces + ".\n\n" + K examples (the subject's first K records of mmlu_dev.jsonl,
  each doc_to_text + " " + letter + "\n\n") + doc_to_text, doc_to_text =
  question.strip() + "\nA. " ... "\nAnswer:"; continuations " A" .. " D". The groups and
  mmlu itself: the size-weighted mean of their subjects and pooled_sample_stderr.
"""
import gzip
import json
import math
import os
import random
import re
import sys


# the harness's groups of the subjects the test's records hold (each subject yaml's tag)
MMLU_GROUPS = {"abstract_algebra": "stem", "anatomy": "stem", "business_ethics": "other",
               "econometrics": "social_sciences", "formal_logic": "humanities", "world_religions": "humanities"}


def read_records(task_dir, name, limit):
    if name.startswith("mmlu_") and name[5:] in MMLU_GROUPS:
        recs = [r for r in read_records(task_dir, "mmlu", 0) if r["subject"] == name[5:]]
        return recs[:limit] if limit > 0 else recs
    for suffix in (".jsonl", ".jsonl.gz"):
        path = os.path.join(task_dir, name + suffix)
        if os.path.exists(path):
            opener = gzip.open if suffix.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as f:
                recs = [json.loads(line) for line in f if line.strip()]
            return recs[:limit] if limit > 0 else recs
    raise SystemExit(f"zeroshot_ref: no {name}.jsonl in {task_dir}")


def hellaswag_preprocess(text):
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    text = text.replace("  ", " ")
    return text


FEWSHOT = {"k": 0, "dir": None}


def mmlu_text(doc):
    c = doc["choices"]
    return (doc["question"].strip() + "\nA. " + c[0] + "\nB. " + c[1] + "\nC. " + c[2] + "\nD. " + c[3]
            + "\nAnswer:")


def requests(name, doc):
    """[(context, continuation)], gold, choice lengths (acc_norm) or None; a doc's "_prefix"
    (its K-shot examples) goes before each context."""
    reqs, gold, lens = requests_of(name, doc)
    return [(doc.get("_prefix", "") + c, x) for c, x in reqs], gold, lens


def requests_of(name, doc):
    if name.startswith("mmlu_"):
        subject = name[5:]
        ctx = "The following are multiple choice questions (with answers) about " + subject.replace("_", " ") + ".\n\n"
        if FEWSHOT["k"]:
            dev = [r for r in read_records(FEWSHOT["dir"], "mmlu_dev", 0) if r["subject"] == subject][:FEWSHOT["k"]]
            assert len(dev) == FEWSHOT["k"], f"{subject}: {len(dev)} dev records"
            ctx += "".join(mmlu_text(r) + " " + "ABCD"[r["answer"]] + "\n\n" for r in dev)
        ctx += mmlu_text(doc)
        return [(ctx, " " + L) for L in "ABCD"], int(doc["answer"]), None
    if name in ("arc_easy", "arc_challenge", "openbookqa"):
        ctx = doc["question_stem"] if name == "openbookqa" else "Question: " + doc["question"] + "\nAnswer:"
        key = doc["answerKey"].lstrip() if name == "openbookqa" else doc["answerKey"]
        choices = doc["choices"]["text"]
        return [(ctx, " " + c) for c in choices], doc["choices"]["label"].index(key), [float(len(c)) for c in choices]
    if name == "boolq":
        ctx = doc["passage"] + "\nQuestion: " + doc["question"] + "?\nAnswer:"
        return [(ctx, " no"), (ctx, " yes")], int(doc["label"]), None
    if name == "rte":
        ctx = doc["sentence1"] + "\nQuestion: " + doc["sentence2"] + " True or False?\nAnswer:"
        return [(ctx, " True"), (ctx, " False")], int(doc["label"]), None
    if name == "hellaswag":
        ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
        query = hellaswag_preprocess(doc["activity_label"] + ": " + ctx)
        choices = [hellaswag_preprocess(e) for e in doc["endings"]]
        return [(query, " " + c) for c in choices], int(doc["label"]), [float(len(c)) for c in choices]
    if name == "winogrande":
        i = doc["sentence"].index("_")
        cont = " " + doc["sentence"][i + 1:].strip()
        return [(doc["sentence"][:i] + o, cont) for o in (doc["option1"], doc["option2"])], \
            {"1": 0, "2": 1}[doc["answer"]], None
    raise SystemExit(f"zeroshot_ref: unknown task {name}")


def split_pair(ctx, cont):
    """The texts _encode_pair encodes: the context without its trailing whitespace, and
    context + continuation (the whitespace now the continuation's)."""
    n = len(ctx) - len(ctx.rstrip())
    return (ctx[:-n] if n else ctx), ctx + cont


def request_tokens(ctx, cont, enc, L):
    """_encode_pair and the left truncation: (full, k, truncated): the model reads full[:-1]
    and scores its last k tokens; enc(text) gives ids with BOS in front where there is one."""
    ctx, whole_text = split_pair(ctx, cont)
    whole, cenc = enc(whole_text), enc(ctx)
    cont_enc = whole[len(cenc):]
    return (cenc + cont_enc)[-(L + 1):], len(cont_enc), len(cenc) + len(cont_enc) > L + 1


def make_model(out_dir, vocab, max_pos, arch):
    import torch
    import transformers
    torch.manual_seed(7)
    common = dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_pos,
                  initializer_range=0.2, rms_norm_eps=1e-5, tie_word_embeddings=False,
                  bos_token_id=None, eos_token_id=vocab - 1)
    if arch == "qwen3":
        cfg = transformers.Qwen3Config(head_dim=8, **common)
        model = transformers.Qwen3ForCausalLM(cfg)
    else:
        cfg = transformers.LlamaConfig(**common)
        model = transformers.LlamaForCausalLM(cfg)
    model.to(torch.float32).save_pretrained(out_dir, safe_serialization=True)


def encoder(tok_path, todo):
    """encode(text) -> ids without BOS, for the texts of the requests of todo [(task,
    doc index, record)]: tok_path a tokenizer.json (Hugging Face tokenizers), or
    "best:BIN:PATH" (best-tokenize --ids of BIN on tokenizer PATH, every text in one run)."""
    if tok_path.startswith("best:"):
        import subprocess
        import tempfile
        _, bin_dir, spm = tok_path.split(":", 2)
        texts = sorted({t for name, d, doc in todo for ctx, cont in requests(name, doc)[0]
                        for t in split_pair(ctx, cont)})
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            for t in texts:
                f.write(json.dumps({"text": t}) + "\n")
        out = subprocess.run([os.path.join(bin_dir, "best-tokenize"), "--tokenizer", spm, "--ids", "--no-bos",
                              "--quiet", f.name], capture_output=True, text=True, check=True).stdout
        os.unlink(f.name)
        table = {t: [int(x) for x in line.split()] for t, line in zip(texts, out.split("\n"))}
        return table.__getitem__
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    return lambda s: tok.encode(s, add_special_tokens=False).ids


# Every logit of ours within this much of the largest |logit| (tests/hf_check.py's LOGIT_TOL).
LOGIT_TOL = 1e-5


def argmax(lls, div=None):
    """The first index of the largest ll (ll / div with div), as the harness's numpy argmax."""
    return max(range(len(lls)), key=lambda i: (lls[i] / div[i] if div else lls[i], -i))


def near_tie(lls, bounds, div, a, b):
    """Whether choices a and b of the reference are nearer than their bounds allow to order."""
    s = (lambda i: lls[i] / div[i]) if div else (lambda i: lls[i])
    e = (lambda i: bounds[i] / div[i]) if div else (lambda i: bounds[i])
    return abs(s(a) - s(b)) <= e(a) + e(b)


def check(model_dir, tok_path, bos, task_dir, tasks, limit, samples_path, result_path):
    import torch
    import transformers
    bos = None if bos == "none" else int(bos)
    FEWSHOT["dir"] = task_dir
    groups = {}  # mmlu: the subjects of each group
    if "mmlu" in tasks.split(","):
        for subj, g in MMLU_GROUPS.items():
            groups.setdefault("mmlu_" + g, []).append("mmlu_" + subj)
        groups["mmlu"] = ["mmlu_" + subj for subj in MMLU_GROUPS]
        tasks = ",".join(["mmlu_" + subj for subj in MMLU_GROUPS] + [t for t in tasks.split(",") if t != "mmlu"])
    todo = [(name, d, doc) for name in tasks.split(",") for d, doc in enumerate(read_records(task_dir, name, limit))]
    shots = {}  # the seven tasks' K-shot prefixes, by (task, doc): the harness's default sampler
    for name in tasks.split(","):
        if FEWSHOT["k"] and not name.startswith("mmlu_"):
            train = read_records(task_dir, name + "_train", 0)
            rnd = random.Random(1234)
            # no test split (evaluated on validation): the sampler gets the document and draws K + 1
            extra = 1 if name in ("boolq", "hellaswag", "rte", "winogrande") else 0
            for d, doc in [t[1:] for t in todo if t[0] == name]:
                ex = rnd.sample(train, FEWSHOT["k"] + extra)[:FEWSHOT["k"]]
                text = ""
                for e in ex:
                    reqs, gold, _ = requests(name, e)
                    text += reqs[gold][0] + reqs[gold][1] + "\n\n"
                shots[(name, d)] = text
    if shots:
        todo = [(name, d, dict(doc, _prefix=shots.get((name, d), ""))) for name, d, doc in todo]
    encode = encoder(tok_path, todo)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    L = model.config.max_position_embeddings

    def enc(s):
        return ([bos] if bos is not None else []) + encode(s)

    summary = {}
    ours = {}
    with open(samples_path) as f:
        for line in f:
            s = json.loads(line)
            ours[(s["task"], s["doc"])] = s
    result = json.load(open(result_path))
    bad = 0
    for name in tasks.split(","):
        worst, ratio, n_req, n_trunc, accs, accns, msgs, tie, tie_n = 0.0, 0.0, 0, 0, [], [], [], [], []
        for _, d, doc in [t for t in todo if t[0] == name]:
            reqs, gold, lens = requests(name, doc)
            lls, bounds = [], []
            for ctx, cont in reqs:
                full, k, truncated = request_tokens(ctx, cont, enc, L)
                n_trunc += truncated
                inp = torch.tensor([full[:-1]])
                with torch.no_grad():
                    logits = model(inp).logits[0].double()
                logp = torch.log_softmax(logits, dim=-1)
                rows = logp[len(full) - 1 - k:]
                lls.append(float(sum(rows[j, t] for j, t in enumerate(full[-k:]))))
                bounds.append(2 * k * LOGIT_TOL * float(logits[len(full) - 1 - k:].abs().max()))
                n_req += 1
            o = ours.get((name, d))
            if o is None:
                msgs.append(f"doc {d} missing from {samples_path}")
                continue
            if o["gold"] != gold:
                msgs.append(f"doc {d}: gold {o['gold']}, the reference's {gold}")
            import hashlib  # the harness's prompt_hash: sha256 of its first request's context
            if o["prompt_hash"] != hashlib.sha256(reqs[0][0].encode("utf-8")).hexdigest():
                msgs.append(f"doc {d}: prompt_hash {o['prompt_hash']}, not the first context's sha256")
            if len(o["lls"]) != len(lls):
                msgs.append(f"doc {d}: {len(o['lls'])} choices, the reference's {len(lls)}")
                continue
            for a, b, e in zip(o["lls"], lls, bounds):
                worst, ratio = max(worst, abs(a - b)), max(ratio, abs(a - b) / e)
            for div, out, ties in [(None, accs, tie)] + ([(lens, accns, tie_n)] if lens else []):
                ref_pred, our_pred = argmax(lls, div), argmax(o["lls"], div)
                # a document whose best two choices are nearer than their bounds: the
                # comparison cannot say which is ahead; its prediction counts as ours
                if ref_pred != our_pred and near_tie(lls, bounds, div, ref_pred, our_pred):
                    ties.append(d)
                    ref_pred = our_pred
                out.append(ref_pred == gold)
        r = result["tasks"][name]
        if r.get("num_fewshot", 0) != FEWSHOT["k"]:
            msgs.append(f"num_fewshot {r.get('num_fewshot')}, not {FEWSHOT['k']}")
        if name.startswith("mmlu_"):  # the harness's mean_stderr of the subject
            n = len(accs)
            mu = sum(accs) / n
            se = math.sqrt(sum((a - mu) ** 2 for a in accs) / (n - 1)) / math.sqrt(n) if n > 1 else None
            if se is not None and abs(r["acc_stderr"] - se) > 1e-12:
                msgs.append(f"acc_stderr {r['acc_stderr']}, the harness's mean_stderr {se}")
            summary[name] = (n, acc_of(accs), se)
        if ratio > 1:
            msgs.append(f"loglikelihoods differ by up to {worst:.3g}, {ratio:.2g} times their bound")
        acc = sum(accs) / len(accs)
        if abs(r["acc"] - acc) > 1e-12:
            msgs.append(f"acc {r['acc']} but the reference's loglikelihoods give {acc}")
        if accns and abs(r["acc_norm"] - sum(accns) / len(accns)) > 1e-12:
            msgs.append(f"acc_norm {r['acc_norm']} but the reference's loglikelihoods give {sum(accns) / len(accns)}")
        what = (f"{name}: {len(accs)} documents, {n_req} requests ({n_trunc} truncated to {L + 1} tokens), "
                f"loglikelihoods within {worst:.2g} of transformers' (at most {ratio:.2g} of their bounds "
                f"2 k 1e-5 max|logit|), acc {acc:.4f}" + (f", near-ties in documents {tie + tie_n}" if tie + tie_n else ""))
        if msgs:
            bad += 1
            import blas_info  # (tests/, this file's folder)
            print(f"not ok - {what}: " + "; ".join(msgs[:5]) + f" [{blas_info.describe(torch=True)}]")
        else:
            print(f"ok - {what}")
    for g, members in groups.items():  # lm_eval/api/group.py: over the leaf subjects
        sizes = [summary[m][0] for m in members]
        accs_g = [summary[m][1] for m in members]
        ses = [summary[m][2] for m in members]
        acc = sum(a * n for a, n in zip(accs_g, sizes)) / sum(sizes)
        se = math.sqrt(sum((n - 1) * e ** 2 * n for n, e in zip(sizes, ses)) / (sum(sizes) - len(sizes)) / sum(sizes))
        r = result["tasks"].get(g)
        ok = r is not None and abs(r["acc"] - acc) <= 1e-12 and abs(r["acc_stderr"] - se) <= 1e-12 and r["n"] == sum(sizes)
        print(f"{'ok' if ok else 'not ok'} - {g}: acc {acc:.6f} (weighted by size), stderr {se:.6f} (pooled), over "
              f"{len(members)} subjects, {sum(sizes)} documents" + ("" if ok else f"; ours: {r}"))
        bad += not ok
    sys.exit(1 if bad else 0)


def acc_of(accs):
    return sum(accs) / len(accs)


if __name__ == "__main__":
    if sys.argv[1] == "model":
        make_model(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        FEWSHOT["k"] = int(sys.argv[10]) if len(sys.argv) > 10 else 0
        check(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]), sys.argv[8],
              sys.argv[9])
