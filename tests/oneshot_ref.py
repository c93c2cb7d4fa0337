"""oneshot_ref.py: Wanda and SparseGPT on one Linear layer, in numpy (float64), written
from the papers' descriptions (Sun et al. 2023; Frantar & Alistarh 2023) with our
documented choices (exact counts: per row for Wanda, per block of 128 columns for
SparseGPT; ties to the lower index), against tests/oneshot_layer (lib/sparse/wanda.c,
sparsegpt.c). Prints TAP lines; tests/t_oneshot.sh runs it.

Checks, on W (24, 300) and correlated inputs X (N, 300) whose feature scales differ
(so that Wanda's order is not magnitude's), with a dead input feature (column 7 all 0):
  * the same mask as the reference, and weights within 1e-4 (SparseGPT updates them);
  * exact counts: floor(300 S) pruned in every row (Wanda), floor(24 * width * S) in
    every block of 128 columns (SparseGPT); the dead column's weights 0 (SparseGPT);
  * the layer's reconstruction error ||W X^T - W' X^T|| ordered SparseGPT <= Wanda <=
    magnitude (floor(n S) smallest |w| of the tensor) at 50% and 70%;
  * N = 100 < 300 inputs (a singular X^T X, made definite by the dampening): no error,
    the counts exact, weights finite;
  * N:M patterns (oneshot_layer --pattern; issue 39) 2:4, 4:8, 1:3 and 16:32 on W (24, 384):
    magnitude, Wanda and SparseGPT against their references here (the M - N lowest scores
    of every group of M columns, ties to the lower column; SparseGPT's group scores
    w^2 / U_jj^2 taken at the group's first column as the weights then are, as the
    reference implementation's prunen/prunem variant, in blocks a multiple of M): the same
    mask, weights within 1e-4, exactly N kept in every group.
usage: python3 oneshot_ref.py BIN TMPDIR [--device cuda]
--device cuda checks the helper's device path (tests/gpu/run.sh's BENCH=oneshot): the same
checks on inputs X rounded to bf16 first (the device's products take X in bf16: so both
sides see the same X, and X^T X summed in fp32 from exact products stays within the
tolerances).
"""
import os
import subprocess
import sys

import numpy as np

import blas_info  # (tests/, this file's folder)

BIN, TMP = sys.argv[1], sys.argv[2]
DEVICE = sys.argv[4] if len(sys.argv) == 5 and sys.argv[3] == "--device" else "cpu"
FAILED = 0


def check(ok, msg):
    global FAILED
    print(("ok - " + msg) if ok else f"not ok - {msg} [{blas_info.describe()}]")
    FAILED |= not ok


def wanda_ref(W, X, s):
    norm = np.sqrt((X.astype(np.float64) ** 2).sum(0))
    score = np.abs(W.astype(np.float64)) * norm
    rows, cols = W.shape
    k = int(np.floor(cols * s))
    M = np.ones(W.shape, bool)
    for r in range(rows):
        order = np.lexsort((np.arange(cols), score[r]))  # by score, then column
        M[r, order[:k]] = False
    return np.where(M, W, 0).astype(np.float64), M


