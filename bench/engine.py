"""Engine benchmark: qkv's encoder and attention kernel beside the references, measured in one run.

    .venv/bin/python bench/engine.py                    # everything, 1 and 2 threads (~40 min on a busy machine)
    .venv/bin/python bench/engine.py --quick            # fewer repetitions, L up to 2048
    .venv/bin/python bench/engine.py --sections encoder --threads 1

Tables:
  1. parity     qkv, transformers' BertModel and ONNX Runtime (exported from the same weights) give the
                same hidden states (max |diff| over real tokens) before anything is timed.
  2. gemm       the machine's float32 matmul peak (numpy/OpenBLAS and torch), 1024-2048 squares;
                and the encoder's four product shapes on a reviews batch, qkv's own product beside.
  3. encoder    sentences/s and tokens/s on (a) batches of 32 product titles of ~24 tokens,
                (b) batches of 8 reviews of 256 tokens and (c) batches of 8 reviews of random
                lengths 40-256 padded to the longest (how much padding costs each engine); qkv's achieved GFLOP/s (matmul FLOPs counted
                from the config) against the measured peak.
                3d: qkv bfloat16 against every peer at any precision (issue 16); 3e: where qkv's
                bfloat16 pass spends its time, step by step, the products' GFLOP/s against the tile
                unit's measured peak (bench/bf16.py's steps, one thread, its own process).
  4. attention  qkv plain and chunked vs torch SDPA, 12 heads, d = 32: time and peak extra memory.
  5. query      one search query at a time (~8 tokens), the forward pass alone: qkv through BLAS,
                through its blocked product in float32 and its panel product in float16,
                transformers and ONNX Runtime; p50/p90 ms, and how far the float16 vectors are
                from float32 ones.
  6. multilingual  multilingual-e5-small on its 4-bit blocks: a lone query against MiniLM in
                float32, batches against transformers and ONNX Runtime on the same model
                dequantized to float32 and against MiniLM's own throughput, resident memory of
                both models (bench/_multilingual.py).
Then a verdict per target of the engine issue.

Every measured configuration runs in its OWN subprocess with the thread count set through the
environment (OMP/OPENBLAS/MKL_NUM_THREADS, QKV_THREADS) and torch.set_num_threads, because torch and
numpy in one process fight over threads. Configurations are run in interleaved rounds (all engines
once, then all again) so drifting load on this shared machine hits every engine alike; each figure is
the median over all timed passes of all rounds. Wall time is what the throughput figures use; the
process CPU time is printed beside it because other people's jobs inflate wall time, not CPU time.
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left alone.

The encoder tables 3a-3d are a paired duel (bench/_duel.py), because this VM's speed drifts by up
to 2× within a minute (CPU time too): per workload and thread count, every engine starts at once in
its own persistent process (same thread environment), loads and warms up, then the parent hands out
short slots (~0.3 s with --quick, ~0.5 s otherwise: a few batches) one engine at a time, in a fresh
random order every round, for a time budget (--duel-seconds). A figure is the median over an
engine's slots; a comparison is the median over rounds of the per-round ratio, with its 25th-75th
percentile, and the targets' verdicts use that. --per-job adds the older one-job-per-engine tables.

Nothing here needs ../shared: the texts are generated below. Results also go to
/tmp/qkv-cache/engine/results-<time>.json (never into the repo).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_multilingual.py, run by path too
import _duel  # noqa: E402
import _multilingual  # noqa: E402

CACHE = Path(os.environ.get("QKV_BENCH_CACHE", "/tmp/qkv-cache")) / "engine"
MARK = "QKV-BENCH-RESULT "
WORKLOADS = {
    # name: (sentences per batch, target tokens per sentence incl. [CLS]/[SEP], batches per pass)
    "titles": (32, 24, 8),
    "reviews": (8, 256, 3),
    "mixed": (8, 256, 3),  # reviews of 40-256 tokens, padded: not an issue target, shows padding's cost
}
TARGET_WORKLOADS = ("titles", "reviews")
HEADS, HEAD_DIM = 12, 32
ATTN_LENGTHS = (128, 512, 2048, 4096)
CHUNKED_MEM_LIMIT_MIB = 64.0


ENGINE_LABEL = {"qkv-encode": "qkv encode()", "onnxruntime": "onnxruntime", "transformers": "transformers",
                "qkv-bf16": "qkv bfloat16", "transformers-bf16": "transformers bfloat16",
                "onnxruntime-int8": "onnxruntime int8 (dynamic)"}
# Issue 16: qkv in bfloat16 against the best peer at ANY precision (torch with the model cast to
# bfloat16, ONNX Runtime float32, ONNX Runtime with dynamic int8 quantization), same run.
PRECISION_ENGINES = ("qkv-bf16", "transformers-bf16", "onnxruntime-int8")
PEERS = ("transformers", "transformers-bf16", "onnxruntime", "onnxruntime-int8")
BF16_TARGET = 1.2
# the duel's engines per workload (bench/_duel.py); "qkv-encode" joins them in full runs
DUEL_ENGINES = ("qkv", "qkv-bf16") + PEERS
MIXED_ENGINES = ("qkv", "qkv-bf16", "transformers", "onnxruntime")
QUICK_DUEL_S, FULL_DUEL_S = 25.0, 90.0  # seconds of rounds per target duel


def duel_plan(threads_list: list[int], quick: bool, scale: float = 1.0) -> list[dict]:
    """One duel per workload and thread count: its engines, slot length, seconds of rounds and the
    least / most rounds. --quick: slots of ~0.3 s and ~25 s of rounds per target workload (about
    5 min for the encoder section at threads 1,2 with start-up and table 3e); otherwise ~0.5 s and
    90 s. The mixed workload (not a target) gets a third of that."""
    slot, budget = (0.3, QUICK_DUEL_S) if quick else (0.5, FULL_DUEL_S)
    out = []
    for t in threads_list:
        for wl in WORKLOADS:
            target = wl in TARGET_WORKLOADS
            engines = DUEL_ENGINES + (() if quick else ("qkv-encode",)) if target else MIXED_ENGINES
            out.append({"workload": wl, "threads": t, "engines": engines, "slot_s": slot,
                        "budget_s": budget * scale * (1.0 if target else 0.3),
                        "min_rounds": 8 if target else 5, "max_rounds": 60})
    return out


def duel_commands(engines, wl: str, threads: int, files: dict) -> dict:
    """argv and environment of each engine's persistent worker (the same thread environment as
    run_job's: OMP/OPENBLAS/MKL_NUM_THREADS, QKV_THREADS; torch.set_num_threads in the worker)."""
    out = {}
    for eng in engines:
        job = {"engine": eng, "workload": wl, "threads": threads, **files}
        out[eng] = ([sys.executable, str(Path(__file__).resolve()), "--duel-worker", json.dumps(job)],
                    thread_env(threads))
    return out


def attn_batch(length: int) -> int:
    """Batch 8 for short sequences, 1 for long ones (a plain 8×12×4096² score matrix is 6 GiB)."""
    return 8 if length <= 512 else 1


# ------------------------------------------------------------------------------------------ texts
_BRANDS = ["Anker", "Samsung", "Nike", "Adidas", "Logitech", "Philips", "Bosch", "Lego", "Sony", "Dyson",
           "Levi's", "Casio", "Braun", "Tefal", "Garmin", "JBL", "Xiaomi", "Ravensburger", "Osprey", "Makita"]
_PRODUCTS = ["Wireless Bluetooth Headphones", "Running Shoes", "Stainless Steel Water Bottle", "Cordless Drill",
             "Mechanical Gaming Keyboard", "Electric Toothbrush", "Portable Power Bank", "Smart Watch",
             "Non-Stick Frying Pan", "Hiking Backpack", "Slim Fit Jeans", "LED Desk Lamp", "Jigsaw Puzzle",
             "Robot Vacuum Cleaner", "Yoga Mat", "USB-C Charging Cable", "Insulated Rain Jacket"]
