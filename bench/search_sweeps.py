"""The sweeps behind docs/search.md's "What was tried" tables (Home Depot dev, ../shared data).

    .venv/bin/python bench/search_sweeps.py prepare   # embed corpus + queries once, build the index,
                                                      # cache dense/keyword top-200 per query (slow)
    .venv/bin/python bench/search_sweeps.py fusion    # fusion variants on half a (tuning) and b
    .venv/bin/python bench/search_sweeps.py keyword --limit 1000   # keyword-side ablations, half a

Everything is cached under --cache (default /tmp/qkv-cache/hd). The sweeps score cached candidate
lists with the same metric functions as `qkv eval search`; the matched-terms count in the fusion
sweep is a crude suffix-stripping comparison (the shipped code counts with FTS5's own stemming).
Ablations swap qkv.text.keywords functions in this process only.
"""

from __future__ import annotations

import argparse
import json
import pickle
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "search" / "homedepot"
DEPTH = 200


def load(data: Path):
    from qkv.search.evaluate import load_qrels, load_queries

    return load_queries(data / "queries.dev.jsonl"), load_qrels(data / "qrels" / "dev.tsv")


def prepare(data: Path, cache: Path) -> None:
    import qkv
    from qkv.search.catalog import read_catalog
    from qkv.search.embedded import EmbeddedStore
    from qkv.search.store import title_hash
    from qkv.search.store import Manifest

    cache.mkdir(parents=True, exist_ok=True)
    enc = qkv.load()
    cat = read_catalog(data / "corpus.jsonl")
    Q, R = load(data)
    if not (cache / "corpus_vecs.npy").is_file():
        t = time.time()
        np.save(cache / "corpus_vecs.npy", enc.encode([r["title"] for r in cat.rows], batch_size=64))
        json.dump({"ids": [r["id"] for r in cat.rows]}, open(cache / "corpus_ids.json", "w"))
        print(f"corpus embedded in {time.time() - t:.0f}s", flush=True)
    if not (cache / "query_vecs.npy").is_file():
        np.save(cache / "query_vecs.npy", enc.encode(list(Q.values()), batch_size=64))
        json.dump(list(Q), open(cache / "query_ids.json", "w"))
    ids = json.load(open(cache / "corpus_ids.json"))["ids"]
    pos = {i: n for n, i in enumerate(ids)}
    vecs = np.load(cache / "corpus_vecs.npy")[[pos[r["id"]] for r in cat.rows]]
    idx = cache / "index"
    if not (idx / "manifest.json").is_file():
        st = EmbeddedStore.create(idx, Manifest(model=enc.name, fingerprint=enc.fingerprint(), dim=enc.dim))
        with st.writer() as w:
            w.upsert(cat.rows, vecs, [title_hash(r["title"]) for r in cat.rows])
    st = EmbeddedStore.open(idx)
    qids = json.load(open(cache / "query_ids.json"))
    qv = dict(zip(qids, np.load(cache / "query_vecs.npy")))
    out = {}
    for n, q in enumerate(qids):
        d = st.dense_search(qv[q], DEPTH)
        k = st.keyword_search(Q[q], DEPTH)
        cos = {h.id: h.score for h in d}
        extra = [h.id for h in k if h.id not in cos]
        if extra:
            cos.update(zip(extra, map(float, st.get_vectors(extra) @ qv[q])))
        out[q] = ([(h.id, h.score) for h in d], [(h.id, h.score) for h in k], cos)
        if n % 500 == 0:
            print(n, flush=True)
    pickle.dump(out, open(cache / "cands-base.pkl", "wb"))


def _metrics(rank_fn, C, Q, R, half):
    from qkv.search.evaluate import in_half, mrr, ndcg, recall

    res = {"ndcg@10": [], "mrr@10": [], "recall@100": []}
    for q in C:
        if q not in R or not in_half(q, half):
            continue
        ranking = rank_fn(q, *C[q])
        res["ndcg@10"].append(ndcg(ranking, R[q], 1.0))
        res["mrr@10"].append(mrr(ranking, R[q], 1.0))
        res["recall@100"].append(recall(ranking, R[q], 1.0))
    return {k: round(float(np.nanmean(v)), 4) for k, v in res.items()}


