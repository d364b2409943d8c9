"""multilingual-e5-small's 4-bit products on each unit this process may use, paired in one process.

    QKV_ISA=avx512bf16 .venv/bin/python bench/q4_units.py            # an AMX Xeon as a stand-in for Zen 4
    QKV_ISA=avx512bf16 .venv/bin/python bench/q4_units.py --units float32,vnni --rounds 9

One thread. Each round runs every unit once, in a fresh random order (``cpu.select(q4=...)``, the
same loaded model and the same batches), so drifting load on a shared machine hits them alike:
titles/s over 8 batches of 32 generated titles (~24 tokens, bench/_harness.py's make_titles) and a
lone search query's forward pass (20 queries of ~9 tokens with E5's "query: " prefix, p50 ms).
Figures are medians over rounds; "ratio" is the median of the per-round ratios to the first unit.
Wall time and process CPU time are both printed (other jobs inflate wall time, not CPU time).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("QKV_THREADS", "1")
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    import qkv
    from _harness import make_titles
    from qkv.kernels import cpu, q4
    from qkv.model.threads import blas_threads

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--units", default=None, help="comma-separated 4-bit units (default: float32 and the default)")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    default = q4.unit()
    units = args.units.split(",") if args.units else list(dict.fromkeys(["float32", default]))
    enc = qkv.load("multilingual-e5-small", threads=1)
    titles = make_titles(enc.tokenizer, 256, 24)
    items = enc.tokenize(titles)
    batches = [enc._pad(items[s:s + 32]) for s in range(0, len(items), 32)]
    queries = [(np.asarray([t.ids]), np.ones((1, len(t.ids)), bool))
               for t in enc.tokenize(enc.with_role(make_titles(enc.tokenizer, 20, 9, seed=7), "query"))]
    print(f"{cpu.STATUS}\nQKV_ISA={os.environ.get('QKV_ISA', '')!r}; units {units}; {len(titles)} titles "
          f"(~{np.mean([len(t.ids) for t in items]):.1f} tokens), {len(queries)} queries "
          f"(~{np.mean([q[0].shape[1] for q in queries]):.1f} tokens)")
    got = {u: {"tps": [], "tps_cpu": [], "q_ms": [], "q_cpu": []} for u in units}
    rng = random.Random(0)
    before = cpu.ISA
    with blas_threads(1):
        for u in units:  # warm every unit once
            cpu.select(before, q4=u)
            assert q4.unit() == u, f"{u} is not offered here: {cpu.q4_offered()}"
            enc.forward(batches[0].ids, batches[0].mask)
            enc.forward(*queries[0])
        for _ in range(args.rounds):
            for u in rng.sample(units, len(units)):
                cpu.select(before, q4=u)
                t0, c0 = time.perf_counter(), time.process_time()
                for b in batches:
                    enc.forward(b.ids, b.mask)
                wall, cpu_s = time.perf_counter() - t0, time.process_time() - c0
                got[u]["tps"].append(len(titles) / wall)
                got[u]["tps_cpu"].append(len(titles) / cpu_s)
                ms, cms = [], []
                for ids, mask in queries:
                    t0, c0 = time.perf_counter(), time.process_time()
                    enc.forward(ids, mask)
                    ms.append(1e3 * (time.perf_counter() - t0))
                    cms.append(1e3 * (time.process_time() - c0))
                got[u]["q_ms"].append(statistics.median(ms))
                got[u]["q_cpu"].append(statistics.median(cms))
    cpu.select(before)
    base = units[0]
    print(f"{'unit':8} {'titles/s':>9} {'/CPU-s':>8} {'ratio':>6}   {'query p50 ms':>12} {'CPU ms':>7} {'speed-up':>8}")
    for u in units:
        g = got[u]
        r_t = statistics.median(a / b for a, b in zip(g["tps"], got[base]["tps"]))
        r_q = statistics.median(b / a for a, b in zip(g["q_ms"], got[base]["q_ms"]))
        print(f"{u:8} {statistics.median(g['tps']):9.1f} {statistics.median(g['tps_cpu']):8.1f} {r_t:6.2f}   "
              f"{statistics.median(g['q_ms']):12.2f} {statistics.median(g['q_cpu']):7.2f} {r_q:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
