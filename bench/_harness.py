"""The bench harness: what every engine section (and bench/bf16.py, bench/_multilingual.py) shares.

* workloads: ``WORKLOADS`` and the generated texts (``make_titles``, ``make_reviews``, ``make_mixed``,
  ``workload_batches``), the encoder's matmul FLOPs (``encoder_flops``);
* measuring: ``timed`` passes, ``time_each`` for lone queries, resident-memory probes;
* the peers' models: transformers' BertModel and its ONNX export (``onnx_path``, ``ort_session``);
* jobs in their own processes: ``thread_env``, ``run_job`` (bench/engine.py ``--worker``), ``worker_main``;
* result tables: ``median``, ``fmt_ratio``, ``ratio_text``, ``print_verdicts``.

The paired duel lives beside it (bench/_duel.py). Nothing here imports a section: sections import
this, bench/engine.py imports the sections; no circle (tests/test_layers.py checks bench/ too).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENTRY = HERE / "engine.py"  # the script whose --worker / --duel-worker runs a job (every section's workers)
CACHE = Path(os.environ.get("QKV_BENCH_CACHE", "/tmp/qkv-cache")) / "engine"
MARK = "QKV-BENCH-RESULT "
WORKLOADS = {
    # name: (sentences per batch, target tokens per sentence incl. [CLS]/[SEP], batches per pass)
    "titles": (32, 24, 8),
    "reviews": (8, 256, 3),
    "mixed": (8, 256, 3),  # reviews of 40-256 tokens, padded: not an issue target, shows padding's cost
}
TARGET_WORKLOADS = ("titles", "reviews")


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
def rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak_rss() -> bool:
    """Reset the kernel's high-water mark of this process's RSS (Linux ≥ 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def timed(fn, reps: int, warmup: int = 1):
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def model_path():
    from qkv.model.hub import resolve

    return resolve(None)[1]


def load_torch_model(threads: int, attn: str | None = None):
    import torch
    from transformers import BertModel

    torch.set_num_threads(threads)
    kw = {} if attn is None else {"attn_implementation": attn}
    return BertModel.from_pretrained(str(model_path()), **kw).eval()


def torch_runner(model, batches):
    """run(indices): the torch model over those of ``batches`` ((texts, ids, mask) each), no grad."""
    import numpy as np
    import torch

    tb = [(torch.from_numpy(ids), torch.from_numpy(mask.astype(np.int64))) for _, ids, mask in batches]

    def run(indices):
        with torch.inference_mode():
            for i in indices:
                model(input_ids=tb[i][0], attention_mask=tb[i][1])
    return run


def onnx_path(fingerprint: str) -> Path:
    import torch

    return CACHE / f"minilm-{fingerprint}-torch{torch.__version__.split('+')[0]}.onnx"


def ort_session(path: Path, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])




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


def worker_main(workers: dict, job_json: str) -> int:
    """Run one job in this process (``workers[job["kind"]]``) and print its result on the MARK line."""
    job = json.loads(job_json)
    res = workers[job["kind"]](job)
    sys.stdout.write(MARK + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0


def thread_env(threads: int, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "QKV_THREADS"):
        env[var] = str(threads)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["PYTHONWARNINGS"] = "ignore"
    # QKV_ISA makes a machine with more units stand in for one with fewer (an AMX Xeon for AMD Zen 4);
    # torch's oneDNN must stand in too, or its bfloat16 runs on the tiles qkv was told to ignore
    # (measured on this Xeon under QKV_ISA=avx512bf16: transformers e5 bfloat16 titles 223.7 per
    # CPU-second with the tiles, 71.4 capped at AVX512_CORE_BF16).
    cap = ONEDNN_CAP.get(env.get("QKV_ISA", "").strip().lower())
    if cap:
        env.setdefault("ONEDNN_MAX_CPU_ISA", cap)
    env.update(extra or {})
    return env


# oneDNN's names for the same ceilings. QKV_ISA=float32 runs qkv's float32 kernels as built (AVX-512
# in a native build on these machines), so torch keeps AVX-512 too, without its BF16 and AMX.
ONEDNN_CAP = {"avx512bf16": "AVX512_CORE_BF16", "float32": "AVX512_CORE_VNNI"}


def run_job(job: dict, threads: int = 1, timeout: float = 1800, extra_env: dict | None = None,
            entry: Path = ENTRY) -> dict:
    """Run one worker in a fresh interpreter (``entry``'s --worker); {"ok": bool, "result"| "error"}."""
    cmd = [sys.executable, str(entry), "--worker", json.dumps(job)]
    try:
        p = subprocess.run(cmd, env=thread_env(threads, extra_env), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(MARK):
            return {"ok": True, "result": json.loads(line[len(MARK):])}
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"ok": False, "error": f"exit {p.returncode}: " + " | ".join(tail)}


def median(xs):
    import statistics

    return statistics.median(xs) if xs else float("nan")


def fmt_ratio(x: float) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.2f}×"


def ratio_text(p: dict | None, interval: bool = True) -> str:
    """A paired ratio as '1.34× [1.25–1.41]' (median of per-round ratios, 25th–75th percentile)."""
    if not p:
        return "—"
    return fmt_ratio(p["median"]) + (f" [{p['p25']:.2f}–{p['p75']:.2f}]" if interval else "")


def print_verdicts(console, Table, verdicts: list) -> None:
    """The targets' table: (target, met by wall time, measured, met by CPU time) per row."""
    if not verdicts:
        return
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
