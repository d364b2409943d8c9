"""bench/engine.py's multilingual section: multilingual-e5-small on its 4-bit blocks beside the
same model dequantized to float32 in transformers and ONNX Runtime (what a user would otherwise
run), and beside all-MiniLM-L6-v2 in qkv's float32 (half the layers). One thread, each engine in
its own process (bench/engine.py's run_job), interleaved rounds.

    .venv/bin/python bench/engine.py --sections multilingual --threads 1 --rounds 3

Tables: 6 parity over the 51 parity inputs; 6a one search query at a time (p50/p90 ms, forward pass only, the query with E5's
"query: " prefix); 6b batches of 32 titles and of 8 reviews × 256 tokens (sentences/s);
6c resident memory after load, and the growth of the process over load + first encode.

The dequantized model is written once to /tmp/qkv-cache/engine/e5-dequantized (config.json,
model.safetensors; ~390 MB) and exported to ONNX beside it (never into the repo).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

MODELS = ("multilingual-e5-small", "minilm")
ENGINES = {  # (model, engine) pairs measured
    "qkv e5 (4-bit)": ("multilingual-e5-small", "qkv"),
    "transformers e5 (float32)": ("multilingual-e5-small", "transformers"),
    "transformers e5 (bfloat16)": ("multilingual-e5-small", "transformers-bf16"),  # issue 25's second peer
    "onnxruntime e5 (float32)": ("multilingual-e5-small", "onnxruntime"),
    "qkv minilm (float32)": ("minilm", "qkv"),
}
BATCHES = {"titles": (32, 24, 4), "reviews": (8, 256, 2)}  # per batch, tokens, batches per pass


def _cache() -> Path:
    from _harness import CACHE  # bench/ is on sys.path in the worker

    return CACHE


def dense_dir() -> Path:
    """multilingual-e5-small's dequantized weights as an ordinary BERT directory (made once)."""
    import numpy as np
    from safetensors.numpy import save_file

    from qkv.model.weights.e5s1 import E5S1, dequantized_tensors
    from qkv.model.hub import E5_SMALL, _locate, e5_tokenizer

    weights = _locate(E5_SMALL)
    out = _cache() / f"e5-dequantized-{weights.stat().st_size}"
    if (out / "model.safetensors").is_file():
        return out
    f = E5S1(weights)
    h = f.header
    t = dequantized_tensors(f, np.float32)
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense",
             "aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    hf = {"embeddings.word_embeddings.weight": t["emb.word"], "embeddings.position_embeddings.weight": t["emb.pos"],
          "embeddings.token_type_embeddings.weight": t["emb.type"],
          "embeddings.LayerNorm.weight": t["emb.ln.w"], "embeddings.LayerNorm.bias": t["emb.ln.b"]}
    for i in range(h.layers):
        for short, long in names.items():
            hf[f"encoder.layer.{i}.{long}.weight"] = t[f"l{i}.{short}.w"]
            hf[f"encoder.layer.{i}.{long}.bias"] = t[f"l{i}.{short}.b"]
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v) for k, v in hf.items()}, str(tmp / "model.safetensors"))
    (tmp / "config.json").write_text(json.dumps({
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": h.vocab, "hidden_size": h.hidden,
        "num_hidden_layers": h.layers, "num_attention_heads": h.heads, "intermediate_size": h.ff,
        "max_position_embeddings": h.max_positions, "type_vocab_size": h.token_types, "layer_norm_eps": h.eps,
        "hidden_act": "gelu", "pad_token_id": 0}))
    (tmp / "tokenizer.json").write_bytes(e5_tokenizer().read_bytes())
    tmp.replace(out)
    return out


