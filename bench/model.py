#!/usr/bin/python3
"""model.py: tokens/s of the CPU model core (build/bench/bench_model) against PyTorch.

Same work on both sides, in this one script: the same model (same config, and the
same weights: stories260K from ../shared, and a ~30M LLaMA whose random weights
bench_model writes once and PyTorch loads), the same random token ids (splitmix64,
fixed seed), the same B x T, fp32, the same number of threads (OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS and torch.set_num_threads for PyTorch; --threads for ours).

  eval   forward with the mean next-token loss: ours model_eval (per-position nll);
         PyTorch model.eval() under torch.no_grad(), logits then F.cross_entropy
  train  one optimizer step per batch: ours model_zero_grad + model_forward +
         model_backward + adamw_step; PyTorch forward + loss.backward() +
         torch.optim.AdamW.step() + zero_grad() (no clipping on either side)

The PyTorch model is written here as a user would write it for torch 1.13 (which has
no F.scaled_dot_product_attention): nn.Linear projections as transformers' LlamaModel
has them, RMSNorm, rotate_half RoPE with cos/sin computed once, matmul-softmax-matmul
attention with a cached causal mask, GQA by repeating k/v heads, tied lm_head.

Each side runs as its own process, REPS times, alternately (ours, torch, ours, ...);
each run times ITERS iterations after WARMUP and reports the median iteration. The
table shows, per side, the best of the REPS run medians (so that another process that
happens to run during one of them does not decide the result), and
ratio = ours / PyTorch. The first iteration's loss of both sides must agree (same
weights, same tokens: the same computation) or the script stops.

With more than one thread, Debian's PyTorch (OpenMP for its own loops, OpenBLAS's
pthreads for matrix products: two pools that spin against each other) is sometimes
faster with OpenBLAS kept to one thread, or with OMP_WAIT_POLICY=passive: its runs go
through OPENBLAS_NUM_THREADS=N, then =1, then =N with passive waiting, and the best
run counts (the table says which). Ours runs with the environment as it is (libgomp
spins by default; OMP_WAIT_POLICY=passive cost it 30-40% on an idle machine).

usage: /usr/bin/python3 bench/model.py [--bin build/bench/bench_model] [--shared ../shared]
           [--reps 3] [--threads 1,N] [--models stories260K,llama-30m] [--modes eval,train]
Needs Debian's python3-torch (/usr/bin/python3); `make` first.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# This folder comes first on sys.path: a script here named like a standard module
# (bench/tokenize.py was one) would shadow it when torch imports that module.
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE]
ROOT = os.path.dirname(HERE)
sys.path.append(os.path.join(ROOT, "tests"))  # last: nothing there shadows a module torch imports
SEED = 1234
MASK64 = (1 << 64) - 1

# name: B x T, untimed and timed iterations per run, the target ratio
MODELS = {
    "stories260K": dict(B=8, T=256, warmup=3, iters=15, target=1.5),
    "llama-30m": dict(B=4, T=256, warmup=1, iters=3, target=1.0),
}


def need_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        print(f"bench/model.py: PyTorch is not importable by {sys.executable}; run it with "
              "Debian's /usr/bin/python3 (apt-get install python3-torch)", file=sys.stderr)
        sys.exit(1)


# --- the same token ids as bench_model.c's make_batch ------------------------------------

def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def make_batch(seed, B, T, V):
    s, tokens, targets = seed, [], []
    for _ in range(B):
        s, z = splitmix64(s)
        row = [z % V]
        for _ in range(T):
            s, z = splitmix64(s)
            row.append(z % V)
        tokens.append(row[:-1])
        targets.append(row[1:])
    return tokens, targets


# --- safetensors (F32 / BF16 / F16), read by tests/safetensors_py.py: Debian has no safetensors module

def load_safetensors(path):
    import torch
    from safetensors_py import load  # tests/, appended to sys.path above
    return {k: torch.from_numpy(v) for k, v in load(path, dtypes={"F32", "F16", "BF16"}, float32=True).items()}


# --- the PyTorch model ---------------------------------------------------------------------

def build_torch_model(folder, T):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    cfg = json.load(open(os.path.join(folder, "config.json")))
    C, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    NH, V = cfg["num_attention_heads"], cfg["vocab_size"]
    KV = cfg.get("num_key_value_heads", NH)
    HD = cfg.get("head_dim", C // NH)
    eps, theta = cfg["rms_norm_eps"], cfg.get("rope_theta", 10000.0)
    tied = cfg.get("tie_word_embeddings", False)
    assert cfg["model_type"] == "llama" and not cfg.get("attention_bias") and not cfg.get("mlp_bias")

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def rotate_half(x):
        return torch.cat((-x[..., HD // 2:], x[..., :HD // 2]), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(C, NH * HD, bias=False)
            self.k_proj = nn.Linear(C, KV * HD, bias=False)
            self.v_proj = nn.Linear(C, KV * HD, bias=False)
            self.o_proj = nn.Linear(NH * HD, C, bias=False)

        def forward(self, x, cos, sin, mask):
            B_, T_, _ = x.shape
            q = self.q_proj(x).view(B_, T_, NH, HD).transpose(1, 2)
            k = self.k_proj(x).view(B_, T_, KV, HD).transpose(1, 2)
            v = self.v_proj(x).view(B_, T_, KV, HD).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if KV != NH:
                k = k.repeat_interleave(NH // KV, dim=1)
                v = v.repeat_interleave(NH // KV, dim=1)
            s = torch.matmul(q, k.transpose(2, 3)) * (HD ** -0.5) + mask
            a = torch.matmul(F.softmax(s, dim=-1), v)
            return self.o_proj(a.transpose(1, 2).reshape(B_, T_, NH * HD))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(C, I, bias=False)
            self.up_proj = nn.Linear(C, I, bias=False)
            self.down_proj = nn.Linear(I, C, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm(C)
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm(C)
            self.mlp = MLP()

        def forward(self, x, cos, sin, mask):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, C)
            self.layers = nn.ModuleList([Layer() for _ in range(L)])
            self.norm = RMSNorm(C)

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Inner()
            self.lm_head = nn.Linear(C, V, bias=False)
            if tied:
                self.lm_head.weight = self.model.embed_tokens.weight
            inv = 1.0 / (theta ** (torch.arange(0, HD, 2).float() / HD))
            ang = torch.arange(T).float()[:, None] * inv[None, :]
            ang = torch.cat((ang, ang), dim=-1)
            self.register_buffer("cos", ang.cos(), persistent=False)
            self.register_buffer("sin", ang.sin(), persistent=False)
            mask = torch.full((T, T), float("-inf")).triu(1)
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, tokens, targets):
            x = self.model.embed_tokens(tokens)
            for layer in self.model.layers:
                x = layer(x, self.cos, self.sin, self.mask)
            logits = self.lm_head(self.model.norm(x))
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    with torch.no_grad():
        model = Llama()
        weights = load_safetensors(os.path.join(folder, "model.safetensors"))
        missing, unexpected = model.load_state_dict(weights, strict=False)
        missing = [k for k in missing if not (tied and k == "lm_head.weight")]
        assert not missing and not unexpected, (missing, unexpected)
    return model, V


def torch_worker(folder, mode, B, T, threads, warmup, iters):
    """Times PyTorch in this process (started by peer_torch with the thread env set)."""
    import torch
    torch.set_num_threads(threads)
    model, V = build_torch_model(folder, T)
    tokens, targets = make_batch(SEED, B, T, V)
    tokens, targets = torch.tensor(tokens), torch.tensor(targets)
    if mode == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.0)
    else:
        model.eval()
    sec, first = [], None
    for it in range(warmup + iters):
        t0 = time.perf_counter()
        if mode == "train":
            loss = model(tokens, targets)
            loss.backward()
            opt.step()
            opt.zero_grad()
        else:
            with torch.no_grad():
                loss = model(tokens, targets)
        dt = time.perf_counter() - t0
        if it == 0:
            first = float(loss)
        if it >= warmup:
            sec.append(dt)
    sec.sort()
    med = sec[len(sec) // 2] if len(sec) % 2 else 0.5 * (sec[len(sec) // 2 - 1] + sec[len(sec) // 2])
    n = B * T
    print(json.dumps({"impl": "torch " + torch.__version__, "mode": mode, "B": B, "T": T,
                      "threads": torch.get_num_threads(), "iters": iters, "sec_median": med,
                      "sec_best": sec[0], "tok_s_median": n / med, "tok_s_best": n / sec[0],
                      "first_loss": first}))


# --- running both sides ----------------------------------------------------------------

def thread_env(threads, blas_threads=None, passive=False):
    blas = str(threads if blas_threads is None else blas_threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=blas,
               MKL_NUM_THREADS=blas)
    if passive:
        env["OMP_WAIT_POLICY"] = "passive"
    return env


# PyTorch's settings with more than one thread, tried in turn: (OpenBLAS threads, passive).
def torch_setting(rep, threads):
    return [(threads, False), (1, False), (threads, True)][rep % 3] if threads > 1 else (1, False)


def run_json(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit(f"bench/model.py: {' '.join(cmd)} exited {r.returncode}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def ours(args, folder, mode, p, threads):
    cmd = [args.bin, "--model", folder, "--mode", mode, "--batch", str(p["B"]), "--seq", str(p["T"]),
           "--warmup", str(p["warmup"]), "--iters", str(p["iters"]), "--threads", str(threads),
           "--seed", str(SEED)]
    return run_json(cmd, thread_env(threads))


def peer_torch(folder, mode, p, threads, setting):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", folder, mode, str(p["B"]),
           str(p["T"]), str(threads), str(p["warmup"]), str(p["iters"])]
    blas, passive = setting
    r = run_json(cmd, thread_env(threads, blas, passive))
    r["setting"] = f"BLAS {blas}" + (", passive" if passive else "")
    return r


def machine():
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def load():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bench", "bench_model"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--reps", type=int, default=3,
                    help="runs per side, the best counts (PyTorch's go through its settings)")
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}", help="comma-separated thread counts")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default="eval,train")
    ap.add_argument("--iters", type=int, default=0, help="override every model's timed iterations")
    ap.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    args = ap.parse_args()
    need_torch()
    if args.worker:
        folder, mode, B, T, threads, warmup, iters = args.worker
        torch_worker(folder, mode, int(B), int(T), int(threads), int(warmup), int(iters))
        return 0
    if not os.access(args.bin, os.X_OK):
        print(f"bench/model.py: {args.bin} not found; run `make` first", file=sys.stderr)
        return 1
    import torch
    load0 = load()
    threads_list = sorted({int(t) for t in args.threads.split(",")})
    modes = args.modes.split(",")
    rows = []
    tmp = tempfile.mkdtemp(prefix="bench_model.")
    try:
        for name in args.models.split(","):
            p = dict(MODELS[name])
            if args.iters:
                p["iters"] = args.iters
            if name == "stories260K":
                folder = os.path.join(args.shared, "models", "stories260K")
                if not os.path.isdir(folder):
                    print(f"skipping stories260K: {folder} not found (needs ../shared)")
                    continue
            else:
                # Random weights (normal 0.02, fixed seed), written once for both sides.
                folder = os.path.join(tmp, name)
                subprocess.run([args.bin, "--config", os.path.join(HERE, "configs", name + ".json"),
                                "--save", folder, "--iters", "0", "--seed", str(SEED)], check=True,
                               capture_output=True)
            for threads in threads_list:
                for mode in modes:
                    a, b = [], []
                    for r in range(args.reps):
                        a.append(ours(args, folder, mode, p, threads))
                        b.append(peer_torch(folder, mode, p, threads, torch_setting(r, threads)))
                    ra = max(a, key=lambda x: x["tok_s_median"])
                    rb = max(b, key=lambda x: x["tok_s_median"])
                    la, lb = a[0]["first_loss"], b[0]["first_loss"]
                    if not math.isclose(la, lb, rel_tol=1e-4):
                        raise SystemExit(f"{name} {mode}: first loss {la} (ours) != {lb} (torch): "
                                         "the two sides do not compute the same thing")
                    ratio = ra["tok_s_median"] / rb["tok_s_median"]
                    row = dict(model=name, params=ra["params"], mode=mode, B=p["B"], T=p["T"],
                               threads=threads, ours=ra["tok_s_median"], torch=rb["tok_s_median"],
                               ratio=ratio, target=p["target"], loss=la, loss_torch=lb,
                               torch_setting=rb["setting"],
                               ours_runs=[round(x["tok_s_median"]) for x in a],
                               torch_runs=[round(x["tok_s_median"]) for x in b])
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    wait = os.environ.get("OMP_WAIT_POLICY", "unset")
    print(f"\n{machine()}; PyTorch {torch.__version__}; OMP_WAIT_POLICY {wait}; load average "
          f"{load0} before, {load()} after")
    print(f"tokens/s = B*T / median iteration, best of {args.reps} runs per side; "
          "ratio = ours / PyTorch")
    print("| model | params | work | B x T | threads | ours tok/s | PyTorch tok/s (its setting) "
          "| ratio | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        met = "met" if r["ratio"] >= r["target"] else "NOT met"
        print(f"| {r['model']} | {r['params'] / 1e6:.2f}M | {r['mode']} | {r['B']} x {r['T']} | "
              f"{r['threads']} | {r['ours']:.0f} | {r['torch']:.0f} ({r['torch_setting']}) | "
              f"{r['ratio']:.2f}x | "
              f">= {r['target']}x {met} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
