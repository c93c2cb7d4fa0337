"""gsm8k_ref.py: lm-evaluation-harness's gsm8k (lm_eval/tasks/gsm8k/gsm8k.yaml, 0.4.13) written
again in Python with transformers, to check best-eval --tasks gsm8k (tests/t_zeroshot.sh):

  gsm8k_ref.py MODEL TOKENIZER BOS TASK_DIR K LIMIT SAMPLES.jsonl RESULT.json

The prompts: for the test documents in order, K examples drawn by one random.Random(1234)
.sample(train, K) each (the harness's default sampler with its fewshot seed), each
"Question: {q}\\nAnswer: {answer}\\n\\n", then "Question: {q}\\nAnswer:". Greedy generation in
fp32 (transformers, the whole sequence again each step), BOS id or "none" first, the context
cut on the left to max_position_embeddings - 256, at most 256 new tokens, until the config's
EOS or one of "Question:", "</s>", "<|im_end|>" is in the decoded new tokens; the text cut at
each stop string in turn (postprocess_generated_text). The filters (RegexFilter + take_first)
and exact_match (exact_match_hf_evaluate: regexes_to_ignore, ignore_case) as the harness's
code does them. Compared with best-eval's --log-samples and --json: the prompts byte for
byte; the generated text, unless the two sides' first different token was a near-tie (the
reference's top two logits within 2 * 1e-5 * max|logit|, the bound of tests/zeroshot_ref.py),
after which the document's text is not compared; each filter's answer and match; the means
and stderrs. One "ok - " / "not ok - " line per check; exit 1 on a difference.
"""
import json
import math
import os
import random
import re
import sys

import zeroshot_ref  # (tests/, this file's folder): read_records, LOGIT_TOL

STOPS = ["Question:", "</s>", "<|im_end|>"]
MAX_GEN = 256


def prompts(task_dir, k, limit):
    test = zeroshot_ref.read_records(task_dir, "gsm8k", limit)
    train = zeroshot_ref.read_records(task_dir, "gsm8k_train", 0) if k else []
    rnd = random.Random(1234)
    out = []
    for doc in test:
        shots = rnd.sample(train, k) if k else []
        ctx = "".join("Question: " + s["question"] + "\nAnswer:" + " " + s["answer"] + "\n\n" for s in shots)
        out.append((ctx + "Question: " + doc["question"] + "\nAnswer:", doc["answer"]))
    return out


def regex_filter(resp, pattern, group_select):
    match = re.findall(pattern, resp)
    if match:
        match = match[group_select]
        if isinstance(match, tuple):
            match = [m for m in match if m]
            match = match[0] if match else "[invalid]"
        return match.strip()
    return "[invalid]"


def normalize(x):
    for s in [",", "\\$", "(?s).*#### ", "\\.$"]:
        x = re.sub(s, "", x)
    return x.lower()


def main(model_dir, tok_path, bos, task_dir, k, limit, samples_path, result_path):
    import tokenizers
    import torch
    import transformers
    tok = tokenizers.Tokenizer.from_file(tok_path)
    bos = None if bos == "none" else int(bos)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    L = model.config.max_position_embeddings
    eos = model.config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    ours = [json.loads(line) for line in open(samples_path)]
    ours = {s["doc"]: s for s in ours if s["task"] == "gsm8k"}
    result = json.load(open(result_path))["tasks"]["gsm8k"]
    bad, msgs, ties, texts_same, hits = 0, [], [], 0, {"strict-match": [], "flexible-extract": []}
    docs = prompts(task_dir, k, limit)
    for d, (ctx, target) in enumerate(docs):
        o = ours.get(d)
        if o is None:
            msgs.append(f"doc {d} missing")
            continue
        if o["prompt"] != ctx:
            msgs.append(f"doc {d}: the prompt differs from the harness's")
        import hashlib
        if o["prompt_hash"] != hashlib.sha256(ctx.encode("utf-8")).hexdigest():
            msgs.append(f"doc {d}: prompt_hash is not the prompt's sha256")
        ids = ([bos] if bos is not None else []) + tok.encode(ctx, add_special_tokens=False).ids
        ids = ids[-(L - MAX_GEN):]
        gen, text, tie = [], "", False
        with torch.no_grad():
            for _ in range(MAX_GEN):
                logits = model(torch.tensor([ids + gen])).logits[0, -1].double()
                top = torch.topk(logits, 2)
                nxt = int(top.indices[0])
                gen.append(nxt)
                if nxt in eos:
                    break
                text = tok.decode(gen, skip_special_tokens=True)
                if float(top.values[0] - top.values[1]) <= 2 * 2 * zeroshot_ref.LOGIT_TOL * float(logits.abs().max()):
                    tie = True  # a near-tie: our pick may differ from here on
                if any(s in text for s in STOPS):
                    break
        if gen and gen[-1] in eos:
            gen = gen[:-1]
        text = tok.decode(gen, skip_special_tokens=True)
        for s in STOPS:
            text = text.split(s)[0]
        if o["generated"] == text:
            texts_same += 1
        elif tie:
            ties.append(d)
            text = o["generated"]  # past a near-tie the texts may part: ours is scored
        else:
            msgs.append(f"doc {d}: generated {o['generated'][:60]!r}, the reference {text[:60]!r}")
        for name, pat, sel in [("strict-match", "#### (\\-?[0-9\\.\\,]+)", 0),
                               ("flexible-extract", "(-?[$0-9.,]{2,})|(-?[0-9]+)", -1)]:
            got = regex_filter(text, pat, sel)
            m = normalize(got) == normalize(target)
            hits[name].append(m)
            if o["answers"][name] != got or o["exact_match"][name] != m:
                msgs.append(f"doc {d} {name}: ours {o['answers'][name]!r} {o['exact_match'][name]}, "
                            f"the harness's {got!r} {m}")
    for name, hs in hits.items():
        n = len(hs)
        mean = sum(hs) / n
        se = math.sqrt(sum((h - mean) ** 2 for h in hs) / (n - 1)) / math.sqrt(n) if n > 1 else None
        if abs(result[f"exact_match,{name}"] - mean) > 1e-12 or (se is not None and abs(result[f"exact_match_stderr,{name}"] - se) > 1e-12):
            msgs.append(f"{name}: ours {result[f'exact_match,{name}']}, the reference's {mean} (stderr {se})")
    what = (f"gsm8k {k}-shot: {len(docs)} documents, prompts, {texts_same} generations identical"
            + (f" (near-ties in documents {ties})" if ties else "") + ", answers and exact_match of both filters")
    if msgs:
        print(f"not ok - {what}: " + "; ".join(msgs[:4]))
        bad = 1
    else:
        print(f"ok - {what}")
    sys.exit(bad)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7],
         sys.argv[8])
