"""blas_info.py: the BLAS libraries and kernels behind a comparison, for a failed line.

Our tools run Debian's OpenBLAS, whose kernels are picked by the CPU (their --version says
which); the Python references run numpy's own OpenBLAS (its wheel's, a newer one, which
picks its kernels by itself) or torch's MKL. A result that agrees with its reference on one
machine can round differently on another, so every failed comparison names all of them
(tests/lib.sh's fail(), and the Python checkers' "not ok" lines).

    python3 tests/blas_info.py           numpy's:  "numpy 2.4.6: OpenBLAS 0.3.31, SkylakeX kernels"
    python3 tests/blas_info.py --torch   and torch's (run by the venv's python)

describe() is the same line, for a checker that imports this file; BEST_BLAS in the
environment (tests/lib.sh sets it from --version) is put first as "ours: ...".
"""
import ctypes
import os
import sys


def _openblas_libs():
    """Paths of the loaded shared libraries whose name has 'openblas' or 'blas' in it."""
    seen = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path)
                if "blas" in name and path not in seen:
                    seen.append(path)
    except OSError:
        pass
    return seen


def _call(lib, names):
    for n in names:
        fn = getattr(lib, n, None)
        if fn is not None:
            fn.restype = ctypes.c_char_p
            return fn().decode(errors="replace")
    return None


def numpy_blas():
    """numpy's BLAS as "numpy VERSION: OpenBLAS X.Y.Z, CORE kernels" (or what can be said)."""
    try:
        import numpy
    except ImportError:
        return "numpy: not installed"
    numpy.dot(numpy.ones((2, 2)), numpy.ones((2, 2)))  # (loads the BLAS, where it is lazy)
    for path in _openblas_libs():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        # symbol names: plain (Debian's), 64-bit-integer builds' suffix, scipy-openblas's prefix
        prefixes = ["", "scipy_"]
        suffixes = ["", "64_"]
        core = _call(lib, [p + "openblas_get_corename" + s for p in prefixes for s in suffixes])
        config = _call(lib, [p + "openblas_get_config" + s for p in prefixes for s in suffixes])
        if core:
            version = " ".join((config or "OpenBLAS ?").split()[:2])
            return f"numpy {numpy.__version__}: {version}, {core} kernels"
    return f"numpy {numpy.__version__}: BLAS {', '.join(os.path.basename(p) for p in _openblas_libs()) or 'unknown'}"


def torch_blas():
    """torch's as "torch VERSION: MKL 2024.2, AVX512" (its BLAS and the CPU code path it took)."""
    try:
        import torch
    except ImportError:
        return "torch: not installed"
    show = torch.__config__.show()
    blas = "BLAS ?"
    for line in show.splitlines():
        if "Math Kernel Library Version" in line:
            blas = "MKL " + line.split("Version")[1].split()[0].split("-")[0]
            break
        if "BLAS_INFO=" in line:
            blas = line.split("BLAS_INFO=")[1].split(",")[0]
    try:
        cap = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        cap = "?"
    return f"torch {torch.__version__}: {blas}, {cap}"


def describe(torch=False):
    parts = []
    if os.environ.get("BEST_BLAS"):
        parts.append("ours: " + os.environ["BEST_BLAS"])
    parts.append(torch_blas() if torch else numpy_blas())
    return "; ".join(parts)


if __name__ == "__main__":
    print(describe(torch="--torch" in sys.argv[1:]))
