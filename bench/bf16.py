"""bfloat16 on the matrix units (issue 16): the tile unit's peak, the products against it, and
where a bfloat16 forward pass spends its time, step by step. One thread, CPU time (the machine is
shared: CPU time is what other jobs inflate least), in this process; ``--threads 1,2`` adds the
tile peak and the bfloat16 pass at two threads.

    .venv/bin/python bench/bf16.py [--quick] [--sections peak,products,steps,ab] [--threads 1,2] [--old-lib PATH]

1. peak      TDPBF16PS on tiles already loaded (qkv_amx_peak): the unit's ceiling on this core;
             with --threads, the same on every thread at once (each its own tiles): whether the
             units are the cores' own (total × threads) or shared.
2. products  qkv.kernels.bfloat16.gemm_bf16 on every unit this CPU offers, beside qkv's float32
             blocked product, on all-MiniLM-L6-v2's four product shapes over 2048 rows (a reviews
             batch); GFLOP/s and the share of the tile peak. The x→bfloat16 pass is included.
3. steps     a forward pass over the engine benchmark's titles and reviews workloads in float32
             and in bfloat16, each step timed (products by shape with their GFLOP/s against the
             tile peak, attention, LayerNorm, the rest), and inside the bfloat16 kernels: rounding
             x, tiles, attention's packing / scores / softmax / P·V, GELU. With --threads, the
             bfloat16 pass on that many threads: each step's CPU over all threads, the wall, and
             each thread's busy time.
4. ab        (only when asked, with --old-lib PATH: another build of qkv/kernels/_kernels.so, e.g. from an
             earlier commit) the bfloat16 pass on the engine benchmark's reviews and titles with
             that library and with this one, swapped in as qkv.kernels.cpu.lib between timed passes of
             the same encoder (interleaved, one process, CPU time): what a kernel change gives a
             whole pass, in the same conditions.
Nothing here reads ../shared. Results: /tmp/qkv-cache/bf16/results-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
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


def tile_peak(quick: bool, rounds: int = 3) -> float | None:
    from qkv.kernels import cpu

    if cpu.ISA != "amx":
        return None
    reps = 200_000 if quick else 1_000_000
    best = 0.0
    for _ in range(rounds):
        t = time.thread_time()
        flops = cpu.lib.qkv_amx_peak(reps)
        best = max(best, flops / (time.thread_time() - t) / 1e9)
    return best


def tile_peak_threads(threads: int, quick: bool) -> dict | None:
    """The tile peak on ``threads`` threads at once (each its own tiles; the calls release the
    GIL): per thread GFLOP/s by its own CPU time, and all together by wall time. Best of 3."""
    from qkv.kernels import cpu

    if cpu.ISA != "amx":
        return None
    reps = 200_000 if quick else 1_000_000
    best = {"per_thread_cpu": 0.0, "total_wall": 0.0, "one_thread": 0.0}
    for _ in range(3):
        best["one_thread"] = max(best["one_thread"], tile_peak(quick, rounds=1))  # interleaved, same process
        rates = []

        def one():
            t = time.thread_time()
            flops = cpu.lib.qkv_amx_peak(reps)
            rates.append((flops, time.thread_time() - t))

        ths = [threading.Thread(target=one) for _ in range(threads)]
        w = time.perf_counter()
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        w = time.perf_counter() - w
        best["per_thread_cpu"] = max(best["per_thread_cpu"], min(f / c for f, c in rates) / 1e9)
        best["total_wall"] = max(best["total_wall"], sum(f for f, _ in rates) / w / 1e9)
    return best


def products(rows: int, reps: int) -> dict:
    from qkv.kernels import bfloat16, cpu, float32

    rng = np.random.default_rng(0)
    units = [u for u in cpu.offered() if u != "float32"]
    out = {}
    for name, (K, N) in SHAPES.items():
        x = rng.standard_normal((rows, K)).astype(np.float32)
        w = (rng.standard_normal((K, N)) * 0.05).astype(np.float32)
        b = np.zeros(N, np.float32)
        y = float32.aligned_empty((rows, N))
        gelu = "GELU" in name
        p32, pb = float32.pack_panels(w), bfloat16.pack_bf16(w)
        flops = 2 * rows * K * N
        row = {"float32": flops / cpu_time(lambda: float32.gemm(x, p32, b, y, gelu=gelu), reps) / 1e9}
        for u in units:
            row[u] = flops / cpu_time(lambda u=u: bfloat16.gemm_bf16(x, pb, b, y, gelu=gelu, isa=u), reps) / 1e9
        out[name] = row
    return out


# qkv_bf16_profile's counters, in order. The scores of every block of 32 query rows but a head's
# first are made on the tiles while the softmax of the block before runs (their tile instructions
# spread between its rows), so they count in the softmax's phase.
PHASES = ("round x to bfloat16", "tiles + epilogue", "pack Q, Kᵀ, V", "scores (tiles), first block of a head",
          "softmax (float32) + next block's scores", "P·V (tiles) + output")


def steps(quick: bool, threads: int = 1) -> dict:
    """CPU ms per batch of each step of a forward pass, by wrapping the packed products and the
    attention kernels (the wrappers cost ~1 µs a call, a few hundred calls a batch). Inside the
    bfloat16 products and attention the C kernels count TSC ticks per phase (qkv_bf16_profile):
    each wrapped step's CPU time is split in those proportions. GELU, fused into the first
    feed-forward product, is timed apart: that product with and without it, on the same rows.

    ``threads`` > 1: the bfloat16 pass only, on that many threads as the encoder runs it; each
    step's CPU time summed over the threads (each thread's own clock), the pass's wall and
    process CPU time, and each thread's busy time (the pieces of texts it claimed): what
    a second thread adds and where it waits. No TSC phases (their counters are not per thread)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import _harness

    import qkv
    from qkv.kernels import cpu
    from qkv.model import attend, layer, linear
    from qkv.model.workspace import Workspace

    enc = qkv.load(threads=threads)
    T: dict = defaultdict(float)
    F: dict = defaultdict(float)  # FLOPs of each product label
    lock = threading.RLock()  # prod_label takes it inside timed's

    def timed(label_of):
        def wrap(fn):
            def inner(*a, **k):
                t = time.thread_time()
                try:
                    return fn(*a, **k)
                finally:
                    dt = time.thread_time() - t
                    with lock:
                        T[label_of(*a, **k)] += dt
            return inner
        return wrap

    def prod_label(self, x, out, **k):
        label = f"product {self.shape[0]}×{self.shape[1]}" + (" +GELU" if k.get("act") else "")
        with lock:
            F[label] += 2.0 * out.shape[0] * self.shape[0] * self.shape[1]
        return label

    busy: dict = defaultdict(float)  # thread name → CPU seconds in its outermost forward calls
    depth = threading.local()

    def forward_busy(fn):
        def inner(*a, **k):
            outer = not getattr(depth, "n", 0)
            depth.n = getattr(depth, "n", 0) + 1
            t = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                depth.n -= 1
                if outer:
                    with lock:
                        busy[threading.current_thread().name] += time.thread_time() - t
        return inner

    patches = []
    for cls in (linear.Float32Panels, linear.BFloat16Panels):
        patches.append((cls, "__call__", cls.__call__))
        cls.__call__ = timed(prod_label)(cls.__call__)
    patches.append((attend, "attend", attend.attend))
    attend.attend = timed(lambda *a, **k: "attention (steps 2-5)")(attend.attend)
    for name in ("add_layer_norm", "add_layer_norm_bf16"):  # float32, and with its bfloat16 copy
        patches.append((layer, name, getattr(layer, name)))
        setattr(layer, name, timed(lambda *a, **k: "residual + LayerNorm")(getattr(layer, name)))
    if threads > 1:  # each piece of texts (or the whole batch) is one call of forward(threads=1)
        from qkv.model.encoder import Encoder

        patches.append((Encoder, "forward", Encoder.forward))
        Encoder.forward = forward_busy(Encoder.forward)
    ticks = np.zeros(len(PHASES), np.int64)
    profile = lambda on: cpu.lib.qkv_bf16_profile(on if threads == 1 else 0, ticks.ctypes.data)  # noqa: E731
    res = {}
    try:
        for wl in _harness.TARGET_WORKLOADS:
            batches = _harness.workload_batches(enc, wl)
            if quick:
                batches = batches[:2]
            for prec in ("float32", "bfloat16") if threads == 1 else ("bfloat16",):
                ws = Workspace()
                enc.forward(*batches[0][1:], workspace=ws, precision=prec)  # packs the weights
                T.clear()
                F.clear()
                busy.clear()
                profile(1)
                t, w = (time.thread_time() if threads == 1 else time.process_time()), time.perf_counter()
                for _, ids, mask in batches:
                    enc.forward(ids, mask, workspace=ws, precision=prec)
                total = ((time.thread_time() if threads == 1 else time.process_time()) - t) / len(batches)
                wall = (time.perf_counter() - w) / len(batches)
                profile(0)
                nb = len(batches)
                parts = {k: v / nb for k, v in sorted(T.items())}
                parts["rest (embeddings, packing rows, Python)"] = total - sum(parts.values())
                flops = sum(_harness.encoder_flops(enc.config, *ids.shape) for _, ids, _ in batches) / nb
                row = {"total_ms": total * 1e3, "wall_ms": wall * 1e3, "threads": threads,
                       "parts_ms": {k: v * 1e3 for k, v in parts.items()},
                       "gflops_per_cpu_s": flops / total / 1e9,
                       "products_gflops": {k: F[k] / T[k] / 1e9 for k in F if T[k] > 0},
                       "unit": cpu.ISA if prec == "bfloat16" else "float32"}
                if threads > 1:
                    row["busy_ms"] = {n: v / nb * 1e3 for n, v in sorted(busy.items())}
                    res[f"{wl}|{prec}|{threads}"] = row
                    continue
                if prec == "bfloat16" and ticks.sum():
                    prod_ms = sum(v for k, v in parts.items() if k.startswith("product")) * 1e3
                    att_ms = parts.get("attention (steps 2-5)", 0.0) * 1e3
                    g = ticks[:2].sum() or 1
                    a = ticks[2:].sum() or 1
                    inside = {f"products: {PHASES[i]}": prod_ms * ticks[i] / g for i in range(2)}
                    inside.update({f"attention: {PHASES[i]}": att_ms * ticks[i] / a for i in range(2, len(PHASES))})
                    rows = sum(int(m.sum()) for _, _, m in batches) // nb  # real tokens (padding skipped)
                    inside["GELU (in the FFN-in product; timed apart)"] = gelu_ms(rows) * enc.config.num_layers
                    row["inside_ms"] = inside
                res[f"{wl}|{prec}"] = row
    finally:
        for obj, name, fn in patches:
            setattr(obj, name, fn)
    return res


