"""bench/engine.py's attention section: qkv's plain and key-chunked attention beside torch's SDPA,
12 heads, d = 32: time and peak extra memory (table 4)."""

from __future__ import annotations

import math

from _harness import fmt_ratio, median, reset_peak_rss, rss_kib, timed

HEADS, HEAD_DIM = 12, 32
ATTN_LENGTHS = (128, 512, 2048, 4096)
CHUNKED_MEM_LIMIT_MIB = 64.0


def attn_batch(length: int) -> int:
    """Batch 8 for short sequences, 1 for long ones (a plain 8×12×4096² score matrix is 6 GiB)."""
    return 8 if length <= 512 else 1


def _attn_inputs(length: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    shape = (attn_batch(length), HEADS, length, HEAD_DIM)
    return [rng.standard_normal(shape, dtype=np.float32) for _ in range(3)]


def _attn_fn(impl: str, q, k, v, threads: int = 1):
    if impl == "qkv-plain":
        import qkv.attention as A

        # the five steps on whole arrays (the path that can return the weights)
        return lambda: A.scaled_dot_product_attention(q, k, v, return_weights=True)[0]
    if impl == "qkv-chunked":
        import qkv.attention as A

        return lambda: A.chunked_attention(q, k, v, chunk_size=A.DEFAULT_CHUNK, threads=threads)
    if impl == "torch-sdpa":
        import torch
        import torch.nn.functional as F

        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))

        def run():
            with torch.inference_mode():
                return F.scaled_dot_product_attention(tq, tk, tv).numpy()
        return run
    raise ValueError(f"unknown attention implementation {impl!r}")


def worker_attention(job: dict) -> dict:
    """Time one attention implementation at one length; check it against a float64 reference."""
    import numpy as np

    impl, length, threads = job["impl"], job["length"], job["threads"]
    if impl == "torch-sdpa":
        import torch

        torch.set_num_threads(threads)
    q, k, v = _attn_inputs(length)
    fn = _attn_fn(impl, q, k, v, threads)
    out = np.asarray(fn())
    # float64 reference on the first (batch, head): enough to catch a wrong kernel, cheap in memory
    q0, k0, v0 = (a[0, 0].astype(np.float64) for a in (q, k, v))
    s = q0 @ k0.T / math.sqrt(HEAD_DIM)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    ref = (s / s.sum(axis=-1, keepdims=True)) @ v0
    err = float(np.abs(out[0, 0] - ref).max())
    del s, ref, out
    wall, cpu = timed(fn, job["reps"], warmup=1)
    return {"wall": wall, "cpu": cpu, "max_abs_err": err, "batch": attn_batch(length)}


def worker_attention_memory(job: dict) -> dict:
    """Peak memory of ONE call above what the inputs already hold, in a fresh process.

    Two methods: tracemalloc (exact for numpy, which reports its buffers to it; blind to torch) and
    the kernel's RSS high-water mark reset just before the call (/proc/self/clear_refs), the same
    method for every implementation. The parent sets MALLOC_MMAP_THRESHOLD_ so large blocks are
    mmap'd and returned on free, so RSS follows what is live. Both include the output array."""
    import tracemalloc

    impl, length = job["impl"], job["length"]
    if impl == "torch-sdpa":
        import torch

        torch.set_num_threads(job["threads"])
    q, k, v = _attn_inputs(length)
    fn = _attn_fn(impl, q, k, v, job["threads"])
    tracemalloc.start()
    ok = reset_peak_rss()
    rss0 = rss_kib("VmRSS")
    out = fn()
    hwm = rss_kib("VmHWM")
    _, tpeak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"tracemalloc_mib": tpeak / 2 ** 20 if impl != "torch-sdpa" else None,
            "rss_peak_delta_mib": (hwm - rss0) / 1024 if ok else None,
            "output_mib": out.nbytes / 2 ** 20}