def onnx_file() -> Path:
    """The dequantized model exported to ONNX (torch.export, dynamic batch and length; made once)."""
    from _onnx import export_last_hidden_state
    from transformers import BertModel

    d = dense_dir()
    out = d / "model.onnx"
    if out.is_file():
        return out
    model = BertModel.from_pretrained(str(d)).eval()

    export_last_hidden_state(model, out, 512)
    return out


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _forward_fn(model: str, engine: str):
    """(encoder, one(ids, mask)) for a model and engine; the qkv encoder is always loaded (it
    tokenizes for every engine, so all see the same ids)."""
    import numpy as np

    import qkv

    enc = qkv.load(model, threads=1)
    if engine == "qkv":
        from qkv.model.threads import blas_threads

        def one(ids, mask):
            with blas_threads(1):
                enc.forward(ids, mask)
    elif engine in ("transformers", "transformers-bf16"):
        import torch
        from transformers import BertModel

        torch.set_num_threads(1)
        m = BertModel.from_pretrained(str(dense_dir()), attn_implementation="eager").eval()
        if engine == "transformers-bf16":
            m = m.to(torch.bfloat16)  # weights and activations in bfloat16, as the MiniLM table's torch bf16

        def one(ids, mask):
            with torch.inference_mode():
                m(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask.astype(np.int64)))
    elif engine == "onnxruntime":
        from _harness import ort_session

        sess = ort_session(onnx_file(), 1)

        def one(ids, mask):
            sess.run(None, {"input_ids": ids, "attention_mask": mask.astype(np.int64)})
    else:
        raise ValueError(f"unknown engine {engine!r}")
    return enc, one


def worker(job: dict) -> dict:
    import numpy as np

    from _harness import make_reviews, make_titles

    what = job["what"]
    if what == "prepare":
        t0 = time.perf_counter()
        d = dense_dir()
        o = onnx_file()
        return {"dir": str(d), "onnx": str(o), "seconds": time.perf_counter() - t0}
    if what == "parity":
        return _parity()
    if what == "memory":
        import gc

        import qkv  # noqa: F401  (the baseline: qkv and NumPy imported, no model)

        base = _rss_mib()
        t0 = time.perf_counter()
        enc = qkv.load(job["model"], threads=1)
        loaded = _rss_mib()
        enc.encode(["透气跑鞋 轻便 运动鞋"], role="query")
        gc.collect()
        return {"base_mib": base, "after_load_mib": loaded, "after_first_encode_mib": _rss_mib(),
                "load_s": time.perf_counter() - t0,
                "weights_mib": enc.weights.nbytes / 2**20}
    model, engine = ENGINES[job["engine"]]
    enc, one = _forward_fn(model, engine)
    role = "query" if model == "multilingual-e5-small" else None
    if what == "query":
        import qkv

        # the same ~9-token English queries for both models (MiniLM knows only English)
        texts = make_titles(qkv.load("minilm").tokenizer, job["queries"], target=9, seed=7)
        items = enc.tokenize(enc.with_role(texts, role))
        seqs = [(np.asarray([t.ids]), np.ones((1, len(t.ids)), dtype=bool)) for t in items]
        from _harness import time_each

        return {**time_each(one, seqs), "tokens": float(np.mean([len(t) for t in items]))}
    if what == "batches":
        per, target, n_batches = BATCHES[job["workload"]]
        make = make_titles if job["workload"] == "titles" else make_reviews
        texts = make(enc.tokenizer, per * n_batches, target)
        items = enc.tokenize(texts)
        batches = []
        for s in range(0, len(items), per):
            b = enc._pad(items[s:s + per])
            batches.append((b.ids, b.mask))
        one(*batches[0])
        wall, cpu = [], []
        for _ in range(job["reps"]):
            t0, c0 = time.perf_counter(), time.process_time()
            for ids, mask in batches:
                one(ids, mask)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        return {"wall": wall, "cpu": cpu, "sentences": len(items),
                "tokens": int(sum(m.sum() for _, m in batches)), "shapes": [list(i.shape) for i, _ in batches]}
    raise ValueError(f"unknown job {what!r}")