_ATTRS = ["Noise Cancelling", "Waterproof IPX7", "Lightweight", "Breathable Mesh", "Fast Charging 65W",
          "Ergonomic Design", "BPA Free", "Long Battery Life 40 Hours", "Rechargeable", "Anti-Slip",
          "Dishwasher Safe", "Foldable", "with Carrying Case", "2-Pack", "for Men and Women", "Heavy Duty",
          "Compatible with iPhone 15 and Galaxy S24", "Extra Large", "Adjustable Strap", "Eco-Friendly"]
_COLOURS = ["Black", "Navy Blue", "Graphite Grey", "Rose Gold", "Forest Green", "White", "Burgundy Red"]
_SIZES = ["Size 42 EU", "500 ml", "1.5 m", "10000mAh", "XL", "28 cm", "1000 Pieces", "Medium", "18V 2.0Ah"]
_OPENERS = ["I bought this for my daughter and", "After three weeks of daily use", "Honestly,",
            "Compared with the model I had before,", "The delivery was quick and", "At first I was sceptical, but",
            "My husband uses it every morning and", "For the price,", "I have to say that"]
_CLAIMS = ["the battery easily lasts a whole working week", "the sound is clear even at high volume",
           "the fit is true to size and very comfortable", "it feels solid and well made",
           "the instructions were confusing and a screw was missing", "the colour looks exactly like the photos",
           "it heats up evenly without burning anything", "the app keeps disconnecting, which is annoying",
           "customer service replaced the broken part within two days", "it is a bit heavier than I expected",
           "the seams started to come loose after a month", "cleaning it takes less than a minute"]
_CLOSERS = ["Would recommend.", "I would buy it again.", "Four stars because of the packaging.",
            "Not worth the money in my opinion.", "Great value overall.", "Returned it after a week."]


def make_titles(tokenizer, n: int, target: int, seed: int = 0) -> list[str]:
    """Product titles of about ``target`` tokens (specials included): brand, product, attributes."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(_BRANDS), rng.choice(_PRODUCTS)]
        extras = rng.sample(_ATTRS, 6) + [rng.choice(_COLOURS), rng.choice(_SIZES)]
        goal = target - tokenizer.n_special + rng.randint(-2, 2)
        for e in extras:
            if tokenizer.count([" ".join(words + [e])])[0] > goal:
                continue
            words.append(e)
        out.append(" ".join(words))
    return out


def make_reviews(tokenizer, n: int, target: int, seed: int = 1) -> list[str]:
    """Reviews of exactly ``target`` tokens (specials included), so a batch has no padding."""
    import random

    rng = random.Random(seed)
    goal = target - tokenizer.n_special
    out = []
    for _ in range(n):
        parts: list[str] = []
        while tokenizer.count([" ".join(parts)])[0] < goal + 10:
            parts.append(f"{rng.choice(_OPENERS)} {rng.choice(_CLAIMS)}. {rng.choice(_CLOSERS)}")
        words = " ".join(parts).split()
        while tokenizer.count([" ".join(words)])[0] > goal:
            words.pop()
        while tokenizer.count([" ".join(words)])[0] < goal:
            words.append("ok")  # one token each
        out.append(" ".join(words))
    return out


def make_mixed(tokenizer, n: int, target: int, seed: int = 2) -> list[str]:
    """Reviews of random lengths between 40 and ``target`` tokens (specials included)."""
    import random

    rng = random.Random(seed)
    return [make_reviews(tokenizer, 1, rng.randint(40, target), seed=seed + i)[0] for i in range(n)]


def workload_batches(enc, name: str):
    """The same (texts, ids, mask) batches for every engine: ids int64 [B, L], mask bool [B, L]."""
    import numpy as np

    per_batch, target, n_batches = WORKLOADS[name]
    n = per_batch * n_batches
    make = {"titles": make_titles, "reviews": make_reviews, "mixed": make_mixed}[name]
    texts = make(enc.tokenizer, n, target)
    items = enc.tokenize(texts)
    batches = []
    for s in range(0, n, per_batch):
        b = enc._pad(items[s:s + per_batch])  # the encoder's own padding
        batches.append((texts[s:s + per_batch], b.ids, b.mask))
    return batches


def encoder_flops(cfg, batch: int, length: int) -> int:
    """Matmul FLOPs (2 per multiply-add) of one forward pass over a padded [batch, length] input:
    fused QKV projection, Q·Kᵀ, weights·V, output projection and the two feed-forward products, per
    layer. Element-wise work (softmax, LayerNorm, GELU, bias) and the embedding gather are not counted."""
    n = batch * length
    h, i = cfg.hidden_size, cfg.intermediate_size
    per_layer = (2 * n * h * 3 * h                                      # X·Wqkv
                 + 2 * batch * cfg.num_heads * length * length * cfg.head_dim  # Q·Kᵀ
                 + 2 * batch * cfg.num_heads * length * length * cfg.head_dim  # P·V
                 + 2 * n * h * h                                        # context·Wo
                 + 2 * n * h * i + 2 * n * i * h)                       # FFN up and down
    return cfg.num_layers * per_layer


# ---------------------------------------------------------------------------------------- workers
def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak_rss() -> bool:
    """Reset the kernel's high-water mark of this process's RSS (Linux ≥ 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _timed(fn, reps: int, warmup: int = 1):
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def _model_path():
    from qkv.model.hub import resolve

    return resolve(None)[1]


def _load_torch_model(threads: int, attn: str | None = None):
    import torch
    from transformers import BertModel

    torch.set_num_threads(threads)
    kw = {} if attn is None else {"attn_implementation": attn}
    return BertModel.from_pretrained(str(_model_path()), **kw).eval()


def onnx_path(fingerprint: str) -> Path:
    import torch

    return CACHE / f"minilm-{fingerprint}-torch{torch.__version__.split('+')[0]}.onnx"


def _ort_session(path: Path, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def worker_export(job: dict) -> dict:
    """Export transformers' BertModel (same weights as qkv) to ONNX with dynamic batch and length."""
    import qkv
    from _onnx import export_last_hidden_state

    enc = qkv.load()
    out = onnx_path(enc.fingerprint())
    if out.is_file():
        return {"path": str(out), "cached": True, "int8": _quantized(out)}
    out.parent.mkdir(parents=True, exist_ok=True)
    model = _load_torch_model(1)

    t0 = time.perf_counter()
    export_last_hidden_state(model, out, enc.config.max_tokens)
    return {"path": str(out), "cached": False, "seconds": time.perf_counter() - t0, "int8": _quantized(out)}


def _quantized(path: Path) -> str | None:
    """ONNX Runtime's dynamic int8 quantization of the exported model (weights int8 per tensor,
    activations quantized on the fly: the usual CPU recipe), cached beside it; None if it fails."""
    out = path.with_name(path.stem + "-int8.onnx")
    if not out.is_file():
        try:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            tmp = out.with_suffix(".tmp.onnx")
            quantize_dynamic(str(path), str(tmp), weight_type=QuantType.QInt8)
            tmp.replace(out)
        except Exception as e:  # noqa: BLE001 — reported as a missing row, never a crash
            print(f"int8 quantization failed: {e}", file=sys.stderr)
            return None
    return str(out)


def worker_parity(job: dict) -> dict:
    """Max |diff| of the last hidden states, real tokens only, between the three engines."""
    import numpy as np
    import torch

    import qkv

    enc = qkv.load(threads=1)
    model = _load_torch_model(1)
    sess = _ort_session(Path(job["onnx"]), 1)
    res = {}
    for wl in WORKLOADS:
        _, ids, mask = workload_batches(enc, wl)[0]
        a = enc.forward(ids, mask)
        with torch.inference_mode():
            b = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask.astype(np.int64))
                      ).last_hidden_state.numpy()
        c = sess.run(None, {"input_ids": ids, "attention_mask": mask.astype(np.int64)})[0]
        m = mask
        res[wl] = {"qkv vs transformers": float(np.abs(a - b)[m].max()),
                   "onnxruntime vs transformers": float(np.abs(c - b)[m].max()),
                   "qkv vs onnxruntime": float(np.abs(a - c)[m].max()),
                   "shape": list(ids.shape), "real_tokens": int(m.sum())}
    return res