def report(console, Table, raw: dict, threads_list: list[int], lengths: list[int], verdicts: list) -> None:
    """Table 4 and its verdicts."""
    tb = Table(title=f"4. Attention kernel: {HEADS} heads, d = {HEAD_DIM}, float32, no mask "
                     "(ratio = qkv / torch SDPA time at the same threads)")
    for c in ("L", "batch", "impl", "threads", "ms wall", "ms CPU", "/ SDPA wall", "/ SDPA CPU", "max |err|",
              "extra MiB tracemalloc", "extra MiB RSS peak"):
        tb.add_column(c, justify="left" if c == "impl" else "right")
    attn_stats: dict = {}
    for L in lengths:
        for t in threads_list:
            for impl in ("qkv-plain", "qkv-chunked", "torch-sdpa"):
                runs = raw.get(f"attn|{impl}|{L}|{t}", [])
                if runs:
                    attn_stats[(L, t, impl)] = dict(
                        wall=median([x for r in runs for x in r["wall"]]),
                        cpu=median([x for r in runs for x in r["cpu"]]),
                        err=max(r["max_abs_err"] for r in runs))
            ref = attn_stats.get((L, t, "torch-sdpa"))
            for impl in ("qkv-plain", "qkv-chunked", "torch-sdpa"):
                s = attn_stats.get((L, t, impl))
                if s is None:
                    continue
                mem = raw.get(f"mem|{impl}|{L}", [{}])[0]
                tm, rss = mem.get("tracemalloc_mib"), mem.get("rss_peak_delta_mib")
                tb.add_row(str(L), str(attn_batch(L)), impl, str(t), f"{s['wall'] * 1e3:.1f}", f"{s['cpu'] * 1e3:.1f}",
                           "" if impl == "torch-sdpa" or not ref else fmt_ratio(s["wall"] / ref["wall"]),
                           "" if impl == "torch-sdpa" or not ref else fmt_ratio(s["cpu"] / ref["cpu"]),
                           f"{s['err']:.0e}", "—" if tm is None else f"{tm:.1f}",
                           "—" if rss is None else f"{rss:.1f}")
        tb.add_section()
    console.print(tb)
    console.print("   Memory: one call in a fresh 1-thread process, above the inputs, output included. "
                  "tracemalloc sees numpy buffers only; 'RSS peak' is the kernel's high-water mark reset "
                  "just before the call (same method for all, MALLOC_MMAP_THRESHOLD_=64 KiB).")
    t = 1 if 1 in threads_list else threads_list[0]
    from qkv.attention import TILED_FROM

    for L in lengths:
        if L < 512:
            continue
        ref = attn_stats.get((L, t, "torch-sdpa"))
        default = "qkv-plain" if L < TILED_FROM else "qkv-chunked"
        for impl in ("qkv-plain", "qkv-chunked"):
            s = attn_stats.get((L, t, impl))
            if s and ref and (impl == default or impl == "qkv-chunked"):
                r, rc = s["wall"] / ref["wall"], s["cpu"] / ref["cpu"]
                tag = " (default path)" if impl == default else ""
                verdicts.append((f"attention {impl}{tag} ≤ 1.5× SDPA time, L={L}, {t} thread",
                                 r <= 1.5 if impl == default else None,
                                 f"{fmt_ratio(r)} wall, {fmt_ratio(rc)} CPU", rc <= 1.5 if impl == default else None))
    mem = raw.get(f"mem|qkv-chunked|{max(lengths)}", [{}])[0]
    if mem:
        m = max(x for x in (mem.get("tracemalloc_mib"), mem.get("rss_peak_delta_mib")) if x is not None)
        verdicts.append((f"chunked extra memory < {CHUNKED_MEM_LIMIT_MIB:.0f} MiB at L={max(lengths)}",
                         m < CHUNKED_MEM_LIMIT_MIB, f"{m:.1f} MiB", None))
