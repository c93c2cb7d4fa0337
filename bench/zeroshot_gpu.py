"""zeroshot_gpu.py: the peer of best-eval --device cuda --tasks in bench/zeroshot_gpu.sh.

The same requests (tests/zeroshot_ref.py's reading of the harness's task files and of its
_encode_pair, tokenized by best-tokenize as best-eval tokenizes them) scored by
transformers on the GPU in bf16 the way lm-evaluation-harness's HFLM batches them: one
request a row, the requests by length (longest first) in batches of BATCH rows, each
padded on the right (a causal model: the padding changes no earlier position), one
forward a batch; then the log-softmax of each continuation's rows in fp32, gathered at its
tokens and summed. HFLM takes the log-softmax of every row in the model's dtype and reads
each sum back to the host; this peer does less work than that, not more.

  zeroshot_gpu.py MODEL BIN TOKENIZER BOS TASK_DIR TASKS LIMIT BATCH SAMPLES.jsonl
  (DEVICE=cpu in the environment runs it on the CPU: a smoke test of the script)

Prints one JSON line per task: requests, tokens (of the inputs), padded (tokens the
batches ran), seconds (the scoring alone, from the first batch to the last, the GPU
synchronized at both ends), and how its loglikelihoods agree with best-eval's
(--log-samples SAMPLES.jsonl): the largest difference relative to max(|ll|, 1), and the
share of documents whose argmax is the same.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import zeroshot_ref as ref  # noqa: E402


def task_requests(name, todo, enc, L):
    """[(full tokens, continuation length, doc, choice)] of one task (zeroshot_ref's)."""
    out = []
    for task, d, doc in todo:
        if task == name:
            for i, (ctx, cont) in enumerate(ref.requests(name, doc)[0]):
                full, k, _ = ref.request_tokens(ctx, cont, enc, L)
                out.append((full, k, d, i))
    return out


def main(model_dir, bin_dir, tok, bos, task_dir, tasks, limit, batch, samples):
    import torch
    import transformers
    bos = None if bos == "none" else int(bos)
    todo = [(n, d, doc) for n in tasks.split(",") for d, doc in enumerate(ref.read_records(task_dir, n, limit))]
    encode = ref.encoder("best:%s:%s" % (bin_dir, tok), todo)
    dev = os.environ.get("DEVICE", "cuda")
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).to(dev).eval()
    L = model.config.max_position_embeddings
    ours = {}
    with open(samples) as f:
        for line in f:
            s = json.loads(line)
            ours[(s["task"], s["doc"])] = s["lls"]
    for name in tasks.split(","):
        reqs = task_requests(name, todo, lambda s: ([bos] if bos is not None else []) + encode(s), L)
        order = sorted(range(len(reqs)), key=lambda j: (-len(reqs[j][0]), j))
        sums = {}
        tokens = padded = 0
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            for b0 in range(0, len(order), batch):
                idx = order[b0:b0 + batch]
                T = max(len(reqs[j][0]) - 1 for j in idx)
                x = torch.zeros((len(idx), T), dtype=torch.long)
                for r, j in enumerate(idx):
                    inp = reqs[j][0][:-1]
                    x[r, :len(inp)] = torch.tensor(inp)
                    tokens += len(inp)
                padded += len(idx) * T
                logits = model(x.to(dev)).logits
                for r, j in enumerate(idx):
                    full, k, d, i = reqs[j]
                    n = len(full) - 1
                    rows = torch.log_softmax(logits[r, n - k:n].float(), dim=-1)
                    tgt = torch.tensor(full[-k:], device=rows.device)
                    sums[(d, i)] = rows.gather(1, tgt[:, None]).sum()
        sync()
        secs = time.perf_counter() - t0
        lls = {key: float(v) for key, v in sums.items()}
        worst, same, docs = 0.0, 0, sorted({d for _, _, d, _ in reqs})
        for d in docs:
            mine = ours.get((name, d))
            if not mine:  # best-eval did not score this document
                worst = float("inf")
                continue
            n = len(mine)
            theirs = [lls[(d, i)] for i in range(n)]
            worst = max(worst, max(abs(a - b) / max(abs(b), 1.0) for a, b in zip(mine, theirs)))
            same += max(range(n), key=lambda i: (mine[i], -i)) == max(range(n), key=lambda i: (theirs[i], -i))
        print(json.dumps({"task": name, "requests": len(reqs), "tokens": tokens, "padded": padded,
                          "seconds": secs, "ll_worst_rel": worst, "argmax_same": same / max(len(docs), 1)}),
              flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 10:
        sys.exit(__doc__.strip().split("\n\n")[2])
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]),
         int(sys.argv[8]), sys.argv[9])
