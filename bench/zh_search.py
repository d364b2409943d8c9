"""Chinese queries against the English Home Depot catalog (docs/search.md, "Chinese queries").

    .venv/bin/python bench/zh_search.py --index /tmp/qkv-zh/hd-e5 [--data ../shared/data/search/homedepot]

The 328 dev queries of ``queries.dev.zh.jsonl`` (a person's Chinese for each; the English original in
``en``; the dev qrels apply), on the full corpus, NDCG@10 / Recall@100 with the metric code of
``qkv eval search``, for:

* English — the ``en`` originals, as ``qkv eval search`` runs them;
* Chinese as typed — no translation (dense on the Chinese, keyword on it);
* Chinese translated (``qkv.search.translate``, as ``Index.search``: the built-in trade glossary,
  ``--trade-glossary``, default home-improvement, then CC-CEDICT) — keyword on the original plus
  its translation (``Index.plan_query``), dense on normalize(w·v(original) + (1 − w)·v(translation))
  (``Index.mix_vectors``): ranking by that vector is ranking by w·cos(original) + (1 − w)·cos(translation);
  hybrid = the shipped score fusion (α·cos + (1 − α)·BM25 × coverage²/max).

w (``ORIGINAL_WEIGHT``) and α are swept on half a; the pair chosen there is reported on half b.
Queries are embedded as the index embeds them (its manifest's query prefix: E5 "query: "), by
``Index.query_vectors``; the index (built once by ``qkv index corpus.jsonl --index DIR``) is only
read, so changing the translator re-encodes only the queries (vectors are cached per text under
--cache). Reads ../shared data; says so when absent.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "search" / "homedepot"
WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
ALPHAS = (0.4, 0.5, 0.6)


def load() -> str:
    return open("/proc/loadavg").read().split()[0] if Path("/proc/loadavg").is_file() else "?"


class VectorCache:
    """Query vectors by text for one index's model and prefix, kept in an .npz between runs."""

    def __init__(self, idx, cache_dir: Path):
        m = idx.manifest
        key = hashlib.blake2b(f"{m.fingerprint}|{m.extra.get('query_prefix', '')}".encode(), digest_size=6).hexdigest()
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.path = cache_dir / f"queries-{key}.npz"
        self.idx = idx
        self.vecs: dict[str, np.ndarray] = {}
        if self.path.is_file():
            with np.load(self.path, allow_pickle=False) as z:
                self.vecs = dict(zip(z["texts"].tolist(), z["vectors"]))

    def get(self, texts: list[str]) -> np.ndarray:
        todo = sorted({t for t in texts if t not in self.vecs})
        if todo:
            t0 = time.perf_counter()
            for t, v in zip(todo, self.idx.query_vectors(todo)):
                self.vecs[t] = v
            print(f"  embedded {len(todo)} new query texts in {time.perf_counter() - t0:.1f}s", flush=True)
            keys = list(self.vecs)
            np.savez(self.path, texts=np.asarray(keys), vectors=np.stack([self.vecs[k] for k in keys]))
        return np.stack([self.vecs[t] for t in texts]).astype(np.float32)


