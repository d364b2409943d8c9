"""Chinese queries against the English Home Depot catalog (docs/search.md, "Chinese queries").

    .venv/bin/python bench/zh_search.py --index /tmp/qkv-zh/hd-index [--data ../shared/data/search/homedepot]

The 328 dev queries of ``queries.dev.zh.jsonl`` (a person's Chinese for each; the English original in
``en``; the dev qrels apply), on the full corpus, NDCG@10 / Recall@100 with the metric code of
``qkv eval search``, for:

* English — the ``en`` originals, as ``qkv eval search`` runs them;
* Chinese as is — what qkv did before translation (dense on the Chinese, keyword on it);
* Chinese translated (``qkv.search.translate``) — keyword on the translation (with the original's
  own terms, which only a bilingual catalog can match), dense on normalize(w·v(original) +
  (1 − w)·v(translation)): ranking by that vector is ranking by w·cos(original) + (1 − w)·
  cos(translation); hybrid = the shipped score fusion (α·cos + (1 − α)·BM25 × coverage²/max).

w and α are swept on half a; the chosen pair is reported on half b. The index (built once by
``qkv index corpus.jsonl --index DIR``) is only read. Reads ../shared data; says so when absent.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "search" / "homedepot"
WEIGHTS = (0.0, 0.25, 0.5, 1.0)
ALPHAS = (0.4, 0.5, 0.6)


def main() -> None:
    from qkv.search.evaluate import in_half, load_qrels, ndcg, recall
    from qkv.search.index import CANDIDATES, Index
    from qkv.search.translate import FtsVocabulary, Translator

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if not (a.data / "queries.dev.zh.jsonl").is_file():
        sys.exit(f"no Home Depot Chinese queries at {a.data}; pass --data")
    recs = [json.loads(l) for l in (a.data / "queries.dev.zh.jsonl").read_text(encoding="utf-8").splitlines() if l.strip()]
    qrels = load_qrels(a.data / "qrels" / "dev.tsv")
    recs = [r for r in recs if r["_id"] in qrels]
    idx = Index.open(a.index)
    store = idx.store
    tr = Translator(FtsVocabulary(store.db, "fts"))
    t0 = time.perf_counter()
    trans = [tr.translate(r["text"]) for r in recs]
    t_tr = (time.perf_counter() - t0) / len(recs)
    print(f"{len(recs)} queries; translated in {t_tr * 1000:.1f} ms/query on average (dictionary load included)")
    for r, t in list(zip(recs, trans))[:8]:
        print(f"  {r['text']}  →  {t.text!r}   (en: {r['en']!r})")
    enc = idx.encoder
    v_en = enc.encode([r["en"] for r in recs], batch_size=64)
    v_zh = enc.encode([r["text"] for r in recs], batch_size=64)
    v_tr = enc.encode([t.text or r["text"] for r, t in zip(recs, trans)], batch_size=64)
    depth = max(100, CANDIDATES)
    offset = 1.0

    def run(kw_texts, vecs, alpha):
        out = {m: {"a": ([], []), "b": ([], [])} for m in ("keyword", "dense", "hybrid")}
        for r, text, vec in zip(recs, kw_texts, vecs):
            judged = qrels[r["_id"]]
            half = "a" if in_half(r["_id"], "a") else "b"
            dense = store.dense_search(vec, depth)
            kw = store.keyword_search(text, depth) if text.strip() else []
            for mode in out:
                ranking = [p for p, _, _ in idx.fuse(mode, dense, kw, 100, vec, "score", alpha, query=text)]
                out[mode][half][0].append(ndcg(ranking, judged, offset))
                out[mode][half][1].append(recall(ranking, judged, offset))
        return {m: {h: (float(np.nanmean(v[0])), float(np.nanmean(v[1]))) for h, v in hs.items()} for m, hs in out.items()}

    def mix(w):
        v = w * v_zh + (1 - w) * v_tr
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    rows = []

    def show(name, res, **kw):
        rows.append({"name": name, **kw, "metrics": res})
        cells = "  ".join(f"{m} a {res[m]['a'][0]:.4f}/{res[m]['a'][1]:.4f} b {res[m]['b'][0]:.4f}/{res[m]['b'][1]:.4f}"
                          for m in res)
        print(f"{name:48s} {cells}", flush=True)

    from qkv.search import fusion

    na = sum(in_half(r["_id"], "a") for r in recs)
    print(f"half a {na} queries, half b {len(recs) - na}; cells: NDCG@10/Recall@100")
    show("English (en originals)", run([r["en"] for r in recs], v_en, fusion.ALPHA))
    show("Chinese as is", run([r["text"] for r in recs], v_zh, fusion.ALPHA))
    kw_both = [f"{r['text']} {t.text}" for r, t in zip(recs, trans)]
    for w in WEIGHTS:
        for alpha in ALPHAS:
            show(f"translated, w {w}, alpha {alpha}", run(kw_both, mix(w), alpha), w=w, alpha=alpha)
    best = max((r for r in rows if "w" in r), key=lambda r: r["metrics"]["hybrid"]["a"][0])
    print(f"best on half a: w {best['w']}, alpha {best['alpha']}: hybrid half b NDCG@10 "
          f"{best['metrics']['hybrid']['b'][0]:.4f}, English hybrid half b {rows[0]['metrics']['hybrid']['b'][0]:.4f}, "
          f"ratio {best['metrics']['hybrid']['b'][0] / rows[0]['metrics']['hybrid']['b'][0]:.3f}")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "translations": [t.to_json() for t in trans]}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
