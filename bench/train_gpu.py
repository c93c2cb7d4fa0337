#!/usr/bin/env python3
"""train_gpu.py: training tokens/s of best-train on a GPU against PyTorch + transformers.

Same work on both sides, in this one script and on the same GPU: the same model (one
config, random weights written once by transformers' save_pretrained and loaded by
best-train), the same random tokens (one shard), the same batch B x T, AdamW with
lr 1e-4, clip 1.0, no warmup.

  pytorch  LlamaForCausalLM / Qwen3ForCausalLM from_config, fp32 master weights, bf16
           autocast, SDPA attention (flash), torch.optim.AdamW(fused=True), gradient
           clipping; eager, and torch.compile of the model: the faster one counts
  best     bin/best-train --device cuda on the same folder and shard; tokens/s from its
           log.jsonl (the whole step, optimizer and mask update included, after the
           device finished it: best-train's own clock)

Each side times `--steps` steps after `--warmup` untimed ones and reports the median
step. MFU = achieved model FLOP/s / the bf16 matrix-product peak measured here (an
8192^3 torch.matmul, median of 10): model FLOPs per token = 6 x (parameters of the
matrix products, lm_head included) + 6 x L x T x Q (causal attention, forward and
backward). ratio = best / PyTorch.

Peers stored: the PyTorch side's numbers are kept in bench/peers/train_gpu.json (GPU name,
config, shapes, versions, date) so that a rare GPU run spends its minutes on best-train;
an entry that matches this GPU and these shapes is used instead of running PyTorch (the
output says "stored", with its date and versions). PEERS=1 in the environment (or
--peers run) measures them again in this script, as before; --save-peers then writes the
new figures into that file.

--block: one LLaMA-2-7B decoder block instead: models of LLaMA-2-7B's shape with 1 and
with 2 layers, each side timed on both, and a block's forward + backward + AdamW is the
difference of the two step times (the embedding, the head and the loss cancel out).
With --recompute (best-train's activation recomputation; PyTorch's side is unchanged) it
also gives best-train's device memory (cudaMemGetInfo after the first step, from its
"device memory" line) of each, and both step time and memory extrapolated to LLaMA-2-7B's
32 layers as the 1-layer model plus 31 blocks: an extrapolation, said so, not a run of
the whole model.

usage: python3 bench/train_gpu.py [--configs llama-1.1b,qwen3-1.1b | --block] [--batch 8]
           [--micro-batch 8] [--seq 2048] [--steps 10] [--warmup 3] [--device cuda]
           [--bin bin/best-train] [--sparsity 0] [--no-compile] [--json FILE] [--recompute]
           [--peers stored|run] [--save-peers]
`--device cpu` runs both sides on the CPU at a tiny config (--configs tiny): it checks
the script, not the speed. Results on an H200: docs/benchmarks.md.
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE]
ROOT = os.path.dirname(HERE)

# The issue's ~1.1B LLaMA (TinyLlama's shape), a Qwen3-style model of similar size
# (Qwen3's head_dim 128, q/k norms, its vocabulary, tied embeddings), and a tiny one
# for checking the script on a CPU.
CONFIGS = {
    "llama-1.1b": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2048,
                       intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                       num_key_value_heads=4, head_dim=64, vocab_size=32000,
                       tie_word_embeddings=False, rope_theta=10000.0),
    "qwen3-1.1b": dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=2048,
                       intermediate_size=6144, num_hidden_layers=16, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, vocab_size=151936,
                       tie_word_embeddings=True, rope_theta=1000000.0),
    # LLaMA-2-7B's shape with one and with two decoder layers (--block)
    "llama2-7b-1l": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=4096,
                         intermediate_size=11008, num_hidden_layers=1, num_attention_heads=32,
                         num_key_value_heads=32, head_dim=128, vocab_size=32000,
                         tie_word_embeddings=False, rope_theta=10000.0),
    "tiny": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64,
                 intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=512,
                 tie_word_embeddings=False, rope_theta=10000.0),
}
CONFIGS["llama2-7b-2l"] = dict(CONFIGS["llama2-7b-1l"], num_hidden_layers=2)
CONFIGS["tiny-1l"] = dict(CONFIGS["tiny"], num_hidden_layers=1)  # --block --device cpu
COMMON = dict(max_position_embeddings=4096, rms_norm_eps=1e-6, hidden_act="silu",
              attention_bias=False, mlp_bias=False, bos_token_id=1, eos_token_id=2)


def xxh64(data):
    try:
        import xxhash
        return xxhash.xxh64_intdigest(data)
    except ImportError:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from shardio import xxh64 as slow
        return slow(data)


def write_shard(path, tokens, vocab):
    # docs/formats.md: 64-byte header, then u16 or u32 ids
    import numpy as np
    width = 2 if vocab <= 65536 else 4
    payload = np.asarray(tokens, dtype="<u2" if width == 2 else "<u4").tobytes()
    head = b"BESTSHRD" + struct.pack("<IIIIQQQQ", 1, width, vocab, 0, len(tokens), 1, xxh64(payload), 0)
    head += struct.pack("<Q", xxh64(head))
    with open(path, "wb") as f:
        f.write(head + payload)


def model_flops_per_token(cfg, T):
    C, I, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    Q = cfg["num_attention_heads"] * cfg["head_dim"]
    KVD = cfg["num_key_value_heads"] * cfg["head_dim"]
    matmul_params = L * (C * Q + 2 * C * KVD + Q * C + 3 * C * I) + V * C  # lm_head included
    return 6 * matmul_params + 6 * L * T * Q


def matmul_peak(torch, device):
    if device != "cuda":
        return float("nan")
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return 2 * n ** 3 / statistics.median(times)


def torch_run(torch, model, tokens, args, compiled):
    dev = args.device
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                            fused=dev == "cuda")
    step_model = torch.compile(model) if compiled else model
    B, T, MB = args.batch, args.seq, args.micro_batch
    x = torch.as_tensor(tokens[: B * (T + 1)].reshape(B, T + 1), device=dev, dtype=torch.long)
    times, losses = [], []
    for i in range(args.warmup + args.steps):
        sync(torch, dev)
        t0 = time.perf_counter()
        for j in range(0, B, MB):
            xb = x[j:j + MB]
            with torch.autocast(device_type=dev, dtype=torch.bfloat16):
                logits = step_model(input_ids=xb[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, logits.size(-1)),
                                                     xb[:, 1:].reshape(-1)) * (MB / B)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()) * B / MB)
        sync(torch, dev)
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    return B * T / statistics.median(times), losses[0]


def sync(torch, dev):
    if dev == "cuda":
        torch.cuda.synchronize()


PEERS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "train_gpu.json")


def peers_load():
    try:
        with open(PEERS_FILE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"entries": []}


def peer_key(e):
    return (e["device"], e["config"], e["batch"], e["micro_batch"], e["seq"])


def stored_peer(store, device, cname, args):
    # the stored PyTorch figures for this GPU and shapes (dense only: --sparsity runs eager
    # PyTorch on a dense model, the same as a dense entry's eager figure)
    want = (device, cname, args.batch, args.micro_batch, args.seq)
    for e in store["entries"]:
        if peer_key(e) == want and e.get("compile") is not None:
            return e
    return None


def best_run(args, model_dir, shard, out, cname, env=None):
    cmd = [args.bin, "--model", model_dir, "--data", shard, "--out", out, "--device", args.device,
           "--steps", str(args.warmup + args.steps), "--batch", str(args.batch),
           "--micro-batch", str(args.micro_batch), "--seq", str(args.seq), "--lr", "1e-4",
           "--warmup", "0", "--clip", "1.0"]
    if args.sparsity > 0:
        cmd += ["--sparsity", str(args.sparsity), "--prune-start", "0", "--prune-end", "0.5"]
    if args.profile and args.device == "cuda":
        cmd += ["--profile", args.profile.replace("CONFIG", cname)]
    if args.recompute and args.device == "cuda":
        cmd += ["--recompute"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        sys.exit("best-train failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr.strip()))
    with open(os.path.join(out, "log.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    tps = statistics.median(r["tokens_per_s"] for r in rows[args.warmup:])
    # "best-train: device memory: X GiB in use after the first step (...), Y GiB computed ..."
    mem = None
    for line in r.stderr.splitlines():
        if "device memory:" in line and "GiB in use" in line:
            w = line.split("device memory:")[1].split()
            mem = dict(measured_gib=float(w[0]), computed_gib=float(line.split("), ")[1].split()[0]))
    rows[0]["device_memory"] = mem
    return tps, rows[0]["loss"], rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default="llama-1.1b,qwen3-1.1b")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--micro-batch", type=int, default=0, help="default: = batch")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "best-train"))
    ap.add_argument("--sparsity", type=float, default=0.0, help="best-train with BEST to this sparsity")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--block", action="store_true", help="one LLaMA-2-7B block (the 2-layer model less the 1-layer)")
    ap.add_argument("--recompute", action="store_true", help="best-train --recompute (with --block: the memory too)")
    ap.add_argument("--best-only", action="store_true", help="no PyTorch side (best-train's time and memory alone)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=VALUE: best-train again with it in the environment (e.g. BEST_LT_TUNE=1)")
    ap.add_argument("--profile", help="best-train --profile FILE (the device's phases; CONFIG in FILE: the config's name)")
    ap.add_argument("--peers", choices=["stored", "run"],
                    default="run" if os.environ.get("PEERS") == "1" else "stored",
                    help="PyTorch's figures: stored ones when they match (default), or measured now (PEERS=1)")
    ap.add_argument("--save-peers", action="store_true", help="with --peers run: write them to " + PEERS_FILE)
    args = ap.parse_args()
    args.micro_batch = args.micro_batch or args.batch
    if args.block:
        args.configs = "tiny-1l,tiny" if args.device == "cpu" else "llama2-7b-1l,llama2-7b-2l"
    import numpy as np
    import torch
    import transformers
    transformers.utils.logging.disable_progress_bar()

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("train_gpu.py: no CUDA device visible to torch")
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    peak = matmul_peak(torch, args.device)
    print("device %s; torch %s, transformers %s; bf16 matmul peak %.0f TFLOP/s; B %d (micro %d) x T %d"
          % (name, torch.__version__, transformers.__version__, peak / 1e12, args.batch, args.micro_batch,
             args.seq))
    results = []
    store = peers_load()
    for cname in args.configs.split(","):
        cfg = dict(CONFIGS[cname], **COMMON)
        torch.manual_seed(0)
        hf_cfg = transformers.AutoConfig.for_model(**cfg)
        model = transformers.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="sdpa")
        model = model.float().to(args.device)
        rng = np.random.default_rng(0)
        n_tok = (args.warmup + args.steps + 1) * args.batch * (args.seq + 1)
        tokens = rng.integers(0, cfg["vocab_size"], n_tok, dtype=np.int64)
        with tempfile.TemporaryDirectory() as tmp:
            mdir = os.path.join(tmp, "model")
            model.save_pretrained(mdir, safe_serialization=True)
            shard = os.path.join(tmp, "data.bin")
            write_shard(shard, tokens, cfg["vocab_size"])
            best_tps, best_loss0, rows = best_run(args, mdir, shard, os.path.join(tmp, "out"), cname)
            # candidates the device decides among (--variant NAME=VALUE: best-train again with that
            # in its environment, e.g. BEST_LT_TUNE=1), each beside the default's tokens/s
            variants = {}
            for v in args.variant:
                k, _, val = v.partition("=")
                tps, _, _ = best_run(args, mdir, shard, os.path.join(tmp, "out-" + k), cname + "-" + k, {k: val})
                variants[v] = tps
                print("%s: best-train with %s: %.0f tok/s (%.3fx the default's)" % (cname, v, tps, tps / best_tps))
        stored = stored_peer(store, name, cname, args) if args.peers == "stored" else None
        if args.best_only:
            eager_tps = comp_tps = torch_loss0 = float("nan")
        elif stored:
            eager_tps = stored["eager"] if stored["eager"] is not None else float("nan")
            comp_tps = float("nan") if args.no_compile else stored["compile"]
            torch_loss0 = stored["loss_step1"] if stored["loss_step1"] is not None else best_loss0
            print("%s: PyTorch's figures stored on %s (torch %s, transformers %s; PEERS=1 measures them again)"
                  % (cname, stored["date"], stored["torch"], stored["transformers"]))
        else:
            eager_tps, torch_loss0 = torch_run(torch, model, tokens, args, False)
            comp_tps = float("nan")
            if not args.no_compile:
                model2 = transformers.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="sdpa")
                comp_tps, _ = torch_run(torch, model2.float().to(args.device), tokens, args, True)
            if args.save_peers and args.device == "cuda":
                e = dict(device=name, date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
                         transformers=transformers.__version__, config=cname, batch=args.batch,
                         micro_batch=args.micro_batch, seq=args.seq, eager=eager_tps,
                         compile=None if comp_tps != comp_tps else comp_tps, loss_step1=torch_loss0)
                store["entries"] = [x for x in store["entries"] if peer_key(x) != peer_key(e)] + [e]
                with open(PEERS_FILE, "w") as f:
                    json.dump(store, f, indent=1)
        torch_tps = max([x for x in (eager_tps, comp_tps) if x == x] or [float("nan")])
        fpt = model_flops_per_token(cfg, args.seq)
        res = dict(config=cname, device=name, batch=args.batch, micro_batch=args.micro_batch, seq=args.seq,
                   recompute=args.recompute, best_device_memory=rows[0].get("device_memory"),
                   best_tokens_per_s=best_tps, torch_eager_tokens_per_s=eager_tps,
                   torch_compile_tokens_per_s=comp_tps, ratio=best_tps / torch_tps,
                   best_mfu=best_tps * fpt / peak, torch_mfu=torch_tps * fpt / peak,
                   best_loss_step1=best_loss0, torch_loss_step1=torch_loss0, peak_flops=peak,
                   sparsity=args.sparsity, peers="stored " + stored["date"] if stored else "measured")
        if variants:
            res["best_tokens_per_s_variants"] = variants
        if args.sparsity > 0:
            res["best_tokens_per_s_by_step"] = [(r["step"], r["sparsity"], r["tokens_per_s"]) for r in rows]
        results.append(res)
        print("%-11s best %9.0f tok/s (MFU %4.1f%%)  torch eager %9.0f  compile %9.0f  (MFU %4.1f%%)  "
              "ratio %.2f  loss@1 best %.4f torch %.4f"
              % (cname, best_tps, 100 * res["best_mfu"], eager_tps, comp_tps, 100 * res["torch_mfu"],
                 res["ratio"], best_loss0, torch_loss0))
        # a sanity check, not a comparison of the computations: with random weights both
        # first losses are near ln(V) whatever the batch (the two sides draw their first
        # batch differently); a broken model (NaN, wrong shapes, no learning) misses it
        if not args.best_only and abs(best_loss0 - torch_loss0) > 2e-2 * abs(torch_loss0):
            sys.exit("train_gpu.py: first-step losses differ (best %.5f, torch %.5f): not the same computation"
                     % (best_loss0, torch_loss0))
        del model
    if args.block:  # a block = the step of two layers less the step of one
        step = lambda r, k: args.batch * args.seq / r[k]
        one, two = results
        best_ms = 1e3 * (step(two, "best_tokens_per_s") - step(one, "best_tokens_per_s"))
        torch_k = lambda r: max([x for x in (r["torch_eager_tokens_per_s"], r["torch_compile_tokens_per_s"]) if x == x]
                                or [float("nan")])
        torch_ms = 1e3 * (args.batch * args.seq / torch_k(two) - args.batch * args.seq / torch_k(one))
        block = dict(config="block:" + two["config"], best_block_ms=best_ms, torch_block_ms=torch_ms,
                     ratio=torch_ms / best_ms if best_ms > 0 else float("nan"), batch=args.batch, seq=args.seq)
        results.append(block)
        print("one decoder block of %s, forward + backward + AdamW, B %d x T %d: best %.2f ms, torch %.2f ms, "
              "speed ratio %.2f" % (two["config"], args.batch, args.seq, best_ms, torch_ms, block["ratio"]))
        mem = lambda r: (r.get("best_device_memory") or {}).get("measured_gib")
        if mem(one) is not None and mem(two) is not None:  # 32 layers = 1 layer + 31 blocks (extrapolated)
            per_gib, per_ms = mem(two) - mem(one), best_ms
            t1_ms = 1e3 * args.batch * args.seq / one["best_tokens_per_s"]
            block["best_block_gib"] = per_gib
            block["extrapolated_32_layers"] = dict(step_ms=t1_ms + 31 * per_ms, device_gib=mem(one) + 31 * per_gib,
                                                   recompute=args.recompute)
            print("best-train%s, device memory: 1 layer %.2f GiB, 2 layers %.2f GiB: %.2f GiB a block; extrapolated "
                  "(not run) to 32 layers: %.1f GiB, a step of %.0f ms at B %d x T %d"
                  % (" --recompute" if args.recompute else "", mem(one), mem(two), per_gib,
                     mem(one) + 31 * per_gib, t1_ms + 31 * per_ms, args.batch, args.seq))
        for v in args.variant:  # the block with each variant's two runs
            tv = lambda r: args.batch * args.seq / r["best_tokens_per_s_variants"][v]
            ms = 1e3 * (tv(two) - tv(one))
            block.setdefault("best_block_ms_variants", {})[v] = ms
            print("one decoder block with %s: best %.2f ms (speed ratio %.2f against torch)"
                  % (v, ms, torch_ms / ms if ms > 0 else float("nan")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
