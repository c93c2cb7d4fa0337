"""decode_gpu.py: the peer of bench/decode_gpu.sh: batch-1 greedy decoding of a Hugging
Face folder with PyTorch transformers on the GPU, bf16, generate() with a static KV
cache (cache_implementation="static"), as a user would run it. One JSON line: decode
tokens/s (the new tokens after the first, timed without the prompt's forward: generate()
of 1 new token timed separately and subtracted), peak GPU memory
(torch.cuda.max_memory_allocated) and the greedy ids.

usage: python3 bench/decode_gpu.py --model DIR --prompt-ids 1,2,3 --tokens 100 [--reps 3]
"""
import argparse
import json
import time

import torch
import transformers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-ids", required=True, help="comma-separated token ids")
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.bfloat16).cuda().eval()
    ids = torch.tensor([[int(x) for x in a.prompt_ids.split(",")]], device="cuda")

    def gen(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                 cache_implementation="static", pad_token_id=0)
        torch.cuda.synchronize()
        return time.perf_counter() - t0, out[0, ids.shape[1]:].tolist()

    gen(a.tokens)  # warm-up (allocations, kernels' first launch)
    best = None
    for _ in range(a.reps):
        t1, _ = gen(1)
        tn, new = gen(a.tokens)
        tps = (a.tokens - 1) / max(tn - t1, 1e-9)
        best = tps if best is None or tps > best else best
    print(json.dumps({"kind": "transformers", "tokens_per_s": best,
                      "peak_bytes": torch.cuda.max_memory_allocated(), "ids": new,
                      "torch": torch.__version__, "transformers": transformers.__version__,
                      "device": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