def fusion(data: Path, cache: Path) -> None:
    from qkv.text import keywords as T

    Q, R = load(data)
    C = pickle.load(open(cache / "cands-base.pkl", "rb"))
    import sqlite3

    gen = json.load(open(cache / "index" / "manifest.json"))["extra"]["generation"]
    db = sqlite3.connect(f"file:{cache / 'index' / gen / 'catalog.sqlite'}?mode=ro", uri=True)
    KT = dict(db.execute("SELECT id, ktext FROM products"))

    def stem(w):
        for suf in ("ing", "es", "s", "ed"):
            if len(w) > 4 and w.endswith(suf):
                return w[:-len(suf)]
        return w

    QT = {q: [stem(t) for t in T.terms(Q[q])] for q in C}

    def matched(q, pid):
        words = {stem(w) for w in KT.get(pid, "").split()}
        return max(1, sum(1 for t in QT[q] if t in words))

    def score(q, d, k, cos, alpha, depth=100, cov=0.0):
        kk = {i: s * (matched(q, i) ** cov if cov else 1) for i, s in k[:depth]}
        ids = set(dict(d[:depth])) | set(kk)
        top = max(kk.values(), default=0) or 1
        s = {i: alpha * cos[i] + (1 - alpha) * kk.get(i, 0) / top for i in ids}
        return [i for i, _ in sorted(s.items(), key=lambda x: -x[1])[:100]]

    def rrf(q, d, k, cos, w=1.0):
        s = {}
        for r, (i, _) in enumerate(d[:100], 1):
            s[i] = s.get(i, 0) + w / (60 + r)
        for r, (i, _) in enumerate(k[:100], 1):
            s[i] = s.get(i, 0) + 1 / (60 + r)
        return [i for i, _ in sorted(s.items(), key=lambda x: -x[1])[:100]]

    variants = {
        "keyword": lambda q, d, k, c: [i for i, _ in k[:100]],
        "dense": lambda q, d, k, c: [i for i, _ in d[:100]],
        "rrf k=60": rrf,
        "rrf dense weight 0.5": lambda q, d, k, c: rrf(q, d, k, c, 0.5),
        **{f"score a={a}": (lambda q, d, k, c, a=a: score(q, d, k, c, a)) for a in (0.3, 0.4, 0.5, 0.6, 0.7)},
        "keyword x matched^2": lambda q, d, k, c: [i for i, _ in sorted(
            ((i, s * matched(q, i) ** 2) for i, s in k[:100]), key=lambda x: -x[1])],
        "score a=0.5 + matched^2": lambda q, d, k, c: score(q, d, k, c, 0.5, cov=2.0),
        "score a=0.5 + matched^2, 200 candidates": lambda q, d, k, c: score(q, d, k, c, 0.5, 200, 2.0),
    }
    for name, fn in variants.items():
        print(name, "a:", _metrics(fn, C, Q, R, "a"), "b:", _metrics(fn, C, Q, R, "b"), flush=True)


def keyword(data: Path, cache: Path, limit: int | None) -> None:
    import qkv.text.keywords as T
    from qkv.search.embedded import store as E
    from qkv.search.embedded.vocabulary import Vocabulary
    from qkv.search.catalog import read_catalog
    from qkv.search.evaluate import in_half
    from qkv.search.store import Manifest

    Q, R = load(data)
    qids = [q for q in Q if q in R and in_half(q, "a")][:limit]
    cat = read_catalog(data / "corpus.jsonl")
    full_norm, full_correct, sw = T.normalize, Vocabulary.correct, T.STOPWORDS

    def build(name, norm):
        T.normalize = norm
        p = cache / f"kw-{name}"
        shutil.rmtree(p, ignore_errors=True)
        st = E.EmbeddedStore.create(p, Manifest(model="x", fingerprint="x", dim=8))
        v = np.zeros((len(cat.rows), 8), np.float32)
        v[:, 0] = 1
        with st.writer() as w:
            w.upsert(cat.rows, v, ["h"] * len(cat.rows))
        return E.EmbeddedStore.open(p)

    def run(st, label):
        C = {q: (None, [(h.id, h.score) for h in st.keyword_search(Q[q], 100)], None) for q in qids}
        empty = sum(1 for q in qids if not C[q][1])
        print(label, _metrics(lambda q, d, k, c: [i for i, _ in k], C, Q, R, "a"), "empty", empty, flush=True)

    raw = build("raw", lambda t: " ".join(re.findall(r"\w+", t.lower())))
    T.STOPWORDS, Vocabulary.correct = frozenset(), (lambda self, t: None)
    run(raw, "raw words")
    T.STOPWORDS = sw
    run(raw, "raw words + stopwords")
    norm = build("norm", full_norm)
    T.STOPWORDS = frozenset()
    run(norm, "normalised")
    T.STOPWORDS = sw
    run(norm, "normalised + stopwords")
    Vocabulary.correct = full_correct
    run(norm, "normalised + stopwords + typo fix (shipped)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["prepare", "fusion", "keyword"])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/qkv-cache/hd"))
    ap.add_argument("--limit", type=int, default=None)
    a = ap.parse_args(argv)
    if not (a.data / "corpus.jsonl").is_file():
        print(f"no Home Depot data at {a.data} (../shared/data is not part of the repository); nothing to do")
        return 0
    if a.what != "prepare" and not (a.cache / "cands-base.pkl").is_file() and a.what == "fusion":
        print(f"run `prepare` first (no cached candidates in {a.cache})")
        return 0
    {"prepare": lambda: prepare(a.data, a.cache), "fusion": lambda: fusion(a.data, a.cache),
     "keyword": lambda: keyword(a.data, a.cache, a.limit)}[a.what]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