def sparsegpt_ref(W, X, s, B=128, percdamp=0.01, nm=None):
    """SparseGPT at sparsity s, or with nm = (n, m) the N:M variant: each group of m columns
    chosen at its first column from the weights as they then are (the reference's
    prunen/prunem), in blocks of B rounded down to a multiple of m."""
    if nm:
        B = B // nm[1] * nm[1]
    W = W.astype(np.float64).copy()
    rows, cols = W.shape
    X = X.astype(np.float64)
    H = X.T @ X
    dead = np.diag(H) == 0
    H[dead, dead] = 1.0
    W[:, dead] = 0.0
    H += percdamp * np.mean(np.diag(H)) * np.eye(cols)
    U = np.linalg.cholesky(np.linalg.inv(H)).T  # upper: H^-1 = U^T U
    M = np.ones(W.shape, bool)
    for c0 in range(0, cols, B):
        c1 = min(c0 + B, cols)
        bc = c1 - c0
        W1 = W[:, c0:c1].copy()
        Q1, E1 = np.zeros_like(W1), np.zeros_like(W1)
        d = np.diag(U)[c0:c1]
        M1 = np.ones((rows, bc), bool)
        if not nm:
            score = (W1 ** 2 / d ** 2).ravel()  # row-major: place r * bc + j
            k = int(np.floor(rows * bc * s))
            M1 = M1.ravel()
            M1[np.lexsort((np.arange(rows * bc), score))[:k]] = False
            M1 = M1.reshape(rows, bc)
        for j in range(bc):
            if nm and j % nm[1] == 0:
                M1[:, j:j + nm[1]] = nm_mask(W1[:, j:j + nm[1]] ** 2 / d[j:j + nm[1]] ** 2, *nm)
            w = W1[:, j]
            q = np.where(M1[:, j], w, 0.0)
            e = (w - q) / d[j]
            W1[:, j:] -= np.outer(e, U[c0 + j, c0 + j:c1])
            Q1[:, j], E1[:, j] = q, e
        W[:, c0:c1] = Q1
        W[:, c1:] -= E1 @ U[c0:c1, c1:]
        M[:, c0:c1] = M1
    return W, M


def magnitude_ref(W, s):
    k = int(np.floor(W.size * s))
    M = np.ones(W.size, bool)
    M[np.lexsort((np.arange(W.size), np.abs(W).ravel()))[:k]] = False
    M = M.reshape(W.shape)
    return np.where(M, W, 0).astype(np.float64), M


def nm_mask(score, n, m):
    """In each group of m columns of each row, the m - n lowest (score, column) pruned."""
    rows, cols = score.shape
    M = np.ones(score.shape, bool)
    for r in range(rows):
        for c0 in range(0, cols, m):
            order = np.lexsort((np.arange(m), score[r, c0:c0 + m]))
            M[r, c0 + order[:m - n]] = False
    return M


def magnitude_nm_ref(W, n, m):
    M = nm_mask(np.abs(W.astype(np.float64)), n, m)
    return np.where(M, W, 0).astype(np.float64), M


def wanda_nm_ref(W, X, n, m):
    norm = np.sqrt((X.astype(np.float64) ** 2).sum(0))
    M = nm_mask(np.abs(W.astype(np.float64)) * norm, n, m)
    return np.where(M, W, 0).astype(np.float64), M


