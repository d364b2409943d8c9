"""Which float32 product is faster by the number of rows: qkv's compiled blocked product
(``Float32Panels``) against NumPy's matmul plus the same compiled bias and GELU (``Blas``), on
all-MiniLM-L6-v2's four product shapes, one thread. The table behind ``cpu.blas_takes_batches``:
where the library is built without AVX-512, float32 batches of more than ``FEW_ROWS`` rows go to
BLAS.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/blas_rows.py            # this machine's library
    QKV_KERNELS_LIB=/tmp/v3.so .venv/bin/python bench/blas_rows.py        # another build

Each cell is CPU time of BLAS ÷ CPU time of qkv's product (> 1: qkv faster), the median of
rounds in which the two run back to back on the same x (random weights of the shape; the
timing does not depend on the values).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = {"384 → 1152": (384, 1152, None), "384 → 384": (384, 384, None),
          "384 → 1536 + GELU": (384, 1536, "gelu"), "1536 → 384": (1536, 384, None)}


def ratio(rows: int, k: int, n: int, act, rounds: int) -> float:
    import numpy as np

    from qkv.model import linear as L

    rng = np.random.default_rng(rows)
    w = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    mine, blas = L.Float32Panels(w), L.Blas(w)
    o1, o2 = np.empty((rows, n), np.float32), np.empty((rows, n), np.float32)
    mine(x, o1, bias=b, act=act)
    blas(x, o2, bias=b, act=act)
    reps = max(3, int(2e8 / (rows * k * n)))
    out = []
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(reps):
            mine(x, o1, bias=b, act=act)
        t1 = time.process_time()
        for _ in range(reps):
            blas(x, o2, bias=b, act=act)
        t2 = time.process_time()
        out.append((t2 - t1) / (t1 - t0))
    return float(np.median(out))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="6,12,32,48,64,96,256,1024")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from qkv.kernels import cpu

    if not cpu.available():
        sys.exit(f"compiled kernels: {cpu.STATUS}")
    flags = cpu.cpu_flags() or set()
    print(f"library built for {cpu.TARGET}; CPU has {'AVX-512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags else 'neither AVX-512 nor AVX2'}"
          f"; load average {os.getloadavg()[0]:.2f}")
    print("| rows | " + " | ".join(SHAPES) + " |")
    print("|---" * (len(SHAPES) + 1) + "|")
    for rows in (int(r) for r in a.rows.split(",")):
        cells = [f"{ratio(rows, k, n, act, a.rounds):.2f}" for k, n, act in SHAPES.values()]
        print(f"| {rows} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