def worker_gemm(job: dict) -> dict:
    """float32 GEMM GFLOP/s for square sizes and for the encoder's product shapes, median of the
    timed repetitions. lib "qkv": the encoder's own blocked product (qkv.kernels.float32.gemm, one
    thread) on weights packed once, as the encoder holds them; shapes only."""
    import numpy as np

    lib, threads = job["lib"], job["threads"]
    rng = np.random.default_rng(0)
    out = {}
    if lib == "torch":
        import torch

        torch.set_num_threads(threads)
    for m, k, n in job.get("shapes", []):
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        y = np.empty((m, n), np.float32)
        if lib == "torch":
            tx, tw, ty = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(y)
            fn = lambda: torch.mm(tx, tw, out=ty)  # noqa: E731
        elif lib == "qkv":
            from qkv.kernels import cpu as kernels_cpu, float32  # ``cpu`` is this function's CPU times

            panels = float32.pack_panels(w)
            if panels is None:
                return out | {"error": f"compiled kernels not in use: {kernels_cpu.STATUS}"}
            y = float32.aligned_empty((m, n))  # as the encoder's workspace arrays are
            fn = lambda: float32.gemm(x, panels, None, y)  # noqa: E731
        else:
            fn = lambda: np.matmul(x, w, out=y)  # noqa: E731
        wall, cpu = _timed(fn, job["reps"])
        out[f"{m}x{k}x{n}"] = {"wall": wall, "cpu": cpu, "flops": 2 * m * k * n}
    for n in job["sizes"]:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        if lib == "torch":
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            fn = lambda: torch.mm(ta, tb)  # noqa: E731
        else:
            fn = lambda: a @ b  # noqa: E731
        wall, cpu = _timed(fn, job["reps"])
        out[str(n)] = {"wall": wall, "cpu": cpu, "flops": 2 * n ** 3}
    return out


# the four products of a BERT layer for all-MiniLM-L6-v2 on 8 × 256 tokens: Q|K|V, output, FFN in, FFN out
PRODUCT_SHAPES = [(2048, 384, 1152), (2048, 384, 384), (2048, 384, 1536), (2048, 1536, 384)]


def encoder_engine(job: dict):
    """Load one engine with a workload's batches, as every encoder measurement runs it: returns
    (meta, run) where run(indices) runs those batches (forward to the last hidden states) and
    meta has each batch's sentences, real and padded tokens and matmul FLOPs. The per-pass jobs
    and the duel's persistent workers both use it, so they time the same code."""
    engine, threads, wl = job["engine"], job["threads"], job["workload"]
    if engine == "fake-spin":  # the duel's tests: a pure-Python loop of job["work"] steps a batch
        n = int(job["work"])

        def run(indices):
            for _ in indices:
                x = 0
                for i in range(n):
                    x += i
        batches = [{"shape": [8, 16], "sentences": 8, "tokens": 128, "padded": 128, "flops": 0}] * 4
        return {"batches": batches}, run

    import numpy as np

    import qkv

    enc = qkv.load(threads=threads)
    batches = workload_batches(enc, wl)
    meta = {"batches": [{"shape": list(ids.shape), "sentences": int(ids.shape[0]), "tokens": int(mask.sum()),
                         "padded": int(ids.size), "flops": encoder_flops(enc.config, *ids.shape)}
                        for _, ids, mask in batches]}
    if engine in ("qkv", "qkv-bf16"):
        from qkv.model.threads import blas_threads
        from qkv.model.workspace import Workspace

        precision = "bfloat16" if engine == "qkv-bf16" else "float32"
        # one Workspace reused by every batch, as encode() reuses one for all the batches of a call
        # (fresh scratch arrays every batch cost page faults, and at two threads the freeing of
        # them stalls the other thread too: reviews in bfloat16, 2 threads, 158.7 -> 111.2 CPU ms
        # a batch with the workspace reused; 99.7 -> 95.9 at one thread)
        ws = Workspace()

        def run(indices):
            with blas_threads(threads):  # as encode() does: BLAS threads set once per call
                for i in indices:
                    _, ids, mask = batches[i]
                    enc.forward(ids, mask, precision=precision, workspace=ws)
        if engine == "qkv-bf16":
            from qkv.kernels import cpu

            meta["unit"] = cpu.ISA
    elif engine == "qkv-encode":
        per_batch = WORKLOADS[wl][0]

        def run(indices):
            enc.encode([t for i in indices for t in batches[i][0]], batch_size=per_batch)
    elif engine in ("transformers", "transformers-bf16"):
        import torch

        model = _load_torch_model(threads)
        if engine == "transformers-bf16":
            model = model.to(torch.bfloat16)
        tb = [(torch.from_numpy(ids), torch.from_numpy(mask.astype(np.int64))) for _, ids, mask in batches]

        def run(indices):
            with torch.inference_mode():
                for i in indices:
                    model(input_ids=tb[i][0], attention_mask=tb[i][1])
    elif engine in ("onnxruntime", "onnxruntime-int8"):
        sess = _ort_session(Path(job["onnx_int8" if engine == "onnxruntime-int8" else "onnx"]), threads)
        feeds = [{"input_ids": ids, "attention_mask": mask.astype(np.int64)} for _, ids, mask in batches]

        def run(indices):
            for i in indices:
                sess.run(None, feeds[i])
    else:
        raise ValueError(f"unknown engine {engine!r}")
    return meta, run


def worker_encoder(job: dict) -> dict:
    """Time whole passes over a workload's batches in one process (the per-job measurement, kept
    for comparison with the duel: ``--per-job``)."""
    meta, run = encoder_engine(job)
    nb = len(meta["batches"])
    wall, cpu = _timed(lambda: run(range(nb)), job["reps"], warmup=1)
    b = meta["batches"]
    return {**({"unit": meta["unit"]} if "unit" in meta else {}), "wall": wall, "cpu": cpu,
            "sentences": sum(x["sentences"] for x in b), "tokens": sum(x["tokens"] for x in b),
            "flops": sum(x["flops"] for x in b), "batch_shapes": [x["shape"] for x in b]}


def worker_bf16_steps(job: dict) -> dict:
    """Issue 16's breakdown: where a one-thread bfloat16 forward pass goes, step by step (bench/bf16.py's
    steps: CPU ms per step, the products' GFLOP/s, the phases inside the kernels), and the tile unit's
    measured peak to hold the products against, in this one process."""
    import bf16 as bench_bf16

    quick, t = job.get("quick", True), job.get("threads", 1)
    if t > 1:  # the bfloat16 pass on t threads, and the tile peak on all of them at once
        return {"peak_threads": bench_bf16.tile_peak_threads(t, quick), "threads": t,
                "steps": bench_bf16.steps(quick, threads=t)}
    return {"peak": bench_bf16.tile_peak(quick), "steps": bench_bf16.steps(quick)}


def time_each(one, seqs, warm: int = 5) -> dict:
    """Wall and process-CPU seconds of one(*seq) for each seq, after the first ``warm`` as warm-up
    (the lone-query tables: this section's and the multilingual one's)."""
    for seq in seqs[:warm]:
        one(*seq)
    wall, cpu = [], []
    for seq in seqs:
        t0, c0 = time.perf_counter(), time.process_time()
        one(*seq)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"wall": wall, "cpu": cpu}


