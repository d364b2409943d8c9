"""bfloat16 attention on the unit in use against float32 attention, in a bfloat16 forward pass
(issue 25 item 4): MiniLM on the engine benchmark's titles (32 × ~24 tokens) and reviews
(8 × 256 tokens), one thread, CPU time per batch, the two attentions interleaved round by round in
one process (the products, LayerNorms and the rest are the same bfloat16 code in both).

    QKV_ISA=avx512bf16 .venv/bin/python bench/bf16_attention.py [--rounds 7]

"float32 attention" is the route bfloat16 took before the unit had an attention kernel of its own
(``per_text``: the fused float32 kernel, Q | K | V and the output in float32); "bfloat16
attention" is ``qkv.model.attend.choose``'s route for the unit (``dots`` on avx512bf16, ``tiles``
on AMX). Prints, first, attention alone on one text of 24 and of 256 tokens (the float32 kernel
against the unit's, interleaved), then sentences per CPU-second of the whole pass, medians over
rounds, and the ratios. Nothing here reads ../shared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--workloads", default="titles,reviews")
    args = ap.parse_args()

    import qkv
    from qkv.kernels import bfloat16, cpu
    from qkv.model import attend
    from _harness import workload_batches

    unit = cpu.ISA
    if unit not in attend.BF16_ROUTES:
        print(f"the bfloat16 unit is {unit}: no bfloat16 attention to compare ({cpu.STATUS})")
        return 1
    enc = qkv.load()
    enc.threads = 1
    route = attend.BF16_ROUTES[unit]
    print(f"unit {unit}; bfloat16 attention: {bfloat16.attention_unit()}; route {route}")

    def one_pass(batches) -> float:
        t = time.thread_time()
        for _, ids, mask in batches:
            enc.forward(ids, mask, precision="bfloat16", threads=1)
        return time.thread_time() - t

    for n in (24, 256):
        f32, b16 = _kernel_times(n, unit, args.rounds)
        print(f"attention alone, one text of {n} tokens, 12 heads of 32: float32 kernel {f32 * 1e3:.3f} ms, "
              f"bfloat16 ({unit}) {b16 * 1e3:.3f} ms; ratio {f32 / b16:.2f}×")
    for wl in args.workloads.split(","):
        batches = workload_batches(enc, wl)
        sentences = sum(len(b[0]) for b in batches)
        times: dict[str, list[float]] = {"float32 attention": [], "bfloat16 attention": []}
        for name in times:  # warm up both (packing, workspaces)
            _set(attend, unit, route if name == "bfloat16 attention" else None)
            one_pass(batches)
        for _ in range(args.rounds):
            for name in times:
                _set(attend, unit, route if name == "bfloat16 attention" else None)
                times[name].append(one_pass(batches))
        _set(attend, unit, route)
        med = {k: statistics.median(v) for k, v in times.items()}
        line = ", ".join(f"{k} {sentences / v:.1f}/s (rounds {min(times[k]) * 1e3:.0f}-{max(times[k]) * 1e3:.0f} ms)"
                         for k, v in med.items())
        print(f"{wl} ({len(batches)} batches, {sentences} sentences): {line}; "
              f"ratio {med['float32 attention'] / med['bfloat16 attention']:.2f}×")
    return 0


def _kernel_times(n: int, unit: str, rounds: int) -> tuple[float, float]:
    """Median CPU seconds of steps 2-5 for one text of n tokens (MiniLM's 12 heads of 32, random
    Q | K | V): the float32 kernel (float32 in and out, as the float32 route runs it) and the unit's
    bfloat16 kernel (bfloat16 bits in and out, as the bfloat16 route runs it), interleaved."""
    import numpy as np

    from qkv.kernels import bfloat16, float32

    rng = np.random.default_rng(n)
    qkv = rng.standard_normal((n, 3 * 384)).astype(np.float32)
    bits, ctx, ctx_bits = bfloat16.to_bf16_bits(qkv), np.empty((n, 384), np.float32), np.empty((n, 384), np.uint16)
    work32 = np.empty(float32.attention_work(n, 32, 32), np.float32)
    work16 = np.empty(bfloat16.attention_work_bf16(n), np.uint8)
    reps = max(1, 20_000 // n)
    runs = {"f32": lambda: float32.attention_text(qkv, 12, 32 ** -0.5, ctx, work32),
            "b16": lambda: bfloat16.attention_text_bf16(bits, 12, 32 ** -0.5, ctx_bits, work16, isa=unit)}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds + 1):
        for k, fn in runs.items():
            t = time.thread_time()
            for _ in range(reps):
                fn()
            times[k].append((time.thread_time() - t) / reps)
    return statistics.median(times["f32"][1:]), statistics.median(times["b16"][1:])


def _set(attend, unit: str, route: str | None) -> None:
    """The route choose() gives bfloat16 on ``unit``: ``route``, or none (float32 attention)."""
    if route is None:
        attend.BF16_ROUTES.pop(unit, None)
    else:
        attend.BF16_ROUTES[unit] = route


if __name__ == "__main__":
    sys.exit(main())
