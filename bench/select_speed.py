# select_speed.py: the global threshold (lib/sparse/select.h, radix select over the float bit
# pattern, OpenMP histograms) against numpy's np.partition on the same scores: the
# k-th largest of N random float32 scores, threshold identical, time ratio printed.
#
#   python3 bench/select_speed.py [BUILD_DIR] [LOG2_N] [SPARSITY]    defaults: build 28 0.9
#
# Both sides get the scores already in memory; np.partition is timed in place on a
# copy made beforehand (the copy is not timed). Best of 3 for each.
import sys
# This file's name shadows the standard library's select module (and bench/tokenize.py
# shadows tokenize), which subprocess imports: drop bench/ from the import path first.
sys.path.pop(0)
import json, math, os, subprocess, tempfile, time
import numpy as np

build = sys.argv[1] if len(sys.argv) > 1 else "build"
log2n = int(sys.argv[2]) if len(sys.argv) > 2 else 28
S = float(sys.argv[3]) if len(sys.argv) > 3 else 0.9
N = 1 << log2n
k = int(math.floor((1.0 - S) * N + 0.5))  # select_keep_count
rng = np.random.default_rng(0)
x = rng.random(N, dtype=np.float32)
tmpdir = "/dev/shm" if os.path.isdir("/dev/shm") else None
with tempfile.NamedTemporaryFile(dir=tmpdir, suffix=".f32") as f:
    x.tofile(f.name)
    out = subprocess.run([os.path.join(build, "bench", "bench_select"), f.name, str(k), "3"],
                         check=True, capture_output=True, text=True).stdout
r = json.loads(out)
best = 1e30
for _ in range(3):
    y = x.copy()
    t0 = time.perf_counter()
    y.partition(N - k)  # the k-th largest lands at index N - k
    best = min(best, time.perf_counter() - t0)
    thr = y[N - k]
    del y
same = int(np.float32(thr).view(np.uint32)) == r["threshold_bits"]
print(f"select k={k} of N=2^{log2n} float32 scores (S={S}): radix select {r['seconds']*1e3:.1f} ms "
      f"({r['threads']} threads), np.partition {best*1e3:.1f} ms, ratio {best / r['seconds']:.1f}x, "
      f"threshold {'identical' if same else 'DIFFERENT'} ({float(thr):.9g})")
sys.exit(0 if same else 1)
