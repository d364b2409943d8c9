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
    .venv/bin/python bench/search_termweights.py ... --half a --scales 20 --blends 0.25 --k1 0.1 --b 0.9 --sweep \
        --no-plain --expand-top 5 --expand-gammas 1 --expand-k 50 --expand-floor 0.8 --matched-weight
        # title-advice expansion from catalog neighbours (hybrid-mw: appended terms count their weight in fusion)
    .venv/bin/python bench/search_termweights.py ... --sweep --no-plain --query-drop units   # or --query-powers 0.5,1
    .venv/bin/python bench/search_termweights.py ... --sweep --no-plain --half a2 --expand-report a1 --report-new \
        --expand-gammas 0.5,1,2 --matched-weight     # the seller's report read as expansion (a1's queries, a2 measured)

Report expansion (``report_expansions``): the judged queries of one part read as a seller's
search-term report, their words appended to the products they point to.

Expansion (``expansions``): each title's keyword document gets the words its nearest catalog
titles (the plain index's own vectors) carry in their naming parts with a high learned weight and
it lacks — ``qkv.explain.terms.advise``'s rule, read from the cached weights — each at
tf = γ · its cosine-weighted mean weight (DeepImpact-style appended terms, Mallia et al. 2021, but
from the catalog and the head alone: no generator, no judgment).

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


def neighbour_table(plain: Path, ids: list[str], k: int, work: Path):
    """The ``k`` nearest catalog titles of every title by the plain index's own vectors (cosine,
    the title itself left out): (rows [N, k] int32 into ``ids``, cosines [N, k]); cached in --work."""
    import numpy as np

    from qkv.search.store import open_store

    cache = work / f"neighbours-k{k}.npz"
    if cache.is_file():
        z = np.load(cache)
        if z["rows"].shape[0] == len(ids):
            return z["rows"], z["sims"]
    store = open_store(plain)
    try:
        vecs = np.ascontiguousarray(store.get_vectors(ids), dtype=np.float32)
    finally:
        store.close()
    rows = np.empty((len(ids), k), np.int32)
    sims = np.empty((len(ids), k), np.float32)
    t0 = time.perf_counter()
    for a in range(0, len(ids), 1024):
        s = vecs[a:a + 1024] @ vecs.T
        s[np.arange(s.shape[0]), np.arange(a, a + s.shape[0])] = -np.inf  # not itself
        top = np.argpartition(-s, k, axis=1)[:, :k]
        ts = np.take_along_axis(s, top, 1)
        order = np.argsort(-ts, axis=1, kind="stable")
        rows[a:a + 1024], sims[a:a + 1024] = np.take_along_axis(top, order, 1), np.take_along_axis(ts, order, 1)
        print(f"  neighbours: {a + s.shape[0]:,}/{len(ids):,} ({time.perf_counter() - t0:.0f}s)", flush=True)
    np.savez(cache, rows=rows, sims=sims)
    return rows, sims


def expansions(corpus: dict[str, str], weights, rows, sims, *, top: int, floor: float = 0.9, same_type: bool = True,
               min_count: int = 1, types_only: bool = False) -> dict[str, list[tuple[str, float]]]:
    """Title advice (``qkv.explain.terms.advise``) for every title from the cached head weights of
    its neighbours: the words of the nearest titles' naming parts (those at least ``floor`` × the
    nearest one's cosine, of the title's product type when some hold it) that the title lacks — no
    brand, number or stop word — each weighted by the cosine-weighted mean of its learned weight
    over those neighbours (0 where absent); the ``top`` best held by at least ``min_count`` of
    them, as keyword terms (``normalize``) the title's keyword document lacks. Only the catalog
    and the head's predictions: no judgment is read. ``types_only``: only the word each neighbour
    names its product type with (``product_type``: its other words are often what tells it apart)."""
    from collections import Counter

    from qkv.explain.terms import named_words, product_type, rank_advice
    from qkv.explain.title_terms import fold, parts
    from qkv.text.keywords import normalize

    ids = list(corpus)
    titles = [corpus[i] for i in ids]
    held = []
    df: Counter = Counter()
    first: Counter = Counter()
    for t in titles:
        fs = {fold(w) for w in t.split()}
        fs |= {p for w in list(fs) for p in parts(w)}
        fs.discard("")
        held.append(fs)
        df.update(fs)
        ws = t.split()
        if ws and fold(ws[0]):
            first[fold(ws[0])] += 1
    brand = lambda f: df[f] > 0 and first[f] >= 0.5 * df[f]  # noqa: E731  (advise's rule)
    named = []  # each title's head words that advice may offer (advise's rule), with their weights
    for i, t in zip(ids, titles):
        at, scored = 0, []
        words, ys = weights[i]
        for w, y in zip(words, ys):
            pos = t.find(w, at)
            if pos < 0:
                continue
            at = pos + len(w)
            scored.append((w, pos, y))
        out = named_words(t, scored, brand)
        if types_only:
            kind = product_type(t)
            out = [x for x in out if x[0] == kind][-1:]
        named.append(out)
    res: dict[str, list[tuple[str, float]]] = {}
    for n, (i, t) in enumerate(zip(ids, titles)):
        nb = [(int(r), float(s)) for r, s in zip(rows[n], sims[n]) if titles[r] != t]
        if not nb:
            res[i] = []
            continue
        best = nb[0][1]
        near = [(r, s) for r, s in nb if s >= floor * best or best <= 0]
        kind = product_type(t) if same_type else ""
        if kind:
            near = [(r, s) for r, s in near if kind in held[r]] or near
        ranked = [a for a in rank_advice(near, [named[r] for r, _ in near], held[n]) if a.neighbours >= min_count]
        mine = set(normalize(t).split())
        out: list[tuple[str, float]] = []
        for adv in ranked[:top]:
            for term in normalize(adv.word).split():
                if len(term) > 1 and term not in mine and all(term != x for x, _ in out):
                    out.append((term, adv.weight))
        res[i] = out
    return res


def in_part(qid: str, half: str) -> bool:
    """``qkv.search.evaluate.in_half`` and, for tuning inside half a, "a1"/"a2": half a split in
    two by the hash's second bit (every bench's split: ``search_densepool.Judge.qids`` reads it)."""
    import hashlib

    from qkv.search.evaluate import in_half

    if half in ("a1", "a2"):
        return in_half(qid, "a") and \
            hashlib.blake2b(qid.encode(), digest_size=1).digest()[0] & 2 == {"a1": 0, "a2": 2}[half]
    return in_half(qid, half)


def report_expansions(queries: dict[str, str], qrels: dict[str, dict[str, float]], half: str,
                      least: float = 2.0, corpus: dict[str, str] | None = None) -> dict[str, list[tuple[str, float]]]:
    """A seller's search-term report read as document expansion: for each product the report's
    queries (``half``'s judged pairs of grade ≥ ``least``) point to, every keyword term of those
    queries, weighted by its grade-weighted share of them (DeepCT's query term recall, Dai & Callan
    2019, read directly off the report instead of predicted; query-log expansion in the spirit of
    clickthrough anchor text). The title's own words are included (their weight is added to the
    head's) unless ``corpus`` is given: then only the words its title (``normalize``) lacks."""
    from collections import defaultdict

    from qkv.text.keywords import normalize, terms

    got: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    mass: dict[str, float] = defaultdict(float)
    for q, judged in qrels.items():
        if q not in queries or not in_part(q, half):
            continue
        words = terms(queries[q])
        for pid, s in judged.items():
            if s < least:
                continue
            g = (s - 1.0) / 2.0
            mass[pid] += g
            for w in words:
                got[pid][w] += g
    own = {pid: set(normalize(corpus[pid]).split()) for pid in got if pid in corpus} if corpus is not None else {}
    return {pid: sorted(((w, y / mass[pid]) for w, y in d.items() if w not in own.get(pid, ())), key=lambda x: -x[1])
            for pid, d in got.items()}


def stems_of(index: Path, corpus: dict[str, str], extra: dict) -> dict[str, dict[str, float]]:
    """id → {FTS5 stem: weight} of each title's appended terms whose stem none of its own keyword
    terms has (the matched-terms factor's lookup; products without appended terms are left out)."""
    from qkv.search.store import open_store
    from qkv.text.keywords import normalize

    store = open_store(index)
    try:
        own = {i: normalize(corpus[i]).split() for i, v in extra.items() if v and i in corpus}
        words = {t for v in extra.values() for t, _ in v} | {t for v in own.values() for t in v}
        stems = store.keyword.vocab.stems(words)
        out = {}
        for i, terms in own.items():
            mine = {stems.get(t) for t in terms}
            out[i] = {stems[t]: y for t, y in extra[i] if stems.get(t) and stems[t] not in mine}
        return out
    finally:
        store.close()


def expansion_text(extra: list[tuple[str, float]], gamma: float, scale: float) -> str:
    """The expansion terms appended to a keyword document: each repeated round(γ · weight · scale)
    times (the weight read as a learned weight, tf = γ · ŷ̄), none if that rounds to 0."""
    return " ".join(" ".join([t] * int(round(gamma * y * scale))) for t, y in extra if round(gamma * y * scale) > 0)


def variant_name(stem: str, scale: float, keep: bool, blend: float = 0.0, floor: float | None = None,
                 power: float = 1.0) -> str:
    """The work directory's name of a variant (the settings that change its keyword documents)."""
    name = f"{stem}-s{scale:g}-{'keep' if keep else 'drop'}"
    return name + (f"-l{blend:g}" if blend else "") + (f"-f{floor:g}" if floor is not None else "") + \
        (f"-p{power:g}" if power != 1 else "")


def variant(plain: Path, out: Path, corpus, weights, scale: float, keep: bool, blend: float = 0.0,
            floor: float | None = None, power: float = 1.0, extra=None, gamma: float = 0.0) -> Path:
    """A copy of ``plain`` whose keyword documents carry the weights (made once); ``power`` γ: the
    head's weights raised to it first (DeepCT's "sqrt" documents: γ = 0.5; an experiment of this
    bench only); ``extra`` (id → [(term, weight)], ``expansions``) appended at ``gamma``
    (``expansion_text``)."""
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
            def text(i: str, t: str) -> str:
                doc = keyword_text(t, weights[i][0], [max(y, 0.0) ** power for y in weights[i][1]],
                                   scale=scale, keep_zero=keep, blend=blend, floor=floor)
                return (doc + " " + expansion_text(extra.get(i, []), gamma, scale)).strip() if extra else doc

            w.update_fields([{"id": i, KEYWORD_TEXT: text(i, t)} for i, t in corpus.items()])
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


def query_filter(kind: str):
    """A query-side weighting to try (bench only): the keyword query without its bare numbers
    ("numbers"), its units ("units": ``qkv.explain.points.UNITS`` after ``normalize``) or both."""
    from qkv.explain.points import UNITS

    units = UNITS | {"volt", "watt"}
    drop_num = kind in ("numbers", "both")
    drop_unit = kind in ("units", "both")

    def f(text: str) -> str:
        words = text.split()
        kept = [w for w in words if not (drop_num and w.replace(".", "").replace("/", "").isdigit())
                and not (drop_unit and w in units)]
        return " ".join(kept or words)

    return f


def term_point_weights(corpus: dict[str, str], weights, index: Path) -> dict[str, float]:
    """FTS5 stem → the mean learned weight the head gives the words of that stem over every
    catalog title holding them: how often a word is the point of the titles it is in (the
    catalog and the head only)."""
    from qkv.search.store import open_store
    from qkv.text.keywords import normalize

    total: dict[str, float] = {}
    count: dict[str, int] = {}
    for i in corpus:
        for w, y in zip(*weights[i]):
            for t in normalize(w).split():
                total[t] = total.get(t, 0.0) + min(max(float(y), 0.0), 1.0)
                count[t] = count.get(t, 0) + 1
    store = open_store(index)
    try:
        stems = store.keyword.vocab.stems(total)
    finally:
        store.close()
    st_total: dict[str, float] = {}
    st_count: dict[str, int] = {}
    for t, s in total.items():
        if stems.get(t):
            st_total[stems[t]] = st_total.get(stems[t], 0.0) + s
            st_count[stems[t]] = st_count.get(stems[t], 0) + count[t]
    return {t: st_total[t] / st_count[t] for t in st_total}


def reweigh_query(idx, kw, query: str, qweights: dict[str, float], power: float):
    """The keyword candidates re-scored with each query term's BM25 share × (its point weight /
    the query's largest)^power, and their matched-terms counts weighted alike (bench only).
    Terms the head never weighed (units made of '"') count as the query's median term."""
    import numpy as np

    st = idx.store
    ids = [h.id for h in kw]
    parts = st.keyword_terms(query, ids) if ids else {}
    terms = st.keyword.query_terms(query)
    stems = st.keyword.vocab.stems(terms)
    known = [qweights[stems[t]] for t in terms if stems.get(t) in qweights]
    fill = float(np.median(known)) if known else 1.0
    qw = {t: qweights.get(stems.get(t), fill) for t in terms}
    top = max(qw.values(), default=1.0) or 1.0
    qw = {t: (max(w, 1e-3) / top) ** power for t, w in qw.items()}
    score = {i: sum(sh * qw.get(t, 1.0) for t, sh in parts.get(i, [])) for i in ids}
    matched = {i: sum(qw.get(t, 1.0) for t, _ in parts.get(i, [])) for i in ids}
    return score, matched


def fuse_matched_weight(idx, dense, kw, vector, alpha: float, query: str, expanded: dict, power: float = 2.0):
    """``Index.fuse``'s score fusion (hybrid), its matched-terms factor counting a query term the
    product matched only through an appended term (``expanded``: id → {stem: weight}) as that
    weight rather than 1 (bench only)."""
    st = idx.store
    ks = {h.id: h.score for h in kw}
    m = {}
    if kw:
        parts = st.keyword_terms(query, list(ks))
        stems = st.keyword.vocab.stems([t for p in parts.values() for t, _ in p])
        m = {i: sum(min(1.0, expanded.get(i, {}).get(stems.get(t), 1.0)) for t, _ in p) for i, p in parts.items()}
    return fuse_scores(idx, dense, ks, m, vector, alpha, power)


def fuse_scores(idx, dense, ks: dict, matched: dict, vector, alpha: float, power: float = 2.0) -> list[str]:
    """``Index.fuse``'s score fusion of the dense hits and keyword scores ``ks`` weighted by
    max(1, ``matched``)^power: the top 100 ids."""
    import numpy as np

    from qkv.search import fusion

    cos = {h.id: h.score for h in dense}
    extra = [i for i in ks if i not in cos]
    if extra:
        for pid, v in zip(extra, idx.store.get_vectors(extra) @ np.asarray(vector, np.float32)):
            cos[pid] = float(v)
    ks = {i: s * max(1.0, matched.get(i, 1.0)) ** power for i, s in ks.items()}
    return [i for i, _ in fusion.ranked(fusion.score_fusion(cos, ks, alpha), 100)]


def bm25_sweep(index: Path, enc, queries, qrels, half: str, scorings: list, qfilter=None,
               expanded: dict | None = None, qweights: dict | None = None, qpowers=()) -> list[dict]:
    """Keyword and hybrid NDCG@10 / Recall@100 of ``index`` with its keyword side scored by each of
    ``scorings`` (``bm25.Scoring``: k1, b, unit), the dense candidates found once: the very
    searches and fusion ``evaluate`` runs (keyword and dense top 200, ``Index.fuse``, α by model).
    ``qfilter``: the keyword query rewritten by it (``query_filter``); ``expanded``: also hybrid
    with the matched-terms factor of ``fuse_matched_weight`` ("hybrid-mw"); ``qweights`` (stem →
    point weight, ``term_point_weights``): also keyword and hybrid with the query's terms weighted
    by them at each of ``qpowers`` ("keyword-qw0.5", "hybrid-qw0.5", ``reweigh_query``)."""
    import numpy as np

    from qkv.search import fusion
    from qkv.search.evaluate import ndcg, recall
    from qkv.search.index import CANDIDATES, Index

    out = []
    with Index.open(index, enc) as idx:
        st = idx.store
        alpha = fusion.alpha_for(idx.manifest.model)
        qids = [q for q in queries if q in qrels and in_part(q, half)]
        plans = [idx.plan(queries[q]) for q in qids]
        if any(p.translated for p in plans):
            raise SystemExit("the BM25 sweep reads English queries only")
        vecs = idx.query_vectors([queries[q] for q in qids])
        dense = [st.dense_search(v, CANDIDATES) if p.keyword.strip() else [] for p, v in zip(plans, vecs)]
        texts = [qfilter(p.keyword) if qfilter else p.keyword for p in plans]
        for sc in scorings:
            t0 = time.perf_counter()
            st.keyword.score_with(sc)
            modes = ("keyword", "hybrid") + (("hybrid-mw",) if expanded else ()) + \
                tuple(f"{m_}-qw{x:g}" for x in (qpowers if qweights else ()) for m_ in ("keyword", "hybrid"))
            m = {mode: {"ndcg@10": [], "recall@100": []} for mode in modes}
            for q, text, v, d in zip(qids, texts, vecs, dense):
                kw = st.keyword_search(text, CANDIDATES) if text.strip() else []
                rew = {x: reweigh_query(idx, kw, text, qweights, x) for x in qpowers} if qweights else {}
                for mode in m:
                    if "-qw" in mode:
                        x = float(mode.split("-qw")[1])
                        sc_, mt = rew[x]
                        if mode.startswith("keyword"):
                            ranking = sorted(sc_, key=lambda i: -sc_[i])[:100]
                        else:
                            ranking = fuse_scores(idx, d, sc_, mt, v, alpha)
                    elif mode == "hybrid-mw":
                        ranking = fuse_matched_weight(idx, d, kw, v, alpha, text, expanded)
                    else:
                        ranking = [i for i, _, _ in idx.fuse(mode, d, kw, 100, v, "score", alpha, query=text)]
                    m[mode]["ndcg@10"].append(ndcg(ranking, qrels[q], 1.0))
                    m[mode]["recall@100"].append(recall(ranking, qrels[q], 1.0))
            r = {mode: {k: float(np.nanmean(v)) for k, v in x.items()} for mode, x in m.items()}
            out.append({"k1": sc.k1, "b": sc.b, "unit": sc.unit, **r, "queries": len(qids)})
            for mode in r:
                if "-" in mode:
                    print(f"    {mode}: {r[mode]['ndcg@10']:.4f} / {r[mode]['recall@100']:.4f}", flush=True)
            print(f"  k1 {sc.k1:g} b {sc.b:g} (unit {sc.unit:g}): keyword {r['keyword']['ndcg@10']:.4f} / "
                  f"{r['keyword']['recall@100']:.4f}, hybrid {r['hybrid']['ndcg@10']:.4f} / "
                  f"{r['hybrid']['recall@100']:.4f}" + (f", hybrid-mw {r['hybrid-mw']['ndcg@10']:.4f} / "
                                                        f"{r['hybrid-mw']['recall@100']:.4f}" if expanded else "")
                  + f" ({time.perf_counter() - t0:.0f}s)", flush=True)
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
    ap.add_argument("--half", choices=("a", "b", "all", "a1", "a2"), default="a",
                    help="the queries measured (a1/a2: half a split in two, to tune with --expand-report a1)")
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
    ap.add_argument("--expand-top", default="", help="title-advice expansion: the m best advised words appended "
                                                      "(comma-separated; 0 or none: no expansion)")
    ap.add_argument("--expand-gammas", default="1", help="γ: an appended word's tf = γ · its advised weight")
    ap.add_argument("--expand-min", default="1", help="an advised word held by at least this many neighbours")
    ap.add_argument("--expand-k", type=int, default=20, help="neighbours read (the plain index's vectors)")
    ap.add_argument("--expand-floor", type=float, default=0.9,
                    help="a neighbour read at ≥ this × the nearest's cosine")
    ap.add_argument("--expand-types", action="store_true", help="append only the neighbours' product-type words")
    ap.add_argument("--expand-report", choices=("a", "a1", "b", "all"),
                    help="instead of title advice: append the words of this part's judged queries to the products "
                         "they point to (a search-term report read as expansion; --expand-gammas, --report-least)")
    ap.add_argument("--report-least", type=float, default=2.0, help="the least grade of a report pair read")
    ap.add_argument("--report-new", action="store_true", help="append only the report words a title lacks")
    ap.add_argument("--matched-weight", action="store_true", help="also hybrid-mw: fusion's matched-terms factor "
                                                                 "counting an appended term's match as its weight")
    ap.add_argument("--query-drop", choices=("none", "numbers", "units", "both"), default="none",
                    help="keyword queries without bare numbers and/or units (bench only)")
    ap.add_argument("--query-powers", default="", help="also keyword/hybrid with query terms weighted by the "
                                                       "catalog's mean learned weight^p (comma-separated p)")
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
    part = a.half  # what the tables name
    all_queries = queries
    if part in ("a1", "a2"):  # evaluate's halves are a/b/all: the part's queries, read whole
        queries, a.half = {q: t for q, t in queries.items() if in_part(q, part)}, "all"
    if a.alphas:
        alphas = floats(a.alphas)
        runs = [("plain", a.plain)] + [(variant_name("", *v).lstrip("-"), a.work / variant_name(a.head.stem, *v))
                                       for v in variants]
        for name, idx in runs:
            for x, r in alpha_sweep(idx, enc, queries, qrels, a.half, alphas).items():
                print(f"half {part} | {name} | α {x:g} | hybrid NDCG@10 {r['ndcg@10']:.4f} | R@100 {r['recall@100']:.4f}",
                      flush=True)
        return
    weights = head_weights(a.head, corpus, a.work)
    tag = "_".join(x.replace(",", "_") for x in (a.scales, a.blends, a.floors, a.powers, a.k1, a.b) if x)
    if a.expand_top:  # the expansion's settings too, so that runs do not overwrite each other's results
        tag += (f"-x{a.expand_top}m{a.expand_min}g{a.expand_gammas}k{a.expand_k}f{a.expand_floor:g}"
                + ("t" if a.expand_types else "")).replace(",", "_")
    if a.query_drop != "none" or a.query_powers:
        tag += f"-q{a.query_drop}{a.query_powers}".replace(",", "_")
    exps = [(t, mc, g) for t in (int(x) for x in floats(a.expand_top)) for mc in (int(x) for x in floats(a.expand_min))
            for g in floats(a.expand_gammas)] if a.expand_top else [None]
    exps = [e if e and e[0] > 0 else None for e in exps]
    if a.expand_report:
        if a.expand_top:
            sys.exit("--expand-report or --expand-top: one expansion at a time")
        exps = [("report", 0, g) for g in floats(a.expand_gammas)]
        tag += f"-r{a.expand_report}{a.report_least:g}{'n' if a.report_new else ''}g{a.expand_gammas}".replace(",", "_")
    tag += f"-{part}" if part != a.half else ""
    advice: dict = {}

    def expanded_terms(e):
        if e[0] == "report":
            if "report" not in advice:
                advice["report"] = report_expansions(all_queries, qrels, a.expand_report, a.report_least,
                                                     corpus if a.report_new else None)
            return advice["report"]
        if e[:2] not in advice:
            nb_rows, nb_sims = neighbour_table(a.plain, list(corpus), a.expand_k, a.work)
            advice[e[:2]] = expansions(corpus, weights, nb_rows, nb_sims, top=e[0], min_count=e[1],
                                       floor=a.expand_floor, types_only=a.expand_types)
        return advice[e[:2]]

    def expand_name(e) -> str:
        if e and e[0] == "report":
            return f"-r{a.expand_report}{a.report_least:g}{'n' if a.report_new else ''}g{e[2]:g}"
        return "" if not e else f"-x{e[0]}m{e[1]}g{e[2]:g}" + (f"k{a.expand_k}" if a.expand_k != 20 else "") + \
            (f"f{a.expand_floor:g}" if a.expand_floor != 0.9 else "") + ("t" if a.expand_types else "")

    if a.sweep:  # k1 × b on each variant (tf = repeats / scale) and on the plain index (raw counts)
        grid = [(k1, b) for k1 in k1s for b in bs]
        rows = []
        if not a.no_plain:
            print("plain (raw counts):", flush=True)
            rows += [{"index": "plain", **r} for r in bm25_sweep(a.plain, enc, queries, qrels, a.half,
                                                                  [Scoring(k1, b) for k1, b in grid])]
        qf = query_filter(a.query_drop) if a.query_drop != "none" else None
        for v in variants:
            for e in exps:
                name = variant_name("", *v).lstrip("-") + expand_name(e) + (f" q-{a.query_drop}" if qf else "")
                extra = expanded_terms(e) if e else None
                idx = variant(a.plain, a.work / (variant_name(a.head.stem, *v) + expand_name(e)), corpus, weights, *v,
                              extra=extra, gamma=e[2] if e else 0.0)
                print(f"{name}:", flush=True)
                mw = None
                if e and a.matched_weight:
                    mw = {i: {s_: y * e[2] for s_, y in d.items()} for i, d in stems_of(idx, corpus, extra).items()}
                qw = term_point_weights(corpus, weights, idx) if a.query_powers else None
                rows += [{"index": name, **r} for r in bm25_sweep(idx, enc, queries, qrels, a.half,
                                                                   [Scoring(k1, b, v[0]) for k1, b in grid], qf, mw,
                                                                   qw, floats(a.query_powers))]
        print(f"\nhalf {part} ({rows[0]['queries']:,} queries, {len(corpus):,} products), head {a.head}")
        print("| keyword side | k1 | b | keyword NDCG@10 | keyword R@100 | hybrid NDCG@10 | hybrid R@100 |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['index']} | {r['k1']:g} | {r['b']:g} | {r['keyword']['ndcg@10']:.4f} | "
                  f"{r['keyword']['recall@100']:.4f} | {r['hybrid']['ndcg@10']:.4f} | {r['hybrid']['recall@100']:.4f} |")
        (a.work / f"sweep-{a.head.stem}-half-{part}-{tag}.json").write_text(json.dumps(rows, indent=1))
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
    print(f"\nhalf {part} ({rows[0][1]['queries']:,} queries, {len(corpus):,} products), head {a.head}")
    print("| keyword side | keyword NDCG@10 | keyword R@100 | hybrid NDCG@10 | hybrid R@100 |")
    print("|---|---|---|---|---|")
    for name, r in rows:
        print(f"| {name} | {r['keyword']['ndcg@10']:.4f} | {r['keyword']['recall@100']:.4f} | "
              f"{r['hybrid']['ndcg@10']:.4f} | {r['hybrid']['recall@100']:.4f} |")
    (a.work / f"results-{a.head.stem}-half-{part}-{tag}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
