"""Learned term weights on the keyword side (DeepCT-Index, ``qkv index --term-weights``) measured on
Home Depot dev, full corpus (../shared data): keyword and hybrid NDCG@10 / Recall@100, plain against
weighted, for several scales and with words weighted ~0 kept once or left out.

    qkv terms train --model minilm --half a --corpus $H/corpus.jsonl --queries $H/queries.dev.jsonl \\
        --qrels $H/qrels/dev.tsv --out /tmp/deepct/head-a.npz
    qkv index $H/corpus.jsonl --index /tmp/deepct/plain --model minilm
    .venv/bin/python bench/search_termweights.py --plain /tmp/deepct/plain --head /tmp/deepct/head-a.npz \\
        --half a --scales 5,10,20 --keep both          # tune on half a's queries
    .venv/bin/python bench/search_termweights.py ... --half b --scales 10 --no-plain   # report half b
    .venv/bin/python bench/search_termweights.py ... --half a --scales 10 --alphas 0.3,0.5,0.7   # fusion weight

The head's weights of every title are computed once (one float32 encoder pass, cached in --work as
JSON lines, resumable); each variant is a copy of the plain index whose keyword documents are
rewritten by the store's own writer (``KEYWORD_TEXT`` rows through ``update_fields``), so the dense
side is the plain index's very vectors and only the keyword side differs. The keyword documents
are made by ``qkv.search.termweights.keyword_text``, which ``qkv index --term-weights`` uses; a
full `qkv index --term-weights` build gives the same keyword side (docs/search.md checks one).
Metrics by ``qkv.search.evaluate.evaluate`` (what `qkv eval search` runs).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "search" / "homedepot"


def head_weights(head_path: Path, corpus: dict[str, str], work: Path) -> dict[str, tuple[list[str], list[float]]]:
    """id → (the head's words, ŷ) for every title, cached per head file (resumable by batch)."""
    from qkv.explain.terms import TermHead
    from qkv.model import shared_encoder
    from qkv.search.termweights import file_digest

    cache = work / f"weights-{file_digest(head_path)[:12]}.jsonl"
    done: dict[str, tuple[list[str], list[float]]] = {}
    if cache.is_file():
        for line in cache.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                done[r["id"]] = (r["words"], r["w"])
    todo = [i for i in corpus if i not in done]
    if todo:
        head = TermHead.load(head_path)
        enc = shared_encoder(head.model)
        catalog = None
        if head.needs_catalog:  # a head trained with catalog features reads the whole catalog, as `qkv index` gives it
            from qkv.explain.points import PointsCatalog

            print(f"  embedding the catalog for the head's catalog features ({len(corpus):,} titles)", flush=True)
            catalog = PointsCatalog.build(list(corpus.values()), enc)
        t0 = time.perf_counter()
        with open(cache, "a", encoding="utf-8") as f:
            for a in range(0, len(todo), 256):
                ids = todo[a:a + 256]
                for i, (words, ys) in zip(ids, head.title_scores(enc, [corpus[i] for i in ids], catalog=catalog)):
                    done[i] = (words, [float(y) for y in ys])
                    f.write(json.dumps({"id": i, "words": words, "w": done[i][1]}) + "\n")
                f.flush()
                n = a + len(ids)
                print(f"  head weights: {n:,}/{len(todo):,} titles, {n / (time.perf_counter() - t0):.0f}/s", flush=True)
    return done


def variant_name(stem: str, scale: float, keep: bool, blend: float = 0.0, floor: float | None = None,
                 power: float = 1.0) -> str:
    """The work directory's name of a variant (the settings that change its keyword documents)."""
    name = f"{stem}-s{scale:g}-{'keep' if keep else 'drop'}"
    return name + (f"-l{blend:g}" if blend else "") + (f"-f{floor:g}" if floor is not None else "") + \
        (f"-p{power:g}" if power != 1 else "")


def variant(plain: Path, out: Path, corpus, weights, scale: float, keep: bool, blend: float = 0.0,
            floor: float | None = None, power: float = 1.0) -> Path:
    """A copy of ``plain`` whose keyword documents carry the weights (made once); ``power`` γ: the
    head's weights raised to it first (DeepCT's "sqrt" documents: γ = 0.5; an experiment of this
    bench only)."""
    from qkv.search.store import KEYWORD_TEXT, open_store
    from qkv.search.termweights import keyword_text

    if (out / "manifest.json").is_file():
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(plain, tmp, ignore=shutil.ignore_patterns(".lock", ".tmp-*"))
    store = open_store(tmp)
    try:
        with store.writer() as w:
            w.update_fields([{"id": i, KEYWORD_TEXT: keyword_text(t, weights[i][0],
                                                                  [max(y, 0.0) ** power for y in weights[i][1]],
                                                                  scale=scale, keep_zero=keep, blend=blend, floor=floor)}
                             for i, t in corpus.items()])
    finally:
        store.close()
    tmp.rename(out)
    return out


def record(index: Path, head: Path, **settings) -> None:
    """Write into ``index``'s manifest the weighting its keyword documents were made with and the
    BM25 to score them with, as `qkv index --term-weights` records it (so `qkv eval search --index`
    scores the variant as a built index would)."""
    from dataclasses import replace

    from qkv.search.store import read_manifest, write_manifest
    from qkv.search.termweights import MANIFEST_KEY, TermWeighting, file_digest

    m = read_manifest(index)
    # the head is not loaded: the weights come from the bench's cache (a head of an older format,
    # which `qkv index` would refuse, can still be measured); the manifest names the file that made them
    tw = TermWeighting(str(head.resolve()), file_digest(head), m.model, **settings)
    write_manifest(index, replace(m, extra={**m.extra, MANIFEST_KEY: tw.to_json()}))


def measure(index: Path, enc, queries, qrels, half: str, scoring=None) -> dict:
    """`qkv eval search`'s figures (``evaluate``) of ``index``, its keyword side scored by
    ``scoring`` (a ``bm25.Scoring``; None: as its manifest says)."""
    from qkv.search.evaluate import evaluate
    from qkv.search.index import Index

    with Index.open(index, enc) as idx:
        if scoring is not None:
            idx.store.keyword.score_with(scoring)
        res = evaluate(idx, queries, qrels, half=half)
    return {m: {k: res.metrics[m][k] for k in ("ndcg@10", "recall@100")} for m in ("keyword", "hybrid", "dense")} | \
        {"queries": res.queries}


def bm25_sweep(index: Path, enc, queries, qrels, half: str, scorings: list) -> list[dict]:
    """Keyword and hybrid NDCG@10 / Recall@100 of ``index`` with its keyword side scored by each of
    ``scorings`` (``bm25.Scoring``: k1, b, unit), the dense candidates found once: the very
    searches and fusion ``evaluate`` runs (keyword and dense top 200, ``Index.fuse``, α by model)."""
    import numpy as np

    from qkv.search import fusion
    from qkv.search.evaluate import in_half, ndcg, recall
    from qkv.search.index import CANDIDATES, Index

    out = []
    with Index.open(index, enc) as idx:
        st = idx.store
        alpha = fusion.alpha_for(idx.manifest.model)
        qids = [q for q in queries if q in qrels and in_half(q, half)]
        plans = [idx.plan(queries[q]) for q in qids]
        if any(p.translated for p in plans):
            raise SystemExit("the BM25 sweep reads English queries only")
        vecs = idx.query_vectors([queries[q] for q in qids])
        dense = [st.dense_search(v, CANDIDATES) if p.keyword.strip() else [] for p, v in zip(plans, vecs)]
        for sc in scorings:
            t0 = time.perf_counter()
            st.keyword.score_with(sc)
            m = {mode: {"ndcg@10": [], "recall@100": []} for mode in ("keyword", "hybrid")}
            for q, p, v, d in zip(qids, plans, vecs, dense):
                kw = st.keyword_search(p.keyword, CANDIDATES) if p.keyword.strip() else []
                for mode in m:
                    ranking = [i for i, _, _ in idx.fuse(mode, d, kw, 100, v, "score", alpha, query=p.keyword)]
                    m[mode]["ndcg@10"].append(ndcg(ranking, qrels[q], 1.0))
                    m[mode]["recall@100"].append(recall(ranking, qrels[q], 1.0))
            r = {mode: {k: float(np.nanmean(v)) for k, v in x.items()} for mode, x in m.items()}
            out.append({"k1": sc.k1, "b": sc.b, "unit": sc.unit, **r, "queries": len(qids)})
            print(f"  k1 {sc.k1:g} b {sc.b:g} (unit {sc.unit:g}): keyword {r['keyword']['ndcg@10']:.4f} / "
                  f"{r['keyword']['recall@100']:.4f}, hybrid {r['hybrid']['ndcg@10']:.4f} / "
                  f"{r['hybrid']['recall@100']:.4f} ({time.perf_counter() - t0:.0f}s)", flush=True)
    return out


def alpha_sweep(index: Path, enc, queries, qrels, half: str, alphas: list[float]) -> dict[float, dict]:
    """Hybrid NDCG@10 / Recall@100 at each dense weight α, from one candidate pass per query (the
    fusion ``qkv.search.evaluate.evaluate`` runs: ``Index.fuse``, 200 candidates a side)."""
    import numpy as np

    from qkv.search.evaluate import in_half, ndcg, recall
    from qkv.search.index import CANDIDATES, Index

    per = {x: ([], []) for x in alphas}
    with Index.open(index, enc) as idx:
        qids = [q for q in queries if q in qrels and in_half(q, half)]
        plans = [idx.plan(queries[q]) for q in qids]
        if any(p.translated for p in plans):
            raise SystemExit("the α sweep reads English queries only")
        vecs = idx.query_vectors([queries[q] for q in qids])
        for q, p, v in zip(qids, plans, vecs):
            dense = idx.store.dense_search(v, CANDIDATES)
            kw = idx.store.keyword_search(p.keyword, CANDIDATES)
            for x in alphas:
                ranking = [d for d, _, _ in idx.fuse("hybrid", dense, kw, 100, v, "score", x, query=p.keyword)]
                per[x][0].append(ndcg(ranking, qrels[q], 1.0))
                per[x][1].append(recall(ranking, qrels[q], 1.0))
    return {x: {"ndcg@10": float(np.nanmean(n)), "recall@100": float(np.nanmean(r))} for x, (n, r) in per.items()}


def floats(text: str | None) -> list[float]:
    return [float(x) for x in (text or "").split(",") if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--plain", type=Path, required=True, help="a plain full-corpus index (`qkv index`)")
    ap.add_argument("--head", type=Path, required=True, help="a term head (`qkv terms train`)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/deepct/variants"))
    ap.add_argument("--half", choices=("a", "b", "all"), default="a")
    ap.add_argument("--scales", default="10", help="repeats of a word of weight 1 (comma-separated)")
    ap.add_argument("--keep", choices=("yes", "no", "both"), default="yes")
    ap.add_argument("--blends", default="0", help="λ in tf = λ · count + ŷ (comma-separated)")
    ap.add_argument("--powers", default="1", help="γ: the weights raised to it (comma-separated; bench only)")
    ap.add_argument("--floors", default="", help="the least weight of a kept word (comma-separated; default one repeat)")
    ap.add_argument("--k1", default="", help="BM25 k1 over the real-valued weights (comma-separated; none: FTS5's "
                                             "k1/b over the repeat counts)")
    ap.add_argument("--b", default="", help="BM25 b, with --k1 (comma-separated)")
    ap.add_argument("--sweep", action="store_true", help="every --k1 × --b on each variant (and on the plain index "
                                                         "unless --no-plain), the dense side searched once")
    ap.add_argument("--no-plain", action="store_true", help="leave out the plain index (measured already)")
    ap.add_argument("--alphas", help="instead: hybrid at these dense weights (e.g. 0.3,0.5,0.7) on the plain index "
                                     "and the --scales variants (made already, with --keep)")
    a = ap.parse_args()

    from qkv.model import shared_encoder
    from qkv.search.catalog import read_catalog
    from qkv.search.embedded.bm25 import Scoring
    from qkv.search.evaluate import load_qrels, load_queries
    from qkv.search.store import read_manifest

    if not (a.data / "corpus.jsonl").is_file():
        sys.exit(f"no Home Depot data at {a.data} (../shared/data/search/homedepot)")
    a.work.mkdir(parents=True, exist_ok=True)
    corpus = {r["id"]: r["title"] for r in read_catalog(a.data / "corpus.jsonl").rows}  # as `qkv index` reads it
    queries, qrels = load_queries(a.data / "queries.dev.jsonl"), load_qrels(a.data / "qrels" / "dev.tsv")
    enc = shared_encoder(read_manifest(a.plain).model)
    keeps = {"yes": [True], "no": [False], "both": [True, False]}[a.keep]
    floor_list = floats(a.floors) or [None]
    variants = [(s, k, lam, f, g) for s in floats(a.scales) for k in keeps for lam in floats(a.blends) or [0.0]
                for f in (floor_list if k else [None]) for g in floats(a.powers) or [1.0]]
    k1s, bs = floats(a.k1), floats(a.b)
    if len(k1s) != len(bs) and not a.sweep:
        sys.exit("--k1 and --b: one value each (or --sweep for a grid)")
    if a.alphas:
        alphas = floats(a.alphas)
        runs = [("plain", a.plain)] + [(variant_name("", *v).lstrip("-"), a.work / variant_name(a.head.stem, *v))
                                       for v in variants]
        for name, idx in runs:
            for x, r in alpha_sweep(idx, enc, queries, qrels, a.half, alphas).items():
                print(f"half {a.half} | {name} | α {x:g} | hybrid NDCG@10 {r['ndcg@10']:.4f} | R@100 {r['recall@100']:.4f}",
                      flush=True)
        return
    weights = head_weights(a.head, corpus, a.work)
    tag = "_".join(x.replace(",", "_") for x in (a.scales, a.blends, a.floors, a.powers, a.k1, a.b) if x)
    if a.sweep:  # k1 × b on each variant (tf = repeats / scale) and on the plain index (raw counts)
        grid = [(k1, b) for k1 in k1s for b in bs]
        rows = []
        if not a.no_plain:
            print("plain (raw counts):", flush=True)
            rows += [{"index": "plain", **r} for r in bm25_sweep(a.plain, enc, queries, qrels, a.half,
                                                                  [Scoring(k1, b) for k1, b in grid])]
        for v in variants:
            name = variant_name("", *v).lstrip("-")
            idx = variant(a.plain, a.work / variant_name(a.head.stem, *v), corpus, weights, *v)
            print(f"{name}:", flush=True)
            rows += [{"index": name, **r} for r in bm25_sweep(idx, enc, queries, qrels, a.half,
                                                               [Scoring(k1, b, v[0]) for k1, b in grid])]
        print(f"\nhalf {a.half} ({rows[0]['queries']:,} queries, {len(corpus):,} products), head {a.head}")
        print("| keyword side | k1 | b | keyword NDCG@10 | keyword R@100 | hybrid NDCG@10 | hybrid R@100 |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['index']} | {r['k1']:g} | {r['b']:g} | {r['keyword']['ndcg@10']:.4f} | "
                  f"{r['keyword']['recall@100']:.4f} | {r['hybrid']['ndcg@10']:.4f} | {r['hybrid']['recall@100']:.4f} |")
        (a.work / f"sweep-{a.head.stem}-half-{a.half}-{tag}.json").write_text(json.dumps(rows, indent=1))
        return
    rows = [] if a.no_plain else [("plain", measure(a.plain, enc, queries, qrels, a.half))]
    if rows:
        print(f"plain: {json.dumps(rows[-1][1])}", flush=True)
    for v in variants:  # --scales '': the plain index only
        for k1, b in (list(zip(k1s, bs)) or [(None, None)]):
            name = variant_name("", *v).lstrip("-") + (f", k1 {k1:g}, b {b:g}" if k1 is not None else "")
            t0 = time.perf_counter()
            idx = variant(a.plain, a.work / variant_name(a.head.stem, *v), corpus, weights, *v)
            # scored as its manifest says, recorded as `qkv index --term-weights` would
            if v[4] != 1:
                sys.exit("--powers is a bench experiment: `qkv index` has no such setting to record")
            record(idx, a.head, scale=v[0], keep_zero=v[1], blend=v[2], floor=v[3], k1=k1, b=b)
            rows.append((name, measure(idx, enc, queries, qrels, a.half)))
            print(f"{name}: {json.dumps(rows[-1][1])} ({time.perf_counter() - t0:.0f}s)", flush=True)
    if not rows:
        return
    print(f"\nhalf {a.half} ({rows[0][1]['queries']:,} queries, {len(corpus):,} products), head {a.head}")
    print("| keyword side | keyword NDCG@10 | keyword R@100 | hybrid NDCG@10 | hybrid R@100 |")
    print("|---|---|---|---|---|")
    for name, r in rows:
        print(f"| {name} | {r['keyword']['ndcg@10']:.4f} | {r['keyword']['recall@100']:.4f} | "
              f"{r['hybrid']['ndcg@10']:.4f} | {r['hybrid']['recall@100']:.4f} |")
    (a.work / f"results-{a.head.stem}-half-{a.half}-{tag}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