def _parity() -> dict:
    """Over the 51 inputs of tests/model/test_e5_parity.py, batches of 8: qkv in float32 on the
    4-bit blocks and in float64 against the float64 reference forward of tests/model/conftest.py
    over the dequantized weights; and transformers on the dequantized directory against qkv."""
    import importlib.util

    import numpy as np
    import torch
    from transformers import BertModel

    import qkv
    from qkv.model.hub import E5_SMALL, _locate
    from qkv.model.weights.e5s1 import E5S1

    root = Path(__file__).resolve().parents[1] / "tests" / "model"
    mods = {}
    for name in ("conftest", "test_e5_parity"):
        spec = importlib.util.spec_from_file_location(f"e5_{name}", root / f"{name}.py")
        mods[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mods[name])
    ref_forward, batches = mods["conftest"].reference_forward, mods["test_e5_parity"].BATCHES
    from qkv.kernels import cpu, q4

    default = q4.unit()  # the int8-block units are not exact: the 1e-4 target is the exact kernels'
    if default not in q4.EXACT:
        cpu.select(cpu.ISA, q4="float32")
    enc = qkv.load("multilingual-e5-small", threads=1)
    enc64 = enc.astype(np.float64)
    f = E5S1(_locate(E5_SMALL))
    torch.set_num_threads(1)
    hf = BertModel.from_pretrained(str(dense_dir()), attn_implementation="eager").eval()
    worst = {"hidden f32 vs f64 reference": 0.0, "hidden f64 vs f64 reference": 0.0,
             "attention f64 vs f64 reference": 0.0, "attention f32 vs f64 reference": 0.0,
             "hidden f32 vs transformers f32": 0.0}
    keep = ["layers.*.attn.weights", "layers.11.out"]
    n_texts = 0
    for batch in batches:
        n_texts += len(batch)
        tr = enc.trace(batch, keep=keep, truncate=True)
        tr64 = enc64.trace(batch, keep=keep, truncate=True)
        hidden, attn = ref_forward(f, tr.input_ids, tr.attention_mask)
        m = tr.attention_mask
        with torch.inference_mode():
            out = hf(input_ids=torch.from_numpy(tr.input_ids),
                     attention_mask=torch.from_numpy(m.astype(np.int64))).last_hidden_state.numpy()
        upd = {"hidden f32 vs f64 reference": np.abs(tr["layers.11.out"] - hidden)[m].max(),
               "hidden f64 vs f64 reference": np.abs(tr64["layers.11.out"] - hidden)[m].max(),
               "attention f64 vs f64 reference": max(np.abs(tr64[f"layers.{i}.attn.weights"] - a).max()
                                                     for i, a in enumerate(attn)),
               "attention f32 vs f64 reference": max(np.abs(tr[f"layers.{i}.attn.weights"] - a).max()
                                                     for i, a in enumerate(attn)),
               "hidden f32 vs transformers f32": np.abs(tr["layers.11.out"] - out)[m].max()}
        worst = {k: max(v, float(upd[k])) for k, v in worst.items()}
        if default not in q4.EXACT:  # the default unit's distance, no target (tests/model/test_e5_int8.py: cosine)
            cpu.select(cpu.ISA, q4=default)
            key = f"hidden f32 on {default} (int8 blocks) vs f64 reference"
            got = float(np.abs(enc.trace(batch, keep=keep, truncate=True)["layers.11.out"] - hidden)[m].max())
            worst[key] = max(worst.get(key, 0.0), got)
            cpu.select(cpu.ISA, q4="float32")
    return {"texts": n_texts, "batches": len(batches), **worst}


def plan(rounds: int, quick: bool) -> list[tuple[str, dict, int, dict | None]]:
    jobs = [("ml|prepare", {"kind": "ml", "what": "prepare"}, 1, None),
            ("ml|parity", {"kind": "ml", "what": "parity"}, 1, None)]
    for model in MODELS:
        jobs.append((f"ml|memory|{model}", {"kind": "ml", "what": "memory", "model": model}, 1, None))
    for _ in range(rounds):
        for name in ENGINES:
            jobs.append((f"ml|query|{name}", {"kind": "ml", "what": "query", "engine": name,
                                              "queries": 60 if quick else 200}, 1, None))
            for wl in BATCHES:
                jobs.append((f"ml|batches|{wl}|{name}", {"kind": "ml", "what": "batches", "engine": name,
                                                         "workload": wl, "reps": 2 if quick else 3}, 1, None))
    return jobs