def main() -> None:
    from qkv.search import fusion
    from qkv.search.evaluate import in_half, load_qrels, ndcg, recall
    from qkv.search.index import CANDIDATES, ORIGINAL_WEIGHT, Index

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--glossary", type=Path, help="a seller's glossary CSV (none by default: the figures are the built-in trade glossary's and the dictionary's)")
    ap.add_argument("--trade-glossary", default="home-improvement",
                    help="built-in trade glossary (qkv.search.translate.TRADE_GLOSSARIES) or none")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/qkv-cache/zh-search"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--weights", default=",".join(map(str, WEIGHTS)), help="w values swept (comma-separated)")
    ap.add_argument("--alphas", default=",".join(map(str, ALPHAS)), help="α values swept besides the model's own")
    a = ap.parse_args()
    weights = [float(x) for x in a.weights.split(",") if x]
    alphas = [float(x) for x in a.alphas.split(",") if x]
    if not (a.data / "queries.dev.zh.jsonl").is_file():
        sys.exit(f"no Home Depot Chinese queries at {a.data}; pass --data")
    print(f"start {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {load()}")
    recs = [json.loads(l) for l in (a.data / "queries.dev.zh.jsonl").read_text(encoding="utf-8").splitlines() if l.strip()]
    qrels = load_qrels(a.data / "qrels" / "dev.tsv")
    recs = [r for r in recs if r["_id"] in qrels]
    idx = Index.open(a.index, glossary=a.glossary, trade_glossary=a.trade_glossary)
    store = idx.store
    print(f"trade glossary: {a.trade_glossary}; seller's glossary: {a.glossary or 'none'}")
    print(f"index {a.index}: {store.count():,} products, model {idx.manifest.model}, "
          f"query prefix {idx.manifest.extra.get('query_prefix', '')!r}")
    t0 = time.perf_counter()
    plans = [idx.plan_query(r["text"]) for r in recs]  # (keyword query, Translation), as Index.search
    t_tr = (time.perf_counter() - t0) / len(recs)
    trans = [tr for _, tr in plans]
    print(f"{len(recs)} queries; translated in {t_tr * 1000:.1f} ms/query on average (dictionary load included)")
    for r, t in list(zip(recs, trans))[:8]:
        print(f"  {r['text']}  →  {t.text!r}   (en: {r['en']!r})")
    cache = VectorCache(idx, a.cache)
    v_en = cache.get([r["en"] for r in recs])
    v_zh = cache.get([r["text"] for r in recs])
    v_tr = cache.get([t.text or r["text"] for r, t in zip(recs, trans)])
    depth = max(100, CANDIDATES)
    offset = 1.0
    halves = ["a" if in_half(r["_id"], "a") else "b" for r in recs]
    lists: dict = {}

    def searched(kind, texts, vecs):
        """Each query's dense and keyword candidates, once per kind of query."""
        if kind not in lists:
            lists[kind] = [(store.dense_search(v, depth), store.keyword_search(t, depth) if t.strip() else [])
                           for t, v in zip(texts, vecs)]
        return lists[kind]

    def run(kind, kw_texts, vecs, alpha, dense_kind=None):
        out = {m: {"a": ([], []), "b": ([], []), "all": ([], [])} for m in ("keyword", "dense", "hybrid")}
        kw_lists = searched(kind, kw_texts, vecs)
        d_lists = kw_lists if dense_kind is None else [(store.dense_search(v, depth), None) for v in vecs]
        for r, text, vec, h, (_, kw), (dense, _) in zip(recs, kw_texts, vecs, halves, kw_lists, d_lists):
            judged = qrels[r["_id"]]
            for mode in out:
                ranking = [p for p, _, _ in idx.fuse(mode, dense, kw, 100, vec, "score", alpha, query=text)]
                for part in (h, "all"):
                    out[mode][part][0].append(ndcg(ranking, judged, offset))
                    out[mode][part][1].append(recall(ranking, judged, offset))
        return {m: {h: (float(np.nanmean(v[0])), float(np.nanmean(v[1]))) for h, v in hs.items()} for m, hs in out.items()}

    def mix(w):
        return idx.mix_vectors(v_zh, v_tr, w)

    rows = []

    def show(name, res, **kw):
        rows.append({"name": name, **kw, "metrics": res})
        cells = "  ".join(f"{m} a {res[m]['a'][0]:.4f} b {res[m]['b'][0]:.4f}/{res[m]['b'][1]:.4f}" for m in res)
        print(f"{name:36s} {cells}", flush=True)

    na = halves.count("a")
    print(f"half a {na} queries, half b {len(recs) - na}; cells: NDCG@10 (a), NDCG@10/Recall@100 (b)")
    alpha0 = fusion.alpha_for(idx.manifest.model)  # the index's model's weight, as Index.search uses
    show("English (en originals)", run("en", [r["en"] for r in recs], v_en, alpha0))
    show("Chinese as typed", run("zh", [r["text"] for r in recs], v_zh, alpha0))
    kw_plan = [q for q, _ in plans]
    for w in sorted(set(weights) | {ORIGINAL_WEIGHT}):
        for alpha in sorted(set(alphas) | {alpha0}):
            show(f"translated, w {w}, alpha {alpha}", run("tr", kw_plan, mix(w), alpha, dense_kind=w), w=w, alpha=alpha)
    best = max((r for r in rows if "w" in r), key=lambda r: r["metrics"]["hybrid"]["a"][0])
    en, zh_typed = rows[0]["metrics"], rows[1]["metrics"]
    shipped = next(r for r in rows if r.get("w") == ORIGINAL_WEIGHT and r.get("alpha") == alpha0)
    print(f"\nbest on half a: w {best['w']}, alpha {best['alpha']} (shipped: w {ORIGINAL_WEIGHT}, alpha {alpha0})")
    for part, label in (("b", "half b"), ("all", "all")):
        n = len(recs) - na if part == "b" else len(recs)
        print(f"\n{label} ({n} queries), shipped settings; NDCG@10 / Recall@100")
        print("| queries | keyword | dense | hybrid |\n|---|---|---|---|")
        for name, m in (("English originals", en), ("Chinese as typed", zh_typed), ("Chinese, translated", shipped["metrics"])):
            print(f"| {name} | " + " | ".join(f"{m[x][part][0]:.4f} / {m[x][part][1]:.4f}" for x in ("keyword", "dense", "hybrid")) + " |")
        print("Chinese translated / English, NDCG@10: " + ", ".join(
            f"{x} {shipped['metrics'][x][part][0] / en[x][part][0]:.3f}×" for x in ("keyword", "dense", "hybrid")))
    print(f"\nend {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {load()}")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "translations": [t.to_json() for t in trans]}, ensure_ascii=False,
                                     indent=1))


if __name__ == "__main__":
    main()
