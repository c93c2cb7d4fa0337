"""sparsegpt_speed.py: SparseGPT on one layer, ours (tests/oneshot_layer: lib/sparse/
sparsegpt.c on OpenBLAS) against the same algorithm in PyTorch (float32, the reference
implementation's steps: H = X^T X, dead inputs, 1% dampening, cholesky / cholesky_inverse /
cholesky upper, blocks of 128 columns with the OBS updates and the lazy update after
each block) on the same W and X, in one script. Times exclude reading the inputs; ours
is reported by the helper, torch's is measured here. Prints one line per layer shape
and a JSON line.

usage: python3 bench/sparsegpt_speed.py [--bin build/tests/oneshot_layer] [--tokens 32768]
       [--shapes 4096x4096,11008x4096] [--device cpu|cuda] [--threads N]
(the issue's protocol is 128 x 2048 = 262144 calibration tokens; --tokens lowers it on
small machines: X^T X is most of the work and scales linearly with it)
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
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--shapes", default="4096x4096,11008x4096")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in a.shapes.split(","):
            rows, cols = map(int, shape.split("x"))
            W = rng.standard_normal((rows, cols), dtype=np.float32) * 0.02
            X = rng.standard_normal((a.tokens, cols), dtype=np.float32)
            paths = [os.path.join(tmp, n) for n in ("w.f32", "x.f32", "ow.f32", "om.u8")]
            W.tofile(paths[0])
            X.tofile(paths[1])
            env = dict(os.environ)
            if a.threads:
                env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(a.threads)
            r = subprocess.run([a.bin, "sparsegpt", "0.5", str(rows), str(cols), str(a.tokens)] + paths,
                               capture_output=True, text=True, env=env, check=True)
            ours = float(r.stderr.split("seconds")[-1].split()[0])
            blas = r.stderr.split("blas ")[-1].strip()
            Wt, Xt = torch.from_numpy(W).to(a.device), torch.from_numpy(X).to(a.device)
            if a.device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            torch_sparsegpt(Wt, Xt, 0.5)
            if a.device == "cuda":
                torch.cuda.synchronize()
            theirs = time.perf_counter() - t0
            row = {"shape": shape, "tokens": a.tokens, "ours_s": ours, "torch_s": theirs, "speedup": theirs / ours,
                   "ours_blas": blas, "torch": torch.__version__, "device": a.device, "threads": torch.get_num_threads()}
            results.append(row)
            print(f"{shape} with {a.tokens} tokens: ours {ours:.2f} s, torch {theirs:.2f} s ({a.device}, "
                  f"{torch.get_num_threads()} threads): {theirs / ours:.2f}x; ours on {blas}", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