def _q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def report(console, raw: dict, verdicts: list) -> None:
    from rich.table import Table

    def runs(key):
        return raw.get(key, [])

    # 6. parity
    for r in runs("ml|parity"):
        tb = Table(title=f"6. multilingual-e5-small parity over {r['texts']} texts ({r['batches']} batches): "
                         "max |diff| (hidden: real tokens of the last layer; attention: every layer and head)")
        tb.add_column("comparison")
        tb.add_column("max |diff|", justify="right")
        tb.add_column("target", justify="right")
        targets = {"hidden f32 vs f64 reference": 1e-4, "attention f64 vs f64 reference": 1e-5}
        for k, v in r.items():
            if k in ("texts", "batches"):
                continue
            tb.add_row(k, f"{v:.1e}", f"≤ {targets[k]:.0e}" if k in targets else "")
        console.print(tb)
        for k, t in targets.items():
            verdicts.append((f"e5 {k} ≤ {t:.0e}", r[k] <= t, f"{r[k]:.1e}", None))

    # 6a. one query
    tb = Table(title="6a. multilingual-e5-small: one search query at a time (~9 tokens + 'query: '), forward pass, "
                     "1 thread: ms per query (wall p50 / p90; CPU p50)")
    for c in ("engine", "tokens", "p50", "p90", "CPU p50"):
        tb.add_column(c, justify="left" if c == "engine" else "right")
    p50 = {}
    for name in ENGINES:
        rs = runs(f"ml|query|{name}")
        if not rs:
            continue
        wall = [w for r in rs for w in r["wall"]]
        cpu = [c for r in rs for c in r["cpu"]]
        p50[name] = (_q(wall, 0.5), _q(cpu, 0.5))
        tb.add_row(name, f"{rs[0]['tokens']:.1f}", f"{_q(wall, .5) * 1e3:.2f}", f"{_q(wall, .9) * 1e3:.2f}",
                   f"{_q(cpu, .5) * 1e3:.2f}")
    console.print(tb)
    e5, mini = "qkv e5 (4-bit)", "qkv minilm (float32)"
    if e5 in p50 and mini in p50:
        r_wall, r_cpu = p50[mini][0] / p50[e5][0], p50[mini][1] / p50[e5][1]
        verdicts.append(("e5 4-bit lone query p50 no slower than MiniLM float32", r_wall >= 1.0,
                         f"{r_wall:.2f}× (MiniLM time ÷ e5 time)", r_cpu >= 1.0))

    # 6b. batches
    tb = Table(title="6b. multilingual-e5-small batches, 1 thread: sentences/s (wall; CPU in brackets) and "
                     "qkv's ratio (> 1: qkv faster)")
    tb.add_column("workload")
    for name in ENGINES:
        tb.add_column(name, justify="right")
    tb.add_column("qkv e5 ÷ transformers", justify="right")
    tb.add_column("qkv e5 ÷ transformers bf16", justify="right")
    tb.add_column("qkv e5 ÷ onnxruntime", justify="right")
    tb.add_column("qkv e5 ÷ qkv minilm", justify="right")
    for wl in BATCHES:
        rate = {}
        cells = []
        for name in ENGINES:
            rs = runs(f"ml|batches|{wl}|{name}")
            if not rs:
                cells.append("—")
                continue
            w = statistics.median([x for r in rs for x in r["wall"]])
            c = statistics.median([x for r in rs for x in r["cpu"]])
            rate[name] = (rs[0]["sentences"] / w, rs[0]["sentences"] / c)
            cells.append(f"{rate[name][0]:.1f} ({rate[name][1]:.1f})")
        ratios = []
        for other, need in (("transformers e5 (float32)", 1.2), ("transformers e5 (bfloat16)", 1.2),
                            ("onnxruntime e5 (float32)", 1.0),
                            ("qkv minilm (float32)", 0.5)):
            if e5 in rate and other in rate:
                rw, rc = rate[e5][0] / rate[other][0], rate[e5][1] / rate[other][1]
                ratios.append(f"{rw:.2f}× ({rc:.2f}×)")
                verdicts.append((f"e5 4-bit {wl} ≥ {need:.1f}× {other}", rw >= need, f"{rw:.2f}×", rc >= need))
            else:
                ratios.append("—")
        tb.add_row(wl, *cells, *ratios)
    console.print(tb)

    # 6c. memory
    tb = Table(title="6c. resident memory (VmRSS, MiB), each model in a fresh process after `import qkv`")
    for c in ("model", "baseline", "after load", "after first encode", "growth", "weights held"):
        tb.add_column(c, justify="left" if c == "model" else "right")
    for model in MODELS:
        rs = runs(f"ml|memory|{model}")
        if not rs:
            continue
        r = rs[-1]
        growth = r["after_first_encode_mib"] - r["base_mib"]
        tb.add_row(model, f"{r['base_mib']:.0f}", f"{r['after_load_mib']:.0f}", f"{r['after_first_encode_mib']:.0f}",
                   f"{growth:.0f}", f"{r['weights_mib']:.0f}")
        if model == "multilingual-e5-small":
            verdicts.append(("e5: process grows < 400 MB on load + first encode", growth * 2**20 / 1e6 < 400,
                             f"{growth * 2**20 / 1e6:.0f} MB", None))
    console.print(tb)
