"""bench/engine.py's query section: one search query at a time, the forward pass alone, qkv through
BLAS, its blocked float32 product and its float16 panels, transformers and ONNX Runtime (table 5)."""

from __future__ import annotations

from pathlib import Path

from _harness import fmt_ratio, load_torch_model, make_titles, median, ort_session, time_each

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

        model = load_torch_model(1)
        seqs = [(torch.from_numpy(i), torch.from_numpy(m.astype(np.int64))) for i, m in seqs]

        def one(ids, mask):
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=mask)
    elif engine == "onnxruntime":
        sess = ort_session(Path(job["onnx"]), 1)
        seqs = [({"input_ids": i, "attention_mask": m.astype(np.int64)}, None) for i, m in seqs]

        def one(feed, _):
            sess.run(None, feed)
    else:
        raise ValueError(f"unknown engine {engine!r}")
    return {**time_each(one, seqs), "tokens": float(np.mean([len(t.ids) for t in enc.tokenize(texts)])), **extra}


def report(console, Table, raw: dict, verdicts: list) -> None:
    """Table 5 and its note."""
    if not any(k.startswith("query|") for k in raw):
        return
    tb = Table(title="5. One search query at a time (~9 tokens), forward pass, 1 thread: ms per query "
                     "(median over queries and rounds)")
    for c in ("engine", "p50 wall", "p90 wall", "p50 CPU", "÷ qkv-float16 p50 wall", "tokens"):
        tb.add_column(c, justify="left" if c == "engine" else "right")
    stats = {}
    for eng in QUERY_ENGINES:
        runs = raw.get(f"query|{eng}", [])
        if runs:
            w = sorted(x for r in runs for x in r["wall"])
            stats[eng] = (median(w), w[int(0.9 * (len(w) - 1))], median([x for r in runs for x in r["cpu"]]),
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
