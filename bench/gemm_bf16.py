"""The bfloat16 products alone: qkv.kernels.bf16.gemm_bf16 on each unit this CPU offers, beside
qkv's float32 blocked product, on the encoder's four product shapes (all-MiniLM-L6-v2) and a
square, one thread, CPU time. Also the tile unit's own peak (the same kernel on a
block that stays in cache). Prints GFLOP/s and the share of that peak.

    .venv/bin/python bench/gemm_bf16.py [--rows 2048] [--reps 20]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from qkv import kernels
from qkv.kernels import bf16

SHAPES = {"Q, K, V": (384, 1152), "output": (384, 384), "feed-forward in": (384, 1536),
          "feed-forward out": (1536, 384)}


def cpu_time(fn, reps: int) -> float:
    fn()
    best = []
    for _ in range(3):
        t = time.process_time()
        for _ in range(reps):
            fn()
        best.append((time.process_time() - t) / reps)
    return min(best)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args, _ = ap.parse_known_args(argv)  # bench/run.py may pass other areas' options
    if args.quick:
        args.reps = max(1, args.reps // 5)
    print(f"{kernels.STATUS}\nload average {open('/proc/loadavg').read().split()[:3]}")
    rng = np.random.default_rng(0)
    units = [u for u in bf16.offered() if u != "float32"]
    # the unit's peak: 32 rows x 256 columns x K = 2048, all in L1/L2, repeated
    res = {}
    for name, (K, N) in {**SHAPES, "peak (32 x 2048 x 256, in cache)": (2048, 256)}.items():
        R = 32 if name.startswith("peak") else args.rows
        reps = args.reps * (50 if R == 32 else 1)
        x = rng.standard_normal((R, K)).astype(np.float32)
        w = (rng.standard_normal((K, N)) * 0.05).astype(np.float32)
        b = np.zeros(N, np.float32)
        out = kernels.aligned_empty((R, N))
        p32, pb = kernels.pack_panels(w), bf16.pack_bf16(w)
        flops = 2 * R * K * N
        row = {"float32": flops / cpu_time(lambda: kernels.gemm(x, p32, b, out), reps) / 1e9}
        for u in units:
            row[u] = flops / cpu_time(lambda: bf16.gemm_bf16(x, pb, b, out, isa=u), reps) / 1e9
        res[name] = row
        print(f"{name:36s} R={R:5d} " + "  ".join(f"{k} {v:7.0f}" for k, v in row.items()), flush=True)
    print(f"load average {open('/proc/loadavg').read().split()[:3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
