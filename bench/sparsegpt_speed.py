"""sparsegpt_speed.py: SparseGPT on one layer, ours (tests/oneshot_layer) against the same
algorithm in PyTorch (float32, the reference implementation's steps: H = X^T X, dead
inputs, 1% dampening, cholesky / cholesky_inverse / cholesky upper, blocks of 128 columns
with the OBS updates and the lazy update after each block) on the same W and X, in one
script. Times exclude reading the inputs; ours is reported by the helper, torch's is
measured here. Prints one line per layer shape and a JSON line.

--device cpu (default): ours is lib/sparse/sparsegpt.c on OpenBLAS, torch on the CPU.
--device cuda (issue 38): ours is the device path (oneshot_layer --device cuda: X cast to
bf16, X^T X by cuBLASLt, sparsegpt_factor_cuda, sparsegpt_prune_cuda; one untimed pass
first, then one timed between cudaDeviceSynchronize, the upload of W and X excluded),
torch the same reference on the same GPU (TF32 off, as the reference sets it), one
untimed warm-up run, then one timed with torch.cuda.synchronize around it. The target:
ours at least 1.5x faster per layer (printed, and "met" in the JSON).

usage: python3 bench/sparsegpt_speed.py [--bin build/tests/oneshot_layer] [--tokens N]
       [--shapes 4096x4096,11008x4096] [--device cpu|cuda] [--threads N]
(the issue's protocol is 128 x 2048 = 262144 calibration tokens, the default on cuda;
32768 on the cpu, where --tokens 262144 takes minutes: X^T X is most of the work and
scales linearly with it)
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np
import torch


def torch_sparsegpt(W, X, s, B=128, percdamp=0.01):
    W = W.clone()
    rows, cols = W.shape
    H = X.t() @ X
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    H += percdamp * torch.mean(torch.diag(H)) * torch.eye(cols, device=W.device)
    L = torch.linalg.cholesky(H)
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(L), upper=True)
    M = torch.ones_like(W, dtype=torch.bool)
    for c0 in range(0, cols, B):
        c1 = min(c0 + B, cols)
        bc = c1 - c0
        W1 = W[:, c0:c1].clone()
        Q1, E1 = torch.zeros_like(W1), torch.zeros_like(W1)
        H1 = Hinv[c0:c1, c0:c1]
        d = torch.diag(H1)
        score = (W1 ** 2 / d ** 2).flatten()
        k = int(rows * bc * s)
        M1 = torch.ones(rows * bc, dtype=torch.bool, device=W.device)
        M1[torch.topk(score, k, largest=False).indices] = False
        M1 = M1.view(rows, bc)
        for j in range(bc):
            w = W1[:, j]
            q = torch.where(M1[:, j], w, torch.zeros_like(w))
            e = (w - q) / d[j]
            W1[:, j:] -= e.unsqueeze(1) @ H1[j, j:].unsqueeze(0)
            Q1[:, j], E1[:, j] = q, e
        W[:, c0:c1] = Q1
        W[:, c1:] -= E1 @ Hinv[c0:c1, c1:]
        M[:, c0:c1] = M1
    return W, M


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/tests/oneshot_layer")
    ap.add_argument("--tokens", type=int, default=0, help="calibration tokens (default 262144 on cuda, 32768 on cpu)")
    ap.add_argument("--shapes", default="4096x4096,11008x4096")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    cuda = a.device == "cuda"
    tokens = a.tokens or (262144 if cuda else 32768)
    if a.threads:
        torch.set_num_threads(a.threads)
    if cuda:
        if not torch.cuda.is_available():
            raise SystemExit("sparsegpt_speed.py: --device cuda: torch sees no CUDA device")
        # the reference's own setting (sparsegpt's opt.py): fp32 products, no TF32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    gpu = torch.cuda.get_device_name() if cuda else None

    def timed(f):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        f()
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    rng = np.random.default_rng(0)
    results = []
    xs = {}  # cols -> (X, its file): one X for the shapes that share an input width
    with tempfile.TemporaryDirectory() as tmp:
        for shape in a.shapes.split(","):
            rows, cols = map(int, shape.split("x"))
            W = rng.standard_normal((rows, cols), dtype=np.float32) * 0.02
            if cols not in xs:
                xs[cols] = (rng.standard_normal((tokens, cols), dtype=np.float32), os.path.join(tmp, "x%d.f32" % cols))
                xs[cols][0].tofile(xs[cols][1])
            X, xpath = xs[cols]
            paths = [os.path.join(tmp, n) for n in ("w.f32", xpath, "ow.f32", "om.u8")]
            W.tofile(paths[0])
            env = dict(os.environ)
            if a.threads:
                env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(a.threads)
            # ours: on cuda the helper's device path (tests/oneshot_layer.c: one untimed pass first)
            cmd = [a.bin] + (["--device", "cuda"] if cuda else []) + ["sparsegpt", "0.5", str(rows), str(cols),
                                                                      str(tokens)] + paths
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode != 0:
                raise SystemExit("sparsegpt_speed.py: %s failed: %s" % (" ".join(cmd), r.stderr.strip()))
            ours = float(r.stderr.split("seconds")[-1].split()[0])
            kernels = r.stderr.split("device " if cuda else "blas ")[-1].strip()
            Wt, Xt = torch.from_numpy(W).to(a.device), torch.from_numpy(X).to(a.device)
            if cuda:
                timed(lambda: torch_sparsegpt(Wt, Xt, 0.5))  # warm-up: kernels loaded, cuBLAS and cuSOLVER set up
            theirs = timed(lambda: torch_sparsegpt(Wt, Xt, 0.5))
            del Wt, Xt
            if cuda:
                torch.cuda.empty_cache()
            row = {"shape": shape, "tokens": tokens, "ours_s": ours, "torch_s": theirs, "speedup": theirs / ours,
                   "ours_blas" if not cuda else "ours_device": kernels, "torch": torch.__version__,
                   "device": a.device, "threads": torch.get_num_threads()}
            if cuda:
                row.update(gpu=gpu, target=1.5, met=theirs / ours >= 1.5, tf32=False)
            results.append(row)
            where = f"{a.device}, {torch.get_num_threads()} threads" if not cuda else f"cuda, {gpu}"
            print(f"{shape} with {tokens} tokens: ours {ours:.3f} s, torch {theirs:.3f} s ({where}): "
                  f"{theirs / ours:.2f}x" + (f" (target at least 1.5x: {'met' if theirs / ours >= 1.5 else 'NOT met'})"
                                            if cuda else "") + f"; ours on {kernels}", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
