"""How a bfloat16 batch is shared out between two threads (issue 16): pieces of whole texts claimed
one after another against one fixed run a thread, in one process, interleaved round by round, so that
whatever else runs on the machine falls on every plan alike.

    .venv/bin/python bench/pieces.py [--rounds 15 | --quick] [--workloads reviews,titles] [--hog]

1. threads   each plan over bench/engine.py's batches at two threads (and the whole batch at one):
             wall and process CPU ms per batch, each thread's CPU ms in the pieces it claimed, the
             pieces each thread took, and how far apart the two threads' CPU times were; medians
             over the rounds, the smallest beside. ``--hog`` runs a busy-looping process beside
             them (three runnable threads on two vCPUs: a vCPU shared, as other jobs share them).
2. serial    what the pieces cost beyond the whole batch: each plan's pieces one after another on
             one thread (CPU ms per batch, thread_time), against the whole batch.
3. gil       whether each step of the bfloat16 pass releases the GIL: one thread repeats the step
             (made large), another counts in pure Python meanwhile; its rate against its rate
             alone (a step that held the GIL would leave it near the pure-Python row's).
Plans: "one run a thread" (workers.text_pieces(first=1): the fixed cut), "claimed" (the default),
"claimed, halves" (first=0.5), "3/4 + one a thread" (the default rule, with the last pieces forced
even where they would cost under PIECE_LEAST). Nothing here reads ../shared.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

PLANS = {"one run a thread": dict(first=1.0), "claimed (default)": {}, "claimed, halves": dict(first=0.5),
         "3/4 + one a thread": dict(tail=2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="5 rounds (make bench's quick runs)")
    ap.add_argument("--workloads", default="reviews,titles")
    ap.add_argument("--hog", action="store_true", help="a busy-looping process beside the threads")
    ap.add_argument("--sections", default="threads,serial,gil")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds = min(args.rounds, 5)

    import _harness
    from rich.console import Console
    from rich.table import Table

    import qkv
    from qkv.kernels import cpu
    from qkv.model import encoder as E
    from qkv.model import workers as W
    from qkv.model.workspace import Workspace

    console = Console()
    enc = qkv.load(threads=2)
    real_pieces, real_claim = W.text_pieces, W.claim
    busy: dict = defaultdict(float)
    taken: dict = defaultdict(int)
    lock = threading.Lock()

    def claim(n, workers, fn):  # each thread's CPU time in the pieces it claims (its own clock)
        def timed(g, i):
            t = time.thread_time()
            fn(g, i)
            with lock:
                busy[g] += time.thread_time() - t
                taken[g] += 1
        real_claim(n, workers, timed)

    E.claim = claim
    sections = set(args.sections.split(","))
    console.print(f"bfloat16 unit: {cpu.ISA}; load average {os.getloadavg()[0]:.2f}; "
                  f"{time.strftime('%H:%M:%S', time.gmtime())} UTC")
    try:
        for wl in args.workloads.split(","):
            batches = _harness.workload_batches(enc, wl)
            lens = batches[0][2].sum(1)
            shown = {k: [b - a for a, b in real_pieces(lens, 2, **kw)] for k, kw in PLANS.items()}
            if "threads" in sections:
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.hog else None
                try:
                    res = {k: defaultdict(list) for k in ["one thread", *PLANS]}
                    spaces = {k: Workspace() for k in res}

                    def one(k, record=True):
                        kw = PLANS.get(k)
                        E.text_pieces = (lambda lengths, t: real_pieces(lengths, t, **kw)) if kw is not None else real_pieces
                        busy.clear()
                        taken.clear()
                        w, c = time.perf_counter(), time.process_time()
                        for _, ids, mask in batches:
                            enc.forward(ids, mask, workspace=spaces[k], precision="bfloat16",
                                        threads=1 if kw is None else 2)
                        if record:
                            nb = len(batches)
                            r = res[k]
                            r["wall"].append((time.perf_counter() - w) / nb * 1e3)
                            r["cpu"].append((time.process_time() - c) / nb * 1e3)
                            for g in (0, 1):
                                r[f"busy{g}"].append(busy[g] / nb * 1e3)
                                r[f"taken{g}"].append(taken[g] / nb)

                    for k in res:
                        one(k, record=False)
                    for _ in range(args.rounds):
                        for k in res:
                            one(k)
                finally:
                    E.text_pieces = real_pieces
                    if hog is not None:
                        hog.kill()
                        hog.wait()
                t = Table(title=f"{wl}{', a busy process beside' if args.hog else ''}: bfloat16, ms per batch, "
                                f"median of {args.rounds} interleaved rounds (smallest); load now "
                                f"{os.getloadavg()[0]:.2f}")
                for c in ("plan", "pieces (texts)", "wall", "CPU (process)", "× one thread (wall)",
                          "CPU per thread", "pieces per thread", "|thread 0 − thread 1| CPU"):
                    t.add_column(c, justify="left" if c.startswith("p") else "right")
                base = np.median(res["one thread"]["wall"])
                for k, r in res.items():
                    m = {a: float(np.median(v)) for a, v in r.items()}
                    two = k != "one thread"
                    t.add_row(k, " + ".join(map(str, shown[k])) if two else str(len(lens)),
                              f"{m['wall']:.1f} ({min(r['wall']):.1f})", f"{m['cpu']:.1f} ({min(r['cpu']):.1f})",
                              f"{base / m['wall']:.2f}×",
                              f"{m['busy0']:.1f} / {m['busy1']:.1f}" if two else "",
                              f"{m['taken0']:.1f} / {m['taken1']:.1f}" if two else "",
                              f"{np.median(np.abs(np.subtract(r['busy0'], r['busy1']))):.1f}" if two else "")
                console.print(t)
            if "serial" in sections:
                plans = {"whole batch": [(0, len(lens))]}
                plans.update({k: real_pieces(lens, 2, **kw) for k, kw in PLANS.items()})
                plans["a text a piece"] = [(i, i + 1) for i in range(len(lens))]
                spaces = {k: Workspace() for k in plans}
                T: dict = defaultdict(list)

                def serial(k, record=True):
                    t = time.thread_time()
                    for _, ids, mask in batches:
                        out = np.empty((*ids.shape, enc.dim), np.float32)
                        for a, b in plans[k]:  # every batch of a workload holds as many texts
                            enc.forward(ids[a:b], mask[a:b], workspace=spaces[k], precision="bfloat16",
                                        threads=1, out=out[a:b])
                    if record:
                        T[k].append((time.thread_time() - t) / len(batches) * 1e3)

                for k in plans:
                    serial(k, record=False)
                for _ in range(args.rounds):
                    for k in plans:
                        serial(k)
                t = Table(title=f"{wl}: the pieces one after another on one thread, CPU ms per batch, median of "
                                f"{args.rounds} interleaved rounds (smallest); load now {os.getloadavg()[0]:.2f}")
                for c in ("plan", "pieces (texts)", "CPU ms", "× whole batch"):
                    t.add_column(c, justify="left" if c.startswith("p") else "right")
                base = np.median(T["whole batch"])
                for k, v in T.items():
                    t.add_row(k, " + ".join(str(b - a) for a, b in plans[k]) if len(plans[k]) < 12
                              else f"{len(plans[k])} × 1", f"{np.median(v):.1f} ({min(v):.1f})",
                              f"{np.median(v) / base:.3f}×")
                console.print(t)
        if "gil" in sections:
            gil(enc, console)
    finally:
        E.claim = real_claim
    return 0


def gil(enc, console) -> None:
    """Section 3: each step of the bfloat16 pass run over and over in one thread while another counts."""
    from rich.markup import escape
    from rich.table import Table

    from qkv.kernels import bfloat16 as kb, float32

    w, p = enc.weights, enc.weights.layers[0]
    rows = 8192
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 384)).astype(np.float32)
    ids = rng.integers(0, w.word.shape[0], (32, 256))
    flat = np.arange(rows)
    panels = kb.pack_bf16(p.w_in)
    out = np.empty((rows, 1536), np.float32)
    bits = np.zeros((kb.rows_padded(rows), 384), np.uint16)
    qkv_rows = rng.standard_normal((256, 1152)).astype(np.float32)
    ctx = np.empty((256, 384), np.float32)
    work = np.empty(kb.attention_work_bf16(256), np.uint8)
    steps = {
        "gemm_bf16 (8192 × 384 · 384 × 1536, GELU)": lambda: kb.gemm_bf16(x, panels, p.b_in, out, gelu=True),
        "attention_text_bf16, 40 texts of 256": lambda: [kb.attention_text_bf16(qkv_rows, 12, 0.17, ctx, work)
                                                         for _ in range(40)],
        "add_layer_norm_bf16": lambda: kb.add_layer_norm_bf16(x.copy(), x, None, p.ln1_g, p.ln1_b, 1e-12, bits[:rows]),
        "layer_norm (embeddings)": lambda: float32.layer_norm(x.copy(), w.emb_ln_g, w.emb_ln_b, 1e-12),
        "embeddings' gather word[ids]": lambda: w.word[ids],
        "packing rows x[flat]": lambda: x[flat],
        "copy into the output out[flat] = x": lambda: out[:, :384].__setitem__(flat, x),
        "pure Python (holds the GIL)": lambda: sum(range(3_000_000)),
    }
    t = Table(title="Does each step release the GIL? A counting thread's rate while another runs the step, "
                    "against its rate alone")
    for c in ("step", "ms a call", "counter's rate"):
        t.add_column(c, justify="left" if c == "step" else "right")
    for name, fn in steps.items():
        fn()
        rates = []
        for busy in (False, True):
            stop, count = threading.Event(), [0]

            def counter():
                while not stop.is_set():
                    count[0] += 1

            th = threading.Thread(target=counter)
            t0, calls = time.perf_counter(), 0
            th.start()
            while time.perf_counter() - t0 < 0.3:
                if busy:
                    fn()
                    calls += 1
                else:
                    time.sleep(0.01)
            elapsed = time.perf_counter() - t0
            stop.set()
            th.join()
            rates.append(count[0] / elapsed)
        t.add_row(escape(name), f"{elapsed / max(calls, 1) * 1e3:.1f}", f"{rates[1] / rates[0]:.2f}")
    console.print(t)


if __name__ == "__main__":
    raise SystemExit(main())