QUERY_ENGINES = ("qkv-blas", "qkv-float32", "qkv-float16", "transformers", "onnxruntime")


def worker_query(job: dict) -> dict:
    """One query at a time: the forward pass over [CLS] query [SEP] (mean pooling after it is the
    same for every engine), per query, as search runs it."""
    import numpy as np

    import qkv

    engine, n = job["engine"], job["queries"]
    enc = qkv.load(threads=1)
    texts = make_titles(enc.tokenizer, n, target=9, seed=7)
    seqs = [(np.asarray([t.ids]), np.ones((1, len(t.ids)), dtype=bool)) for t in enc.tokenize(texts)]
    extra = {}
    if engine.startswith("qkv"):
        from qkv.model.threads import blas_threads

        if engine == "qkv-blas":  # no packed weights for the compiled products: all go to OpenBLAS
            from qkv.model.linear import Blas, PackedWeights

            enc._packed = PackedWeights(force=Blas)
        precision = "float16" if engine == "qkv-float16" else "float32"
        if engine == "qkv-float16":
            a, b = enc.encode(texts, batch_size=1), enc.encode(texts, batch_size=1, precision="float16")
            extra["max_cosine_distance"] = float((1 - (a * b).sum(axis=1)).max())

        def one(ids, mask):
            with blas_threads(1):
                enc.forward(ids, mask, precision=precision)
    elif engine == "transformers":
        import torch

        model = _load_torch_model(1)
        seqs = [(torch.from_numpy(i), torch.from_numpy(m.astype(np.int64))) for i, m in seqs]

        def one(ids, mask):
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=mask)
    elif engine == "onnxruntime":
        sess = _ort_session(Path(job["onnx"]), 1)
        seqs = [({"input_ids": i, "attention_mask": m.astype(np.int64)}, None) for i, m in seqs]

        def one(feed, _):
            sess.run(None, feed)
    else:
        raise ValueError(f"unknown engine {engine!r}")
    return {**time_each(one, seqs), "tokens": float(np.mean([len(t.ids) for t in enc.tokenize(texts)])), **extra}


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
    wall, cpu = _timed(fn, job["reps"], warmup=1)
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
    ok = _reset_peak_rss()
    rss0 = _rss_kib("VmRSS")
    out = fn()
    hwm = _rss_kib("VmHWM")
    _, tpeak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"tracemalloc_mib": tpeak / 2 ** 20 if impl != "torch-sdpa" else None,
            "rss_peak_delta_mib": (hwm - rss0) / 1024 if ok else None,
            "output_mib": out.nbytes / 2 ** 20}


WORKERS = {"export": worker_export, "parity": worker_parity, "gemm": worker_gemm, "encoder": worker_encoder,
           "bf16-steps": worker_bf16_steps,
           "attention": worker_attention, "attention-memory": worker_attention_memory, "query": worker_query,
           "ml": _multilingual.worker}