def ours(method, W, X, s, pattern=None):
    rows, cols = W.shape
    paths = [os.path.join(TMP, n) for n in ("w.f32", "x.f32", "ow.f32", "om.u8")]
    W.astype("<f4").tofile(paths[0])
    X.astype("<f4").tofile(paths[1])
    pat = ["--pattern", pattern] if pattern else []
    r = subprocess.run([BIN, "--device", DEVICE] + pat + [method, repr(s), str(rows), str(cols), str(X.shape[0])] + paths,
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, None, r.stderr.strip()
    w = np.fromfile(paths[2], "<f4").reshape(rows, cols).astype(np.float64)
    m = np.fromfile(paths[3], np.uint8).reshape(rows, cols).astype(bool)
    return w, m, r.stderr.strip()


rng = np.random.default_rng(0)
rows, cols = 24, 300


def inputs(N, cols=cols):
    Z = rng.standard_normal((N, cols))
    A = np.eye(cols) + 0.3 * rng.standard_normal((cols, cols)) / np.sqrt(cols)  # correlated features
    X = (Z @ A) * np.exp(rng.uniform(-1.5, 1.5, cols))  # scales that differ by 20x
    X[:, 7] = 0.0  # a dead input
    return bf16(X.astype(np.float32)) if DEVICE == "cuda" else X.astype(np.float32)


def bf16(x):
    """x (float32) rounded to the nearest bf16 (ties to even), as cast_bf16_cuda does."""
    b = x.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


W = rng.standard_normal((rows, cols)).astype(np.float32)
X = inputs(512)
for s in (0.5, 0.7):
    err = {}
    for method, ref in (("wanda", lambda: wanda_ref(W, X, s)), ("sparsegpt", lambda: sparsegpt_ref(W, X, s))):
        w, m, msg = ours(method, W, X, s)
        if w is None:
            check(False, "%s %g: oneshot_layer failed: %s" % (method, s, msg))
            continue
        rw, rm = ref()
        diff = int((m != rm).sum())
        werr = float(np.abs(w - rw).max())
        check(diff == 0 and werr <= 1e-4, "%s at %g: the reference's mask (%d of %d differ) and weights within 1e-4 "
              "(max %.1e)" % (method, s, diff, m.size, werr))
        if method == "wanda":
            counts = (~m).sum(1)
            check(bool((counts == int(np.floor(cols * s))).all()), "wanda at %g: exactly %d pruned in every row "
                  "(%d to %d)" % (s, int(np.floor(cols * s)), counts.min(), counts.max()))
        else:
            good = all((~m[:, c0:c0 + 128]).sum() == int(np.floor(rows * min(128, cols - c0) * s))
                       for c0 in range(0, cols, 128))
            check(good and bool((w[:, 7] == 0).all()), "sparsegpt at %g: exactly floor(rows * width * S) pruned in "
                  "each block of 128 columns; the dead input's weights 0" % s)
        err[method] = float(np.linalg.norm(W.astype(np.float64) @ X.T.astype(np.float64) - w @ X.T.astype(np.float64)))
    mw, _ = magnitude_ref(W, s)
    err["magnitude"] = float(np.linalg.norm(W.astype(np.float64) @ X.T.astype(np.float64) - mw @ X.T.astype(np.float64)))
    if len(err) == 3:
        check(err["sparsegpt"] <= err["wanda"] <= err["magnitude"], "at %g, ||W X^T - W' X^T||: sparsegpt %.2f <= "
              "wanda %.2f <= magnitude %.2f" % (s, err["sparsegpt"], err["wanda"], err["magnitude"]))

# fewer inputs than features: X^T X singular (and a dead column)
Xs = inputs(100)
w, m, msg = ours("sparsegpt", W, Xs, 0.5)
good = w is not None and bool(np.isfinite(w).all()) and all(
    (~m[:, c0:c0 + 128]).sum() == int(np.floor(rows * min(128, cols - c0) * 0.5)) for c0 in range(0, cols, 128))
check(good, "sparsegpt with 100 inputs of 300 features (a singular X^T X): no error, finite weights, exact counts%s"
      % ("" if w is not None else ": " + msg))

# N:M patterns (the CPU's; the device's is not written yet)
if DEVICE == "cpu":
    cols2 = 384
    W2 = rng.standard_normal((rows, cols2)).astype(np.float32)
    X2 = inputs(512, cols2)
    for n, m in ((2, 4), (4, 8), (1, 3), (16, 32)):
        for method, ref in (("magnitude", lambda: magnitude_nm_ref(W2, n, m)), ("wanda", lambda: wanda_nm_ref(W2, X2, n, m)),
                            ("sparsegpt", lambda: sparsegpt_ref(W2, X2, 0.0, nm=(n, m)))):
            w, mk, msg = ours(method, W2, X2, 0.0, "%d:%d" % (n, m))
            if w is None:
                check(False, "%s %d:%d: oneshot_layer failed: %s" % (method, n, m, msg))
                continue
            rw, rm = ref()
            diff = int((mk != rm).sum())
            werr = float(np.abs(w - rw).max())
            kept = mk.reshape(rows, cols2 // m, m).sum(2)
            check(diff == 0 and werr <= 1e-4 and bool((kept == n).all()) and bool((w[~mk] == 0).all()),
                  "%s %d:%d: the reference's mask (%d of %d differ), weights within 1e-4 (max %.1e), exactly %d kept "
                  "in every group of %d, the pruned weights 0" % (method, n, m, diff, mk.size, werr, n, m))
sys.exit(1 if FAILED else 0)
