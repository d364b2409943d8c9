"""Two builds of the float32 kernels, paired in one process: the blocked product and the fused
attention of MiniLM's reviews batch, call by call, alternating (thread CPU time, medians).

    .venv/bin/python bench/kernel_ab.py OLD.so NEW.so                 # all five shapes
    .venv/bin/python bench/kernel_ab.py OLD.so NEW.so attn gemm:384:1536:1
    ROWS=768 .venv/bin/python bench/kernel_ab.py OLD.so NEW.so gemm:384:1152

A and B are any two libraries with ``qkv_gemm`` and ``qkv_attention_heads`` (e.g. one compiled from
a copy of kernels.c with a change, ``gcc -O3 -fPIC -shared -fno-math-errno -fopenmp-simd
-march=native -mprefer-vector-width=512 kernels.c -o new.so -lm``); the panels are packed by this
tree's qkv (run with its library built, or QKV_KERNELS_LIB naming a whole build). Shapes: ``attn``
(8 texts × 12 heads × NTOK=256 tokens × 32) and ``gemm:K:N[:gelu]`` over ROWS=2048 rows. Prints
each one's time and GFLOP/s, the per-call ratio A ÷ B (median [25th–75th percentile]; > 1: B is
faster), and whether the two gave the same bits. A shared machine drifts: the pairing is the point.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qkv.kernels import float32  # noqa: E402

P, I64 = ctypes.c_void_p, ctypes.c_int64


def load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(Path(path).resolve()))
    lib.qkv_gemm.argtypes = (P, I64, I64, P, I64, P, ctypes.c_int, P)
    lib.qkv_attention_heads.argtypes = (P, P, P) + (I64,) * 13 + (ctypes.c_float, P, P)
    lib.qkv_attention_work.restype = I64
    return lib


def case(what: str, libs, rng, rows: int, ntok: int):
    """(one callable per library, their outputs, FLOPs of one call)."""
    if what == "attn":
        qkv = rng.standard_normal((ntok, 1152), dtype=np.float32)
        outs = [np.empty((ntok, 384), np.float32) for _ in libs]
        works = [np.empty(lib.qkv_attention_work(ntok, 32, 32), np.float32) for lib in libs]

        def call(i):
            lib, out, work, b = libs[i], outs[i], works[i], qkv.ctypes.data  # qkv lives in the closure
            return lambda: [qkv is not None and lib.qkv_attention_heads(b, b + 384 * 4, b + 768 * 4, 12, 32, 32, 32, 32, 1152, 1152,
                                                    1152, 384, ntok, ntok, 32, 32, 32 ** -0.5, out.ctypes.data,
                                                    work.ctypes.data) for _ in range(8)]
        return [call(0), call(1)], outs, 8 * 4 * 12 * ntok * ntok * 32
    _, k, n, *gelu = what.split(":")
    K, N = int(k), int(n)
    w = rng.standard_normal((K, N), dtype=np.float32) * 0.05
    x = rng.standard_normal((rows, K), dtype=np.float32)
    bias = rng.standard_normal(N, dtype=np.float32)
    panels = float32.pack_panels(w)
    if panels is None:
        raise SystemExit(f"this tree's kernels are not loaded ({float32.cpu.STATUS}): build them first")
    outs = [np.empty((rows, N), np.float32) for _ in libs]

    def call(i):
        lib, out = libs[i], outs[i]
        return lambda: lib.qkv_gemm(x.ctypes.data, rows, K, panels.ctypes.data, N, bias.ctypes.data,
                                    int(bool(gelu)), out.ctypes.data)
    return [call(0), call(1)], outs, 2 * rows * K * N


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    libs = [load(p) for p in sys.argv[1:3]]
    what = sys.argv[3:] or ["attn", "gemm:384:1152", "gemm:384:384", "gemm:384:1536:1", "gemm:1536:384"]
    rows, ntok = int(os.environ.get("ROWS", 2048)), int(os.environ.get("NTOK", 256))
    rng = np.random.default_rng(0)
    for w in what:
        fs, outs, flops = case(w, libs, rng, rows, ntok)
        fs[0](), fs[1]()
        ts = [[], []]
        for _ in range(15):
            for i, f in enumerate(fs):
                t = time.thread_time()
                f()
                ts[i].append(time.thread_time() - t)
        r = sorted(a / b for a, b in zip(*ts))
        med = [float(np.median(t)) for t in ts]
        print(f"{w:18s} A {med[0] * 1e3:7.2f} ms ({flops / med[0] / 1e9:4.0f} GFLOP/s)  "
              f"B {med[1] * 1e3:7.2f} ms ({flops / med[1] / 1e9:4.0f})  A/B {r[len(r) // 2]:.3f} "
              f"[{r[len(r) // 4]:.3f}-{r[3 * len(r) // 4]:.3f}]  same bits: {np.array_equal(outs[0], outs[1])}")


if __name__ == "__main__":
    main()