def worker_main(job_json: str) -> int:
    job = json.loads(job_json)
    res = WORKERS[job["kind"]](job)
    sys.stdout.write(MARK + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0


# ----------------------------------------------------------------------------------- orchestrator
def thread_env(threads: int, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "QKV_THREADS"):
        env[var] = str(threads)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["PYTHONWARNINGS"] = "ignore"
    env.update(extra or {})
    return env


def run_job(job: dict, threads: int = 1, timeout: float = 1800, extra_env: dict | None = None) -> dict:
    """Run one worker in a fresh interpreter; {"ok": bool, "result"| "error"}."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(job)]
    try:
        p = subprocess.run(cmd, env=thread_env(threads, extra_env), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(MARK):
            return {"ok": True, "result": json.loads(line[len(MARK):])}
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"ok": False, "error": f"exit {p.returncode}: " + " | ".join(tail)}


def _median(xs):
    import statistics

    return statistics.median(xs) if xs else float("nan")


def fmt_ratio(x: float) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.2f}×"


def _ratio_text(p: dict | None, interval: bool = True) -> str:
    """A paired ratio as '1.34× [1.25–1.41]' (median of per-round ratios, 25th–75th percentile)."""
    if not p:
        return "—"
    return fmt_ratio(p["median"]) + (f" [{p['p25']:.2f}–{p['p75']:.2f}]" if interval else "")


def report_duels(console, Table, duel_raw: dict, threads_list: list[int], peak: dict, verdicts: list) -> None:
    """Tables 3a-3c (every engine's rates) and 3d (issue 16: qkv bfloat16 ÷ each peer, paired), and
    the verdicts of the encoder targets, from the duels' slots."""
    def duel(wl, t):
        return duel_raw.get(f"duel|{wl}|{t}")

    first = next(iter(duel_raw.values()))
    console.print(f"   Encoder duels: each engine in its own persistent process (thread environment as for one job), "
                  f"loaded and warmed once; slots of ~{first['slot_s']:.1f} s (a few batches) one engine at a time, "
                  "a fresh random order every round. Rates: median over an engine's slots. Ratios: median over "
                  "rounds of the per-round ratio (slots seconds apart), [25th–75th percentile].")
    for wl, (bs, target, nb) in WORKLOADS.items():
        tb = Table(title=f"3{'abc'[list(WORKLOADS).index(wl)]}. Encoder throughput — {wl}: batches of {bs}, ~{target} "
                         "tokens; paired duel (qkv ÷ this = qkv float32's rate ÷ this engine's, per round)")
        for c in ("engine", "threads", "slots", "ms/batch wall", "ms/batch CPU", "sentences/s", "tokens/s",
                  "GFLOP/s wall", "GFLOP/s CPU", "% of peak CPU", "spread", "qkv ÷ this, wall", "qkv ÷ this, CPU"):
            tb.add_column(c, justify="left" if c == "engine" else "right", no_wrap=c == "engine")
        shapes = None
        for t in threads_list:
            d = duel(wl, t)
            if not d:
                continue
            p = peak.get(("numpy-cpu", t))
            for eng in d["engines"]:
                s = _duel.engine_stats(d, eng)
                if not s:
                    continue
                shapes = shapes or s["shapes"]
                ref = eng != "qkv" and "qkv" in d["engines"]
                tb.add_row(ENGINE_LABEL.get(eng, "qkv float32" if eng == "qkv" else eng), str(t), str(s["slots"]),
                           f"{s['ms_wall']:.0f}", f"{s['ms_cpu']:.0f}", f"{s['sps']:.1f}", f"{s['tps']:.0f}",
                           f"{s['gflops']:.1f}", f"{s['gflops_cpu']:.1f}",
                           f"{100 * s['gflops_cpu'] / p:.0f}%" if p else "—", f"±{50 * s['spread']:.0f}%",
                           _ratio_text(_duel.paired(d, "qkv", eng)) if ref else "",
                           _ratio_text(_duel.paired(d, "qkv", eng, "cpu")) if ref else "")
            tb.add_section()
        console.print(tb)
        if shapes:
            console.print(f"   batch shapes [B, L]: {shapes}; ms per batch = the average batch at the median rate; "
                          "GFLOP/s counts matmul FLOPs of the padded batch (QKV, QKᵀ, PV, output, FFN); % of peak = "
                          "GFLOP/s per CPU-second against numpy's GEMM peak per CPU-second at the same threads; "
                          "spread = half the 25th–75th percentile range of the engine's slot rates over their median "
                          "(what the host's drift does to one engine alone); 'qkv encode()' is tokenize + forward + "
                          "pool + normalise, for information.")
    for wl in WORKLOADS:  # float32 targets of the engine issue, one thread
        t = 1 if 1 in threads_list else threads_list[0]
        d = duel(wl, t)
        for other, need in (("transformers", 1.0), ("onnxruntime", 0.85)):
            pw, pc = (_duel.paired(d, "qkv", other, k) for k in ("wall", "cpu")) if d else (None, None)
            if pw and pc:
                target = wl in TARGET_WORKLOADS
                verdicts.append((f"qkv {'≥ ' + format(need, '.2f') + '×' if target else 'vs'} {other}, {wl}, "
                                 f"{t} thread (paired)", (pw["median"] >= need) if target else None,
                                 f"{_ratio_text(pw)} wall, {_ratio_text(pc, False)} CPU",
                                 (pc["median"] >= need) if target else None))
        a, b = duel(wl, 1), duel(wl, 2)
        sa, sb = (a and _duel.engine_stats(a, "qkv")), (b and _duel.engine_stats(b, "qkv"))
        if sa and sb:
            verdicts.append((f"qkv 2 threads / 1 thread throughput, {wl} (separate duels)", None,
                             fmt_ratio(sb["sps"] / sa["sps"]) + " wall", None))

    cols = [(wl, t) for t in threads_list for wl in TARGET_WORKLOADS if duel(wl, t)]
    if not any("qkv-bf16" in duel(*c)["engines"] for c in cols):
        return
    tb = Table(title=f"3d. Issue 16: sentences/s at any precision (median over slots, wall) and qkv bfloat16 ÷ each "
                     f"peer, paired per round [25th–75th percentile]; target ≥ {BF16_TARGET}× the best peer")
    tb.add_column("engine", no_wrap=True)
    for wl, t in cols:
        tb.add_column(f"{wl}, {t} thread{'s' if t > 1 else ''}", justify="right")
    stats = {c: {e: _duel.engine_stats(duel(*c), e) for e in duel(*c)["engines"]} for c in cols}
    for eng in ("qkv", "qkv-bf16") + PEERS:
        cells = [stats[c].get(eng) for c in cols]
        if any(cells):
            tb.add_row(ENGINE_LABEL.get(eng, "qkv float32" if eng == "qkv" else eng),
                       *("—" if x is None else f"{x['sps']:.1f}" for x in cells))
    tb.add_section()
    for peer in PEERS:
        tb.add_row(f"qkv bfloat16 ÷ {ENGINE_LABEL[peer]}", *(_ratio_text(_duel.paired(duel(*c), "qkv-bf16", peer))
                                                              for c in cols))
    tb.add_section()
    best_cells, cpu_cells, unpaired, spreads, ratio_spread, dinfo = [], [], [], [], [], []
    for wl, t in cols:
        d = duel(wl, t)
        best, best_cpu = _duel.best_peer(d, PEERS), _duel.best_peer(d, PEERS, "cpu")
        pw, pc = _duel.paired(d, "qkv-bf16", best), _duel.paired(d, "qkv-bf16", best_cpu, "cpu")
        sq, sbest = stats[(wl, t)].get("qkv-bf16"), stats[(wl, t)].get(best)
        best_cells.append(f"{_ratio_text(pw)} ({ENGINE_LABEL.get(best, best)})" if pw else "—")
        cpu_cells.append(f"{_ratio_text(pc)} ({ENGINE_LABEL.get(best_cpu, best_cpu)})" if pc else "—")
        unpaired.append(fmt_ratio(sq["sps"] / sbest["sps"]) if sq and sbest else "—")
        spreads.append(f"±{50 * sq['spread']:.0f}% / ±{50 * sbest['spread']:.0f}%" if sq and sbest else "—")
        ratio_spread.append(f"±{50 * (pw['p75'] - pw['p25']) / pw['median']:.0f}% ({pw['n']} rounds)" if pw else "—")
        dinfo.append(f"{wl} {t}t: {d['rounds']} rounds in {d['seconds']:.0f} s (start-up {d.get('start_s', 0):.0f} s), load {d['load'][0]:.1f} → "
                     f"{d['load'][1]:.1f}, steal {d['steal_s']:.1f} s, idle workers' CPU "
                     f"{100 * d['idle_cpu_share']:.1f}% of the slots' wall")
        if pw:
            verdicts.append((f"qkv bfloat16 ≥ {BF16_TARGET}× best peer, {wl}, {t} thread{'s' if t > 1 else ''} (paired)",
                             pw["median"] >= BF16_TARGET,
                             f"{_ratio_text(pw)} wall vs {best}, {_ratio_text(pc, False)} CPU vs {best_cpu}",
                             pc["median"] >= BF16_TARGET if pc else None))
    tb.add_row("[bold]qkv bfloat16 ÷ best peer (paired, wall)[/bold]", *best_cells)
    tb.add_row("qkv bfloat16 ÷ best peer by CPU time (paired)", *cpu_cells)
    tb.add_row("[dim]unpaired: ratio of the median rates[/dim]", *(f"[dim]{x}[/dim]" for x in unpaired))
    tb.add_row("[dim]spread of one engine's slot rates: qkv bf16 / best peer[/dim]", *(f"[dim]{x}[/dim]" for x in spreads))
    tb.add_row("[dim]spread of the paired ratio[/dim]", *(f"[dim]{x}[/dim]" for x in ratio_spread))
    console.print(tb)
    units = {duel(*c)["meta"].get("qkv-bf16", {}).get("unit") for c in cols}
    console.print(f"   qkv bfloat16 ran on: {', '.join(sorted(u for u in units if u)) or '?'} "
                  "(qkv.kernels.cpu.ISA; QKV_ISA forces one). transformers bfloat16: BertModel.to(torch.bfloat16); "
                  "onnxruntime int8: onnxruntime.quantization.quantize_dynamic (QInt8 weights) of the float32 export. "
                  "Best peer: the highest median rate in that duel. Spread = half the 25th–75th percentile range "
                  "over the median: pairing removes what the host's drift does to both engines of a round.")
    for line in dinfo:
        console.print(f"   {line}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", default="parity,gemm,encoder,attention,query,multilingual",
                    help="comma-separated: parity, gemm, encoder, attention, query, multilingual")
    ap.add_argument("--threads", default="1,2", help="thread counts to measure (default 1,2)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="interleaved rounds per configuration (default 1; 2+ evens out drifting load)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, attention up to L=2048")
    ap.add_argument("--from-json", help="re-print the tables of an earlier run's results JSON")
    ap.add_argument("--per-job", action="store_true",
                    help="also time each encoder configuration in its own job, passes back to back (the "
                         "older, noisier measurement; for comparison with the duel)")
    ap.add_argument("--duel-seconds", type=float,
                    help="seconds of rounds per target workload in the encoder duel (default 25 with --quick, "
                         "else 90; times --rounds)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--duel-worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args.worker)
    if args.duel_worker:
        return _duel.serve(encoder_engine, json.loads(args.duel_worker))

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    console = Console(width=max(Console().width, 150))
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    threads_list = [int(t) for t in args.threads.split(",")]
    rounds = 1 if args.quick else max(1, args.rounds)
    reps_enc = 2 if args.quick else 3
    lengths = [L for L in ATTN_LENGTHS if not args.quick or L <= 2048]
    missing = [m for m in ("torch", "transformers", "onnxruntime", "onnx", "onnxscript")
               if __import__("importlib.util").util.find_spec(m) is None]
    if missing:
        console.print(f"[red]bench/engine.py needs {', '.join(missing)}: pip install -e '.[test,bench]'[/red]")
        return 1

    results: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "threads": threads_list,
                     "rounds": rounds, "quick": args.quick, "failures": []}
    console.print(f"[bold]qkv engine benchmark[/bold] — threads {threads_list}, {rounds} interleaved round(s); "
                  f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (shared machine: "
                  "medians of repeated passes; wall and process CPU time both shown)")

    # ---- plan every job up front so one progress bar covers the run
    jobs: list[tuple[str, dict, int, dict | None]] = []  # (key, job, threads, extra env)
    need_onnx = bool(sections & {"parity", "encoder", "query"})
    if "gemm" in sections:
        for r in range(rounds):
            for t in threads_list:
                for lib in ("numpy", "torch") + (("qkv",) if t == 1 else ()):
                    jobs.append((f"gemm|{lib}|{t}", {"kind": "gemm", "lib": lib, "threads": t,
                                                      "sizes": [] if lib == "qkv" else [1024, 1536, 2048],
                                                      "shapes": PRODUCT_SHAPES, "reps": 3 if args.quick else 5}, t, None))
    if "encoder" in sections and args.per_job:
        for r in range(rounds):
            for t in threads_list:
                for wl in WORKLOADS:
                    for eng in ("qkv", "transformers", "onnxruntime", "qkv-encode") + PRECISION_ENGINES:
                        if eng in PRECISION_ENGINES and wl not in TARGET_WORKLOADS:
                            continue
                        jobs.append((f"enc|{wl}|{eng}|{t}", {"kind": "encoder", "engine": eng, "workload": wl,
                                                             "threads": t, "reps": reps_enc}, t, None))
    if "encoder" in sections:  # issue 16's per-step breakdown of qkv bfloat16, one thread, its own process
        jobs.append(("bf16-steps", {"kind": "bf16-steps", "quick": args.quick}, 1, None))
        for t in threads_list:  # the same at more threads: what a second thread adds, and where it waits
            if t > 1:
                jobs.append((f"bf16-steps-{t}", {"kind": "bf16-steps", "quick": args.quick, "threads": t}, t, None))
    if "attention" in sections:
        for L in lengths:
            for impl in ("qkv-plain", "qkv-chunked", "torch-sdpa"):
                jobs.append((f"mem|{impl}|{L}", {"kind": "attention-memory", "impl": impl, "length": L, "threads": 1},
                             1, {"MALLOC_MMAP_THRESHOLD_": "65536"}))
        for r in range(rounds):
            for t in threads_list:
                for L in lengths:
                    for impl in ("qkv-plain", "qkv-chunked", "torch-sdpa"):
                        reps = max(2, min(20, int(2e9 / (attn_batch(L) * L * L * HEADS * HEAD_DIM * 4))))
                        jobs.append((f"attn|{impl}|{L}|{t}", {"kind": "attention", "impl": impl, "length": L,
                                                              "threads": t, "reps": 2 if args.quick else reps}, t, None))

    if "query" in sections:  # one thread: a lone query is what the search latency targets are about
        for r in range(rounds):
            for eng in QUERY_ENGINES:
                jobs.append((f"query|{eng}", {"kind": "query", "engine": eng, "queries": 60 if args.quick else 200},
                             1, None))

    if "multilingual" in sections:  # one thread, its own jobs (bench/_multilingual.py)
        jobs += _multilingual.plan(rounds, args.quick)

    # the encoder's paired duels (bench/_duel.py): every engine of a workload in its own persistent
    # process, short slots in random order, run after the jobs above
    scale = (args.duel_seconds / (QUICK_DUEL_S if args.quick else FULL_DUEL_S) if args.duel_seconds else 1.0) * rounds
    duels = duel_plan(threads_list, args.quick, scale) if "encoder" in sections else []

    raw: dict[str, list] = {}
    if args.from_json:  # re-print the tables of an earlier run
        results = json.loads(Path(args.from_json).read_text())
        raw = results["raw"]
        sections, threads_list, lengths = set(results["sections"]), results["threads"], results["lengths"]
        jobs, need_onnx, duels = [], False, []
    results.update(sections=sorted(sections), lengths=lengths)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True) as prog:
        task = prog.add_task("setup", total=len(jobs) + len(duels) + need_onnx
                             + ("parity" in sections and not args.from_json))
        onnx_file = onnx_int8 = None
        if need_onnx:
            prog.update(task, description="exporting BertModel to ONNX (cached under /tmp/qkv-cache)")
            r = run_job({"kind": "export"})
            prog.advance(task)
            if r["ok"]:
                onnx_file = r["result"]["path"]
                onnx_int8 = r["result"].get("int8")
                results["onnx"] = r["result"]
            else:
                results["failures"].append(("onnx export", r["error"]))
        if "parity" in sections and not args.from_json:
            prog.update(task, description="parity: qkv vs transformers vs onnxruntime")
            r = run_job({"kind": "parity", "onnx": onnx_file}) if onnx_file else {"ok": False, "error": "no ONNX file"}
            prog.advance(task)
            if r["ok"]:
                results["parity"] = r["result"]
            else:
                results["failures"].append(("parity", r["error"]))
        for key, job, t, extra in jobs:
            prog.update(task, description=key.replace("|", " "))
            # the MiniLM ONNX files; the multilingual section exports its own model (bench/_multilingual.py)
            if job.get("kind") != "ml" and str(job.get("engine")).startswith("onnxruntime"):
                if not onnx_file or (job["engine"] == "onnxruntime-int8" and not onnx_int8):
                    prog.advance(task)
                    continue
                job = {**job, "onnx": onnx_file, "onnx_int8": onnx_int8}
            t0 = time.perf_counter()
            r = run_job(job, t, extra_env=extra)
            results.setdefault("job_seconds", {})[key] = time.perf_counter() - t0
            prog.advance(task)
            if r["ok"]:
                raw.setdefault(key, []).append(r["result"])
            else:
                results["failures"].append((key, r["error"]))
        for d in duels:
            files = {"onnx": onnx_file, "onnx_int8": onnx_int8}
            engines = [e for e in d["engines"] if not e.startswith("onnxruntime")
                       or (onnx_file if e == "onnxruntime" else onnx_int8)]
            name = f"duel {d['workload']}, {d['threads']} thread{'s' if d['threads'] > 1 else ''}"
            prog.update(task, description=f"{name}: starting {len(engines)} engines")
            rec = _duel.run(duel_commands(engines, d["workload"], d["threads"], files), slot_s=d["slot_s"],
                            budget_s=d["budget_s"], min_rounds=d["min_rounds"], max_rounds=d["max_rounds"],
                            on_slot=lambda r, sec, name=name, d=d: prog.update(
                                task, description=f"{name}: round {r + 1}, {sec:.0f}/{d['budget_s']:.0f} s"))
            prog.advance(task)
            raw[f"duel|{d['workload']}|{d['threads']}"] = [{**rec, "workload": d["workload"], "threads": d["threads"]}]
            for eng, err in rec["failures"].items():
                results["failures"].append((f"duel|{d['workload']}|{eng}|{d['threads']}", err))
    results["raw"] = raw

    verdicts: list[tuple[str, bool | None, str, bool | None]] = []

    # ---- parity
    if "parity" in results:
        tb = Table(title="1. Parity before timing: max |diff| of last hidden states (real tokens)")
        tb.add_column("workload")
        tb.add_column("batch [B, L]")
        for c in ("qkv vs transformers", "onnxruntime vs transformers", "qkv vs onnxruntime"):
            tb.add_column(c, justify="right")
        for wl, d in results["parity"].items():
            tb.add_row(wl, str(d["shape"]), *(f"{d[c]:.1e}" for c in
                                              ("qkv vs transformers", "onnxruntime vs transformers", "qkv vs onnxruntime")))
        console.print(tb)
        worst = max(d["qkv vs transformers"] for d in results["parity"].values())
        verdicts.append(("qkv hidden states match transformers (max |diff| < 1e-4)", worst < 1e-4, f"{worst:.1e}", None))

    # ---- gemm peak
    peak: dict[tuple[str, int], float] = {}
    if "gemm" in sections:
        tb = Table(title="2. Machine float32 matmul peak, GFLOP/s (median of repetitions; wall / CPU time)")
        tb.add_column("library")
        tb.add_column("threads", justify="right")
        sizes = [1024, 1536, 2048]
        for n in sizes:
            tb.add_column(f"{n}³", justify="right")
        tb.add_column("peak wall", justify="right")
        tb.add_column("peak CPU", justify="right")
        for t in threads_list:
            for lib in ("numpy", "torch"):
                runs = raw.get(f"gemm|{lib}|{t}", [])
                if not runs:
                    continue
                cells, best, best_cpu = [], 0.0, 0.0
                for n in sizes:
                    wall = [x for r in runs for x in r[str(n)]["wall"]]
                    cpu = [x for r in runs for x in r[str(n)]["cpu"]]
                    f = runs[0][str(n)]["flops"]
                    gw, gc = f / _median(wall) / 1e9, f / _median(cpu) / 1e9
                    best, best_cpu = max(best, gw), max(best_cpu, gc)
                    cells.append(f"{gw:.0f} / {gc:.0f}")
                peak[(lib, t)] = best
                peak[(lib + "-cpu", t)] = best_cpu
                tb.add_row(lib, str(t), *cells, f"[bold]{best:.0f}[/bold]", f"{best_cpu:.0f}")
        console.print(tb)
        tb = Table(title="2b. The encoder's products on a reviews batch (2048 rows × K by K × N), GFLOP/s by CPU "
                         "time; ratio = qkv's time ÷ that library's (< 1: qkv faster)")
        tb.add_column("library")
        tb.add_column("threads", justify="right")
        names = [f"{m}x{k}x{n}" for m, k, n in PRODUCT_SHAPES]
        for name in names:
            tb.add_column(name.replace("x", " × "), justify="right")
        tb.add_column("all four", justify="right")
        shape_cpu: dict[tuple[str, int], dict[str, float]] = {}
        for t in threads_list:
            for lib in ("qkv", "numpy", "torch"):
                runs = [r for r in raw.get(f"gemm|{lib}|{t}", []) if "error" not in r]
                if runs and all(name in runs[0] for name in names):
                    shape_cpu[(lib, t)] = {name: _median([x for r in runs for x in r[name]["cpu"]]) for name in names}
        ours = shape_cpu.get(("qkv", 1))
        for (lib, t), times in shape_cpu.items():
            cells = []
            for name in names + ["all"]:
                sec = sum(times.values()) if name == "all" else times[name]
                flops = sum(2 * m * k * n for m, k, n in PRODUCT_SHAPES) if name == "all" else \
                    2 * math.prod(int(v) for v in name.split("x"))
                cell = f"{flops / sec / 1e9:.0f}"
                if ours and lib != "qkv" and t == 1:
                    mine = sum(ours.values()) if name == "all" else ours[name]
                    cell += f" ({mine / sec:.2f})"
                cells.append(cell)
            tb.add_row(lib, str(t), *cells)
        errors = [r["error"] for r in raw.get("gemm|qkv|1", []) if "error" in r]
        console.print(tb)
        if errors:
            console.print(f"   qkv's product not measured: {errors[0]}")
        results["gemm_shapes_cpu_s"] = {f"{lib}|{t}": v for (lib, t), v in shape_cpu.items()}
    results["gemm_peak"] = {f"{k[0]}|{k[1]}": v for k, v in peak.items()}

    # ---- encoder throughput: the paired duels (bench/_duel.py)
    duel_raw = {k: v[0] for k, v in raw.items() if k.startswith("duel|") and v}
    if "encoder" in sections and duel_raw:
        report_duels(console, Table, duel_raw, threads_list, peak, verdicts)

    # ---- encoder throughput
    enc_summary: dict = {}
    per_job = any(k.startswith("enc|") for k in raw)
    if "encoder" in sections and per_job:
        for wl, (bs, target, nb) in WORKLOADS.items():
            tb = Table(title=f"3{'abc'[list(WORKLOADS).index(wl)]}′. Per-job (--per-job, for comparison with the duel): "
                             f"{wl}: {nb} batches of {bs}, ~{target} tokens (median over passes of one job per engine; "
                             "ratio = qkv / reference at the same threads)")
            for c in ("engine", "threads", "ms/batch wall", "ms/batch CPU", "sentences/s", "tokens/s",
                      "GFLOP/s wall", "GFLOP/s CPU", "% of peak CPU", "qkv/this wall", "qkv/this CPU"):
                tb.add_column(c, justify="left" if c == "engine" else "right", no_wrap=c == "engine")
            for t in threads_list:
                stats = {}
                for eng in ("qkv", "transformers", "onnxruntime", "qkv-encode") + PRECISION_ENGINES:
                    runs = raw.get(f"enc|{wl}|{eng}|{t}", [])
                    if not runs:
                        continue
                    wall = _median([x for r in runs for x in r["wall"]])
                    cpu = _median([x for r in runs for x in r["cpu"]])
                    r0 = runs[0]
                    stats[eng] = dict(wall=wall, cpu=cpu, sps=r0["sentences"] / wall, tps=r0["tokens"] / wall,
                                      gflops=r0["flops"] / wall / 1e9, gflops_cpu=r0["flops"] / cpu / 1e9,
                                      nb=len(r0["batch_shapes"]),
                                      shapes=r0["batch_shapes"])
                p = peak.get(("numpy-cpu", t))
                q = stats.get("qkv")
                for eng, s in stats.items():
                    ref = eng not in ("qkv", "qkv-encode") and q is not None
                    tb.add_row(ENGINE_LABEL.get(eng, eng), str(t),
                               f"{s['wall'] / s['nb'] * 1e3:.0f}", f"{s['cpu'] / s['nb'] * 1e3:.0f}",
                               f"{s['sps']:.1f}", f"{s['tps']:.0f}", f"{s['gflops']:.1f}", f"{s['gflops_cpu']:.1f}",
                               f"{100 * s['gflops_cpu'] / p:.0f}%" if p else "—",
                               fmt_ratio(q["sps"] / s["sps"]) if ref else "",
                               fmt_ratio(s["cpu"] / q["cpu"]) if ref else "")
                enc_summary[(wl, t)] = stats
            console.print(tb)
            shapes = next(iter(enc_summary.get((wl, threads_list[0]), {}).values()), {}).get("shapes")
            if shapes:
                console.print(f"   batch shapes [B, L]: {shapes}; GFLOP/s counts matmul FLOPs of the padded batch "
                              "(QKV, QKᵀ, PV, output, FFN); % of peak = GFLOP/s per CPU-second against numpy's GEMM "
                              "peak per CPU-second at the same threads. qkv/this CPU = this engine's CPU time / qkv's "
                              "(> 1: qkv does the work in less CPU time); 'qkv encode()' is tokenize + forward + pool "
                              "+ normalise, for information.")
        for wl in WORKLOADS if not duel_raw else ():  # the duel's paired ratios decide when it ran
            for t in threads_list[:1] if 1 not in threads_list else [1]:
                s = enc_summary.get((wl, t), {})
                for other, need in (("transformers", 1.0), ("onnxruntime", 0.85)):
                    if "qkv" not in s or other not in s:
                        continue
                    if "qkv" in s and other in s:
                        r = s["qkv"]["sps"] / s[other]["sps"]
                        rc = s[other]["cpu"] / s["qkv"]["cpu"]
                        target = wl in TARGET_WORKLOADS
                        verdicts.append((f"qkv {'≥ ' + format(need, '.2f') + '×' if target else 'vs'} {other}, {wl}, "
                                         f"{t} thread", (r >= need) if target else None,
                                         f"{fmt_ratio(r)} wall, {fmt_ratio(rc)} CPU", (rc >= need) if target else None))
            if 1 in threads_list and 2 in threads_list and (wl, 1) in enc_summary and (wl, 2) in enc_summary:
                a, b = enc_summary[(wl, 1)].get("qkv"), enc_summary[(wl, 2)].get("qkv")
                if a and b:
                    verdicts.append((f"qkv 2 threads / 1 thread throughput, {wl}", None,
                                     fmt_ratio(b["sps"] / a["sps"]) + " wall", None))

    # ---- issue 16: qkv bfloat16 against every peer at any precision
    if "encoder" in sections and any(e in s for s in enc_summary.values() for e in PRECISION_ENGINES):
        tb = Table(title="3d′. Per-job: sentences/s at any precision (issue 16; median over passes, wall); "
                         f"target: qkv bfloat16 ≥ {BF16_TARGET}× the best peer")
        tb.add_column("engine", no_wrap=True)
        cols = [(wl, t) for t in threads_list for wl in TARGET_WORKLOADS if (wl, t) in enc_summary]
        for wl, t in cols:
            tb.add_column(f"{wl}, {t} thread{'s' if t > 1 else ''}", justify="right")
        for eng in ("qkv", "qkv-bf16") + PEERS:
            cells = [enc_summary[c].get(eng) for c in cols]
            if any(cells):
                tb.add_row(ENGINE_LABEL.get(eng, "qkv float32" if eng == "qkv" else eng),
                           *("—" if x is None else f"{x['sps']:.1f}" for x in cells))
        ratio_cells = []
        for wl, t in cols:
            st = enc_summary[(wl, t)]
            peers = {e: st[e] for e in PEERS if e in st}
            if "qkv-bf16" in st and peers:
                best = max(peers, key=lambda e: peers[e]["sps"])
                r = st["qkv-bf16"]["sps"] / peers[best]["sps"]
                rc = min(peers[e]["cpu"] for e in peers) / st["qkv-bf16"]["cpu"]
                ratio_cells.append(f"{fmt_ratio(r)} ({ENGINE_LABEL.get(best, best)})")
                if not duel_raw:
                        verdicts.append((f"qkv bfloat16 ≥ {BF16_TARGET}× best peer, {wl}, {t} thread", r >= BF16_TARGET,
                                     f"{fmt_ratio(r)} wall vs {best}, {fmt_ratio(rc)} CPU", rc >= BF16_TARGET))
            else:
                ratio_cells.append("—")
        tb.add_row("[bold]qkv bfloat16 ÷ best peer[/bold]", *ratio_cells)
        console.print(tb)
        units = {r.get("unit") for k, v in raw.items() if "|qkv-bf16|" in k for r in v}
        console.print(f"   qkv bfloat16 ran on: {', '.join(sorted(u for u in units if u)) or '?'} "
                      "(qkv.kernels.cpu.ISA; QKV_ISA forces one). transformers bfloat16: BertModel.to(torch.bfloat16); "
                      "onnxruntime int8: onnxruntime.quantization.quantize_dynamic (QInt8 weights) of the float32 export.")
    if "encoder" in sections and raw.get("bf16-steps"):
        import bf16 as bench_bf16

        br = raw["bf16-steps"][0]
        steps = dict(br["steps"])
        console.print("3e. Where qkv's time goes (issue 16), CPU ms per batch, one thread, one process; products' "
                      "GFLOP/s against the tile unit's peak measured in the same process"
                      + ("; the bfloat16 pass at more threads in a process of its own" if len(threads_list) > 1 else ""))
        for t in threads_list:
            more = (raw.get(f"bf16-steps-{t}") or [None])[0] if t > 1 else None
            if more:
                steps.update(more["steps"])
                pt = more.get("peak_threads")
                if pt and pt.get("one_thread"):
                    console.print(f"   tile peak on {t} threads at once: {pt['per_thread_cpu']:.0f} GFLOP/s per thread "
                                  f"(its CPU time), {pt['total_wall']:.0f} together (wall) = "
                                  f"{pt['total_wall'] / pt['one_thread']:.2f}× one thread's {pt['one_thread']:.0f} "
                                  "(interleaved, same process)")
        bench_bf16.print_steps(console, steps, br.get("peak"))
        beside = []
        for t in threads_list:
            for wl in TARGET_WORKLOADS:
                d = duel_raw.get(f"duel|{wl}|{t}")
                st = d and _duel.engine_stats(d, "qkv-bf16")
                if st:
                    beside.append(f"{wl}, {t} thread{'s' if t > 1 else ''}: {st['ms_cpu']:.1f} CPU ms "
                                  f"({st['ms_wall']:.1f} wall)")
        if beside:
            console.print("   the duel's qkv bfloat16 per batch in the same run (3d; median over slots): "
                          + "; ".join(beside))

    # ---- attention
    if "attention" in sections:
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
                            wall=_median([x for r in runs for x in r["wall"]]),
                            cpu=_median([x for r in runs for x in r["cpu"]]),
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

    # ---- lone queries
    if "query" in sections and any(k.startswith("query|") for k in raw):
        tb = Table(title="5. One search query at a time (~9 tokens), forward pass, 1 thread: ms per query "
                         "(median over queries and rounds)")
        for c in ("engine", "p50 wall", "p90 wall", "p50 CPU", "÷ qkv-float16 p50 wall", "tokens"):
            tb.add_column(c, justify="left" if c == "engine" else "right")
        stats = {}
        for eng in QUERY_ENGINES:
            runs = raw.get(f"query|{eng}", [])
            if runs:
                w = sorted(x for r in runs for x in r["wall"])
                stats[eng] = (_median(w), w[int(0.9 * (len(w) - 1))], _median([x for r in runs for x in r["cpu"]]),
                              runs[0]["tokens"])
        base = stats.get("qkv-float16")
        for eng, (p50, p90, c50, tok) in stats.items():
            tb.add_row(eng, f"{p50 * 1e3:.2f}", f"{p90 * 1e3:.2f}", f"{c50 * 1e3:.2f}",
                       "" if not base else fmt_ratio(p50 / base[0]), f"{tok:.1f}")
        console.print(tb)
        dist = [r["max_cosine_distance"] for r in raw.get("query|qkv-float16", []) if "max_cosine_distance" in r]
        console.print("   qkv-blas: every product through OpenBLAS (x·W); qkv-float32: the compiled blocked product, "
                      "float32 weights (encode's default); qkv-float16: float16 panels (search queries). "
                      + (f"Sentence vectors, float16 vs float32: max cosine distance {max(dist):.1e}." if dist else ""))
        if "transformers" in stats and "qkv-float32" in stats:
            r = stats["transformers"][0] / stats["qkv-float32"][0]
            verdicts.append(("lone query: qkv (float32, encode default) vs transformers, 1 thread", None,
                             f"{fmt_ratio(r)} wall", None))

    if "multilingual" in sections and any(k.startswith("ml|") for k in raw):
        _multilingual.report(console, raw, verdicts)

    # ---- verdicts
    if verdicts:
        tb = Table(title="Targets (engine issue)")
        tb.add_column("target")
        tb.add_column("measured", justify="right")
        tb.add_column("verdict (wall)")
        tb.add_column("by CPU time")

        def word(ok):
            return "[green]met[/green]" if ok else ("[red]NOT met[/red]" if ok is False else "—")
        for name, ok, val, ok_cpu in verdicts:
            tb.add_row(name, val, word(ok) if ok is not None or ok_cpu is not None else "info", word(ok_cpu))
        console.print(tb)
    for key, err in results["failures"]:
        console.print(f"[red]failed: {key}: {err}[/red]")
    if args.from_json:
        return 0
    CACHE.mkdir(parents=True, exist_ok=True)
    out = CACHE / f"results-{time.strftime('%Y%m%d-%H%M%S')}.json"
    results["verdicts"] = verdicts
    out.write_text(json.dumps(results, indent=1, default=str))
    console.print(f"raw results: {out}   (load average at the end: {os.getloadavg()[0]:.1f})")
    return 1 if results["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
