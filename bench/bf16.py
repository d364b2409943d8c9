"""bfloat16 on the matrix units (issue 16): the tile unit's peak, the products against it, and
where a bfloat16 forward pass spends its time, step by step. One thread, CPU time (the machine is
shared: CPU time is what other jobs inflate least), in this process.

    .venv/bin/python bench/bf16.py [--quick] [--sections peak,products,steps]

1. peak      TDPBF16PS on tiles already loaded (qkv_amx_peak): the unit's ceiling on this core.
2. products  qkv.kernels_bf16.gemm_bf16 on every unit this CPU offers, beside qkv's float32
             blocked product, on all-MiniLM-L6-v2's four product shapes over 2048 rows (a reviews
             batch); GFLOP/s and the share of the tile peak. The x→bfloat16 pass is included.
3. steps     a forward pass over the engine benchmark's titles and reviews workloads in float32
             and in bfloat16, each step timed (products by shape, attention, LayerNorm, the rest).
Nothing here reads ../shared. Results: /tmp/qkv-cache/bf16/results-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

SHAPES = {"Q, K, V (384 × 1152)": (384, 1152), "output (384 × 384)": (384, 384),
          "feed-forward in (384 × 1536), +GELU": (384, 1536), "feed-forward out (1536 × 384)": (1536, 384)}


def cpu_time(fn, reps: int, rounds: int = 3) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        t = time.thread_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.thread_time() - t) / reps)
    return best


def tile_peak(quick: bool) -> float | None:
    from qkv import kernels, kernels_bf16

    if kernels_bf16.ISA != "amx":
        return None
    reps = 200_000 if quick else 1_000_000
    best = 0.0
    for _ in range(3):
        t = time.thread_time()
        flops = kernels._lib.qkv_amx_peak(reps)
        best = max(best, flops / (time.thread_time() - t) / 1e9)
    return best


def products(rows: int, reps: int) -> dict:
    from qkv import kernels, kernels_bf16

    rng = np.random.default_rng(0)
    units = [u for u in kernels_bf16.offered() if u != "float32"]
    out = {}
    for name, (K, N) in SHAPES.items():
        x = rng.standard_normal((rows, K)).astype(np.float32)
        w = (rng.standard_normal((K, N)) * 0.05).astype(np.float32)
        b = np.zeros(N, np.float32)
        y = kernels.aligned_empty((rows, N))
        gelu = "GELU" in name
        p32, pb = kernels.pack_panels(w), kernels_bf16.pack_bf16(w)
        flops = 2 * rows * K * N
        row = {"float32": flops / cpu_time(lambda: kernels.gemm(x, p32, b, y, gelu=gelu), reps) / 1e9}
        for u in units:
            row[u] = flops / cpu_time(lambda u=u: kernels_bf16.gemm_bf16(x, pb, b, y, gelu=gelu, isa=u), reps) / 1e9
        out[name] = row
    return out


def steps(quick: bool) -> dict:
    """CPU ms per batch of each step of a forward pass, by wrapping the packed products and the
    attention kernels (the wrappers cost ~1 µs a call, a few hundred calls a batch)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import engine as bench_engine

    import qkv
    from qkv import kernels, kernels_bf16
    from qkv.model import attend, layer, linear
    from qkv.model.workspace import Workspace

    enc = qkv.load(threads=1)
    T: dict = defaultdict(float)

    def timed(label_of):
        def wrap(fn):
            def inner(*a, **k):
                t = time.thread_time()
                try:
                    return fn(*a, **k)
                finally:
                    T[label_of(*a, **k)] += time.thread_time() - t
            return inner
        return wrap

    def prod_label(self, x, out, **k):
        return f"product {self.shape[0]}×{self.shape[1]}" + (" +GELU" if k.get("act") else "")

    patches = []
    for cls in (linear.Float32Panels, linear.BFloat16Panels):
        patches.append((cls, "__call__", cls.__call__))
        cls.__call__ = timed(prod_label)(cls.__call__)
    patches.append((attend, "attend", attend.attend))
    attend.attend = timed(lambda *a, **k: "attention (steps 2-5)")(attend.attend)
    patches.append((layer, "add_layer_norm", layer.add_layer_norm))
    layer.add_layer_norm = timed(lambda *a, **k: "residual + LayerNorm")(layer.add_layer_norm)
    res = {}
    try:
        for wl in bench_engine.TARGET_WORKLOADS:
            batches = bench_engine.workload_batches(enc, wl)
            if quick:
                batches = batches[:2]
            for prec in ("float32", "bfloat16"):
                ws = Workspace()
                enc.forward(*batches[0][1:], workspace=ws, precision=prec)  # packs the weights
                T.clear()
                t = time.thread_time()
                for _, ids, mask in batches:
                    enc.forward(ids, mask, workspace=ws, precision=prec)
                total = (time.thread_time() - t) / len(batches)
                parts = {k: v / len(batches) for k, v in sorted(T.items())}
                parts["rest (embeddings, packing rows, Python)"] = total - sum(parts.values())
                flops = sum(bench_engine.encoder_flops(enc.config, *ids.shape) for _, ids, _ in batches) / len(batches)
                res[f"{wl}|{prec}"] = {"total_ms": total * 1e3, "parts_ms": {k: v * 1e3 for k, v in parts.items()},
                                       "gflops_per_cpu_s": flops / total / 1e9,
                                       "unit": kernels_bf16.ISA if prec == "bfloat16" else "float32"}
    finally:
        for obj, name, fn in patches:
            setattr(obj, name, fn)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default="peak,products,steps")
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args, _ = ap.parse_known_args(argv)  # bench/run.py may pass other areas' options
    os.environ.setdefault("QKV_THREADS", "1")
    from rich.console import Console
    from rich.table import Table

    from qkv import kernels, kernels_bf16

    console = Console(width=max(Console().width, 140))
    sections = set(args.sections.split(","))
    load0 = os.getloadavg()
    console.print(f"[bold]bfloat16 benchmark[/bold] — {kernels.STATUS}; load average {load0[0]:.1f} on "
                  f"{os.cpu_count()} CPUs; one thread, CPU time")
    results: dict = {"status": kernels.STATUS, "offered": kernels_bf16.offered(), "load_start": load0}
    peak = tile_peak(args.quick) if "peak" in sections else None
    results["tile_peak_gflops"] = peak
    if peak:
        console.print(f"1. AMX tile unit peak (TDPBF16PS on loaded tiles): [bold]{peak:.0f}[/bold] GFLOP/s per core")
    if "products" in sections:
        res = products(args.rows, 2 if args.quick else 8)
        results["products_gflops"] = res
        tb = Table(title=f"2. Products over {args.rows} rows, GFLOP/s by CPU time"
                         + (" (in brackets: share of the tile peak)" if peak else ""))
        tb.add_column("shape")
        units = list(next(iter(res.values())))
        for u in units:
            tb.add_column(u if u != "float32" else "float32 (qkv gemm)", justify="right")
        for name, row in res.items():
            tb.add_row(name, *(f"{row[u]:.0f}" + (f" ({100 * row[u] / peak:.0f}%)" if peak and u == "amx" else "")
                               for u in units))
        console.print(tb)
    if "steps" in sections:
        res = steps(args.quick)
        results["steps"] = res
        for wl in ("titles", "reviews"):
            a, b = res.get(f"{wl}|float32"), res.get(f"{wl}|bfloat16")
            if not (a and b):
                continue
            tb = Table(title=f"3. Where a forward pass goes — {wl}, CPU ms per batch, one thread "
                             f"(bfloat16 on {b['unit']})")
            tb.add_column("step")
            tb.add_column("float32", justify="right")
            tb.add_column("bfloat16", justify="right")
            tb.add_column("share of bfloat16", justify="right")
            for k in sorted(set(a["parts_ms"]) | set(b["parts_ms"]), key=lambda k: -b["parts_ms"].get(k, 0)):
                x, y = a["parts_ms"].get(k, 0.0), b["parts_ms"].get(k, 0.0)
                tb.add_row(k, f"{x:.1f}", f"{y:.1f}", f"{100 * y / b['total_ms']:.0f}%")
            tb.add_row("[bold]total[/bold]", f"{a['total_ms']:.1f}", f"{b['total_ms']:.1f}",
                       f"{a['total_ms'] / b['total_ms']:.2f}× faster")
            tb.add_row("matmul GFLOP/s per CPU-s", f"{a['gflops_per_cpu_s']:.0f}", f"{b['gflops_per_cpu_s']:.0f}", "")
            console.print(tb)
    results["load_end"] = os.getloadavg()
    out = Path(os.environ.get("QKV_BENCH_CACHE", "/tmp/qkv-cache")) / "bf16"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"results-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=1))
    console.print(f"load average at the end {results['load_end'][0]:.1f}; raw results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