def ab_pass(old_lib: str, rounds: int) -> dict:
    """CPU ms per bfloat16 batch (3 batches of each workload) with the library at ``old_lib`` and
    with this one, swapped in turn between timed passes; min of each and the median of the
    paired ratios (new / old)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import _harness

    import qkv
    from qkv.kernels import cpu
    from qkv.model.workspace import Workspace

    new = cpu.lib
    old, why, _ = cpu._load(Path(old_lib), cpu.cpu_flags())
    if old is None or new is None:
        raise SystemExit(f"ab: cannot load {old_lib} ({why}) or this library ({cpu.STATUS})")
    old.qkv_amx_request()
    enc = qkv.load(threads=1)
    libs = {"old": old, "new": new}
    out = {}
    try:
        for wl in _harness.TARGET_WORKLOADS:
            batches = _harness.workload_batches(enc, wl)[:3]
            ws = {k: Workspace() for k in libs}
            t: dict = {k: [] for k in libs}
            for k in libs:
                cpu.lib = libs[k]
                enc.forward(*batches[0][1:], workspace=ws[k], precision="bfloat16")
            for _ in range(rounds):
                for k in libs:
                    cpu.lib = libs[k]
                    c = time.thread_time()
                    for _, ids, mask in batches:
                        enc.forward(ids, mask, workspace=ws[k], precision="bfloat16")
                    t[k].append((time.thread_time() - c) / len(batches) * 1e3)
            o, n = np.array(t["old"]), np.array(t["new"])
            out[wl] = {"old_min_ms": float(o.min()), "new_min_ms": float(n.min()),
                       "median_ratio": float(np.median(n / o))}
    finally:
        cpu.lib = new
    return out


def gelu_ms(rows: int, K: int = 384, N: int = 1536) -> float:
    """CPU ms GELU adds to one [rows, K]·[K, N] bfloat16 product (with it minus without it, the
    output in bfloat16 as the layer writes it)."""
    from qkv.kernels import bfloat16

    rng = np.random.default_rng(5)
    x = rng.standard_normal((rows, K)).astype(np.float32)
    p = bfloat16.pack_bf16((rng.standard_normal((K, N)) * 0.05).astype(np.float32))
    b, y = np.zeros(N, np.float32), np.empty((rows, N), np.uint16)
    reps = max(3, int(2e6 // rows))
    with_g = cpu_time(lambda: bfloat16.gemm_bf16(x, p, b, y, gelu=True), reps, rounds=5)
    without = cpu_time(lambda: bfloat16.gemm_bf16(x, p, b, y), reps, rounds=5)
    return max(0.0, with_g - without) * 1e3


def print_steps(console, res: dict, peak: float | None) -> None:
    """The per-step tables of ``steps`` (also printed by bench/engine.py's encoder section)."""
    from rich.table import Table

    for wl in ("titles", "reviews"):
        a, b = res.get(f"{wl}|float32"), res.get(f"{wl}|bfloat16")
        if not (a and b):
            continue
        tb = Table(title=f"Where a forward pass goes — {wl}, CPU ms per batch, one thread unless said "
                         f"(bfloat16 on {b['unit']}; tile peak {peak:.0f} GFLOP/s)" if peak else "")
        tb.add_column("step")
        tb.add_column("float32", justify="right")
        tb.add_column("bfloat16", justify="right")
        tb.add_column("share of bfloat16", justify="right")
        tb.add_column("bfloat16 GFLOP/s" + (" (% of tile peak)" if peak else ""), justify="right")
        more = [res[k] for k in sorted(res) if k.startswith(f"{wl}|bfloat16|")]  # other thread counts
        for m in more:
            tb.add_column(f"bfloat16, {m['threads']} threads (CPU, all threads)", justify="right")
        for k in sorted(set(a["parts_ms"]) | set(b["parts_ms"]), key=lambda k: -b["parts_ms"].get(k, 0)):
            x, y = a["parts_ms"].get(k, 0.0), b["parts_ms"].get(k, 0.0)
            g = b.get("products_gflops", {}).get(k)
            gtxt = "" if g is None else f"{g:.0f}" + (f" ({100 * g / peak:.0f}%)" if peak else "")
            tb.add_row(k, f"{x:.1f}", f"{y:.1f}", f"{100 * y / b['total_ms']:.0f}%", gtxt,
                       *(f"{m['parts_ms'].get(k, 0.0):.1f}" for m in more))
        for k, v in b.get("inside_ms", {}).items():
            tb.add_row(f"  [dim]{k}[/dim]", "", f"[dim]{v:.1f}[/dim]", f"[dim]{100 * v / b['total_ms']:.0f}%[/dim]", "",
                       *("" for _ in more))
        tb.add_row("[bold]total (CPU)[/bold]", f"{a['total_ms']:.1f}", f"{b['total_ms']:.1f}",
                   f"{a['total_ms'] / b['total_ms']:.2f}× faster", "", *(f"{m['total_ms']:.1f}" for m in more))
        if more:
            tb.add_row("wall per batch", f"{a.get('wall_ms', 0):.1f}", f"{b.get('wall_ms', 0):.1f}", "", "",
                       *(f"{m['wall_ms']:.1f}" + (f" ({b['wall_ms'] / m['wall_ms']:.2f}× one thread)" if b.get("wall_ms")
                                                  else "") for m in more))
            tb.add_row("busy per thread (CPU in its forward calls)", "", "", "", "",
                       *(" / ".join(f"{v:.1f}" for v in m.get("busy_ms", {}).values()) for m in more))
        tb.add_row("matmul GFLOP/s per CPU-s (whole pass)", f"{a['gflops_per_cpu_s']:.0f}",
                   f"{b['gflops_per_cpu_s']:.0f}", "", "", *(f"{m['gflops_per_cpu_s']:.0f}" for m in more))
        console.print(tb)
    console.print("   [dim]indented rows split a step above (TSC ticks per phase in the C kernels; the tile "
                  "unit runs asynchronously, so a phase may absorb waiting on the one before); GELU is "
                  "timed apart and is part of the +GELU product's time[/dim]")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default="peak,products,steps")
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--threads", default="1", help="steps: also the bfloat16 pass at these counts, e.g. 1,2")
    ap.add_argument("--old-lib", default="", help="ab: another build of qkv/kernels/_kernels.so to compare this one with")
    args, _ = ap.parse_known_args(argv)  # bench/run.py may pass other areas' options
    os.environ.setdefault("QKV_THREADS", "1")
    from rich.console import Console
    from rich.table import Table

    from qkv.kernels import cpu

    console = Console(width=max(Console().width, 140))
    sections = set(args.sections.split(","))
    load0 = os.getloadavg()
    console.print(f"[bold]bfloat16 benchmark[/bold] — {cpu.STATUS}; load average {load0[0]:.1f} on "
                  f"{os.cpu_count()} CPUs; one thread, CPU time")
    results: dict = {"status": cpu.STATUS, "offered": cpu.offered(), "load_start": load0}
    peak = tile_peak(args.quick) if "peak" in sections else None
    results["tile_peak_gflops"] = peak
    if peak:
        console.print(f"1. AMX tile unit peak (TDPBF16PS on loaded tiles): [bold]{peak:.0f}[/bold] GFLOP/s per core")
    counts = sorted({int(t) for t in args.threads.split(",")} - {1})
    for t in counts if peak else ():
        pt = tile_peak_threads(t, args.quick)
        results[f"tile_peak_{t}_threads"] = pt
        console.print(f"   on {t} threads at once: {pt['per_thread_cpu']:.0f} GFLOP/s per thread (its CPU time), "
                      f"{pt['total_wall']:.0f} all together (wall) = {pt['total_wall'] / pt['one_thread']:.2f}× one "
                      f"thread's {pt['one_thread']:.0f} (interleaved)")
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
        for t in counts:
            res.update(steps(args.quick, threads=t))
        results["steps"] = res
        print_steps(console, res, peak)
    if "ab" in sections:
        if not args.old_lib:
            raise SystemExit("--sections ab needs --old-lib PATH (another build of qkv/kernels/_kernels.so)")
        res = ab_pass(args.old_lib, 3 if args.quick else 8)
        results["ab"] = res
        tb = Table(title=f"4. The bfloat16 pass, {args.old_lib} (old) against this library (new), CPU ms per batch, "
                         "interleaved in one process")
        for c in ("workload", "old (min)", "new (min)", "new ÷ old (median of paired rounds)"):
            tb.add_column(c, justify="right" if c != "workload" else "left")
        for wl, r in res.items():
            tb.add_row(wl, f"{r['old_min_ms']:.1f}", f"{r['new_min_ms']:.1f}", f"{r['median_ratio']:.3f}")
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
