"""Chinese queries against the English Home Depot catalog (docs/search.md, "Chinese queries").

    .venv/bin/python bench/zh_search.py --index /tmp/qkv-zh/hd-e5 [--data ../shared/data/search/homedepot]

The 328 dev queries of ``queries.dev.zh.jsonl`` (a person's Chinese for each; the English original in
``en``; the dev qrels apply), on the full corpus, NDCG@10 / Recall@100 with the metric code of
``qkv eval search``, for:

* English — the ``en`` originals, as ``qkv eval search`` runs them;
* Chinese as typed — no translation (dense on the Chinese, keyword on it);
* Chinese translated (``qkv.translate.translator``, as ``Index.search``: the built-in trade glossary,
  ``--trade-glossary``, default home-improvement, then CC-CEDICT, then the reversed ECDICT when
  installed, ``QKV_ECDICT``) — keyword on the original plus
  its translation, each word's English alternatives one synonym group at weight γ
  (``qkv.search.crosslingual``: Pirkola's structured query), dense on normalize(w·v(original) +
  (1 − w)·v(translation)) (``Index.mix_vectors``), then again with the top results' vectors fed back
  (Rocchio: k docs, weight β); each word's group weighted by trust in its source
  (``crosslingual.piece_trust``: dictionary words D, lone characters C, glossaries 1), coverage
  counting source words (``crosslingual.COVERAGE``); hybrid = the shipped score fusion (α·cos + (1 − α)·BM25 × coverage²/max).
  Exactly ``crosslingual.retrieve``, which ``Index.search`` and ``qkv eval search`` run.

w (``ORIGINAL_WEIGHT``), α, γ, k, β, D and C are swept on half a; what half a chose is reported on half b.
``--half a`` prints half a only (develop with it, so half b is read once, at the end).
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
    from qkv.search import crosslingual, fusion
    from qkv.search.evaluate import in_half, load_qrels, ndcg, recall
    from qkv.search.index import CANDIDATES, ORIGINAL_WEIGHT, Index
    from qkv.translate import Translation

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--queries", type=Path, help="Chinese queries (JSONL: _id, text, en) other than the data's "
                    "queries.dev.zh.jsonl, judged by its dev qrels — e.g. a further development set; its halves "
                    "are the ids' halves, as for the dev set")
    ap.add_argument("--glossary", type=Path, help="a seller's glossary CSV (none by default: the figures are the built-in trade glossary's and the dictionary's)")
    ap.add_argument("--trade-glossary", default="home-improvement",
                    help="built-in trade glossary (qkv.translate.translator.TRADE_GLOSSARIES) or none")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/qkv-cache/zh-search"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--weights", default=",".join(map(str, WEIGHTS)), help="w values swept (comma-separated)")
    ap.add_argument("--alphas", default=",".join(map(str, ALPHAS)), help="α values swept besides the model's own")
    ap.add_argument("--alt-weights", default="", help="γ values swept besides the shipped "
                    "crosslingual.ALTERNATIVE_WEIGHT (weight of a word's other English; 0: the chosen gloss only)")
    ap.add_argument("--feedback", default="", help="Rocchio settings swept besides the shipped, as k:β pairs "
                    "(comma-separated; 0:0 = no feedback)")
    ap.add_argument("--trust", default="", help="trust settings swept besides the shipped, as D:C pairs "
                    "(comma-separated; weight of a dictionary word's group and of a lone character's; 1:1 = none)")
    ap.add_argument("--coverage", default="", help="coverage counts swept besides the shipped "
                    "crosslingual.COVERAGE (comma-separated: words, terms)")
    ap.add_argument("--per-query", type=Path, help="write half a's queries (never half b's) with the English and "
                    "the shipped Chinese hybrid NDCG@10, largest loss first, as TSV")
    ap.add_argument("--half", choices=("a", "all"), default="all",
                    help="a: print half a only (tuning), never half b; all: halves a, b and all")
    a = ap.parse_args()
    weights = [float(x) for x in a.weights.split(",") if x]
    alphas = [float(x) for x in a.alphas.split(",") if x]
    zh_file = a.queries or a.data / "queries.dev.zh.jsonl"
    if not zh_file.is_file():
        sys.exit(f"no Chinese queries at {zh_file}; pass --data or --queries")
    print(f"start {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {load()}")
    recs = [json.loads(l) for l in zh_file.read_text(encoding="utf-8").splitlines() if l.strip()]
    print(f"queries: {zh_file}")
    qrels = load_qrels(a.data / "qrels" / "dev.tsv")
    recs = [r for r in recs if r["_id"] in qrels]
    idx = Index.open(a.index, glossary=a.glossary, trade_glossary=a.trade_glossary)
    store = idx.store
    print(f"trade glossary: {a.trade_glossary}; seller's glossary: {a.glossary or 'none'}")
    print(f"index {a.index}: {store.count():,} products, model {idx.manifest.model}, "
          f"query prefix {idx.manifest.extra.get('query_prefix', '')!r}")
    t0 = time.perf_counter()
    plans = [idx.plan(r["text"]) for r in recs]  # as Index.search plans them
    t_tr = (time.perf_counter() - t0) / len(recs)
    # (a query without Han characters is not translated: Index.search searches it as typed)
    trans = [p.translation if p.translation is not None else Translation(r["text"], "") for r, p in zip(recs, plans)]
    print(f"{len(recs)} queries; translated in {t_tr * 1000:.1f} ms/query on average (dictionary load included)")
    for r, t in [x for x in zip(recs, trans) if a.half == "all" or in_half(x[0]["_id"], "a")][:8]:
        print(f"  {r['text']}  →  {t.text!r}   (en: {r['en']!r})")
    cache = VectorCache(idx, a.cache)
    en_plans = [idx.plan(r["en"]) for r in recs]  # the English as `qkv eval search` plans it (its spelling)
    v_en = cache.get([p.dense[0] for p in en_plans])
    v_zh = cache.get([r["text"] for r in recs])
    v_tr = cache.get([t.english or r["text"] for r, t in zip(recs, trans)])
    depth = max(100, CANDIDATES)
    offset = 1.0
    halves = ["a" if in_half(r["_id"], "a") else "b" for r in recs]
    parts = ("a",) if a.half == "a" else ("a", "b", "all")
    lists: dict = {}

    def searched(kind, texts, vecs):
        """Each query's dense and keyword candidates, once per kind of query."""
        if kind not in lists:
            lists[kind] = [(store.dense_search(v, depth), store.keyword_search(t, depth) if t.strip() else [])
                           for t, v in zip(texts, vecs)]
        return lists[kind]

    def new_scores():
        return {m: {"a": ([], []), "b": ([], []), "all": ([], [])} for m in ("keyword", "dense", "hybrid")}

    def record(out, r, h, mode, ranking, sink):
        """One query's ranking in one mode: its NDCG@10 and Recall@100 under its half and "all"
        (and its hybrid NDCG@10 in ``sink``, for --per-query)."""
        judged = qrels[r["_id"]]
        n, rc = ndcg(ranking, judged, offset), recall(ranking, judged, offset)
        if sink is not None and mode == "hybrid":
            sink[r["_id"]] = n
        for part in (h, "all"):
            out[mode][part][0].append(n)
            out[mode][part][1].append(rc)

    def means(out):
        return {m: {h: (float(np.nanmean(v[0])) if v[0] else float("nan"), float(np.nanmean(v[1])) if v[1] else float("nan"))
                    for h, v in hs.items()} for m, hs in out.items()}

    def run(kind, kw_texts, vecs, alpha, dense_kind=None, sink=None):
        out = new_scores()
        kw_lists = searched(kind, kw_texts, vecs)
        d_lists = kw_lists if dense_kind is None else [(store.dense_search(v, depth), None) for v in vecs]
        for r, text, vec, h, (_, kw), (dense, _) in zip(recs, kw_texts, vecs, halves, kw_lists, d_lists):
            if h not in parts and "all" not in parts:
                continue
            for mode in out:
                record(out, r, h, mode, [p for p, _, _ in idx.fuse(mode, dense, kw, 100, vec, "score", alpha, query=text)], sink)
        return means(out)

    def mix(w):
        return idx.mix_vectors(v_zh, v_tr, w)

    def run_translated(vecs, alpha, gamma, fb, trust, coverage, sink=None):
        """Each translated query as Index.search runs it (crosslingual.retrieve), per mode."""
        out = new_scores()
        for r, t, vec, h in zip(recs, trans, vecs, halves):
            if h not in parts and "all" not in parts:
                continue
            groups = crosslingual.keyword_groups(r["text"], t, gamma, trust=trust) if t.english else None
            for mode in out:
                if groups is None:  # nothing translated: searched as typed
                    hits = (store.dense_search(vec, depth), store.keyword_search(r["text"], depth))
                    ranked = idx.fuse(mode, *hits, 100, vec, "score", alpha, query=r["text"])
                else:
                    ranked = crosslingual.retrieve(store, groups, vec, 100, mode, None, "score", alpha, depth, *fb,
                                                   coverage=coverage)[0]
                record(out, r, h, mode, [p for p, _, _ in ranked], sink)
        return means(out)

    rows = []

    def show(name, res, **kw):
        rows.append({"name": name, **kw, "metrics": res})
        if a.half == "a":
            cells = "  ".join(f"{m} a {res[m]['a'][0]:.4f}/{res[m]['a'][1]:.4f}" for m in res)
        else:
            cells = "  ".join(f"{m} a {res[m]['a'][0]:.4f} b {res[m]['b'][0]:.4f}/{res[m]['b'][1]:.4f}" for m in res)
        print(f"{name:36s} {cells}", flush=True)

    na = halves.count("a")
    print(f"half a {na} queries, half b {len(recs) - na}; cells: " +
          ("NDCG@10/Recall@100 (a); half b not shown (--half a)" if a.half == "a" else "NDCG@10 (a), NDCG@10/Recall@100 (b)"))
    alpha0 = fusion.alpha_for(idx.manifest.model)  # the index's model's weight, as Index.search uses
    per_query: dict[str, dict] = {"en": {}, "zh": {}}  # hybrid NDCG@10 per query id (--per-query)
    show("English (en originals)", run("en", [p.keyword for p in en_plans], v_en, alpha0, sink=per_query["en"]))
    show("Chinese as typed", run("zh", [r["text"] for r in recs], v_zh, alpha0))
    gammas = sorted({float(x) for x in a.alt_weights.split(",") if x} | {crosslingual.ALTERNATIVE_WEIGHT})
    feedbacks = sorted({(int(x.split(":")[0]), float(x.split(":")[1])) for x in a.feedback.split(",") if x}
                       | {(crosslingual.FEEDBACK_DOCS, crosslingual.FEEDBACK_WEIGHT)})
    shipped_trust = (crosslingual.SOURCE_TRUST["dictionary"], crosslingual.CHARACTER_TRUST)
    trusts = sorted({(float(x.split(":")[0]), float(x.split(":")[1])) for x in a.trust.split(",") if x} | {shipped_trust})

    def trust_fn(dc):
        d, c = dc
        return lambda p: crosslingual.piece_trust(p, dict.fromkeys(crosslingual.SOURCE_TRUST, d), c)

    coverages = sorted({x for x in a.coverage.split(",") if x} | {crosslingual.COVERAGE})
    shipped_key = (ORIGINAL_WEIGHT, alpha0, crosslingual.ALTERNATIVE_WEIGHT,
                   (crosslingual.FEEDBACK_DOCS, crosslingual.FEEDBACK_WEIGHT), shipped_trust, crosslingual.COVERAGE)
    for w in sorted(set(weights) | {ORIGINAL_WEIGHT}):
        vecs = mix(w)
        for alpha in sorted(set(alphas) | {alpha0}):
            for gamma in gammas:
                for fb in feedbacks:
                    for tr_ in trusts:
                        for cov in coverages:
                            key = (w, alpha, gamma, fb, tr_, cov)
                            sink = per_query["zh"] if key == shipped_key else None
                            show(f"translated, w {w} α {alpha} γ {gamma} fb {fb[0]}:{fb[1]} trust {tr_[0]}:{tr_[1]} cov {cov}",
                                 run_translated(vecs, alpha, gamma, fb, trust_fn(tr_), cov, sink), w=w, alpha=alpha,
                                 gamma=gamma, feedback=list(fb), trust=list(tr_), coverage=cov)
    tr_rows = [r for r in rows if "w" in r]
    best = max(tr_rows, key=lambda r: r["metrics"]["hybrid"]["a"][0])
    en, zh_typed = rows[0]["metrics"], rows[1]["metrics"]
    shipped = next(r for r in tr_rows if (r["w"], r["alpha"], r["gamma"], tuple(r["feedback"]), tuple(r["trust"]),
                                          r["coverage"]) == shipped_key)
    print(f"\nbest on half a: w {best['w']}, α {best['alpha']}, γ {best['gamma']}, feedback {best['feedback']}, "
          f"trust {best['trust']}, coverage {best['coverage']} (shipped: w {ORIGINAL_WEIGHT}, α {alpha0}, "
          f"γ {shipped_key[2]}, feedback {list(shipped_key[3])}, trust {list(shipped_trust)}, coverage {crosslingual.COVERAGE})")
    for part, label in [(p_, l_) for p_, l_ in (("a", "half a"), ("b", "half b"), ("all", "all")) if p_ in parts]:
        n = {"a": na, "b": len(recs) - na, "all": len(recs)}[part]
        print(f"\n{label} ({n} queries), shipped settings; NDCG@10 / Recall@100")
        print("| queries | keyword | dense | hybrid |\n|---|---|---|---|")
        for name, m in (("English originals", en), ("Chinese as typed", zh_typed), ("Chinese, translated", shipped["metrics"])):
            print(f"| {name} | " + " | ".join(f"{m[x][part][0]:.4f} / {m[x][part][1]:.4f}" for x in ("keyword", "dense", "hybrid")) + " |")
        print("Chinese translated / English, NDCG@10: " + ", ".join(
            f"{x} {shipped['metrics'][x][part][0] / en[x][part][0]:.3f}×" for x in ("keyword", "dense", "hybrid")))
    print(f"\nend {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {load()}")
    if a.per_query:
        # Half a only, whatever --half says: reading half b query by query would be tuning on it.
        lines = ["id\tchinese\tsearched as\tenglish\tEnglish hybrid NDCG@10\tChinese hybrid NDCG@10\tloss"]
        rows_a = [(r, t) for r, t, h in zip(recs, trans, halves) if h == "a" and r["_id"] in per_query["zh"]]
        rows_a.sort(key=lambda x: per_query["zh"][x[0]["_id"]] - per_query["en"][x[0]["_id"]])
        for r, t in rows_a:
            e, z = per_query["en"][r["_id"]], per_query["zh"][r["_id"]]
            lines.append(f"{r['_id']}\t{r['text']}\t{t.text}\t{r['en']}\t{e:.4f}\t{z:.4f}\t{e - z:+.4f}")
        a.per_query.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"half a, query by query (largest loss first): {a.per_query}")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "translations": [t.to_json() for t in trans]}, ensure_ascii=False,
                                     indent=1))


if __name__ == "__main__":
    main()
