"""Chinese keyword search: which index terms for Han text? (docs/search.md, "Chinese keyword search")

    .venv/bin/python bench/zh_keyword.py [--data ../shared/data/attributes/taobao_zh] [--json out.json]

A Chinese catalog made from the Taobao titles (train.txt + dev.txt: one character and its BIO tag
per line, titles separated by blank lines; 6,998 titles). Queries come from the titles' own labels:

* type — each distinct product-type span (HCCX, e.g. 亲子鞋); relevant: the titles labelled with
  that product type;
* brand+type — each distinct (brand HPPX, type HCCX) pair of one title, typed "brand type";
  relevant: titles labelled with both;
* type, one character — the one-character product types (鞋, 包), relevant as above;
* type, traditional — the type queries written in traditional characters (OpenCC s2t), against
  the simplified catalog, searched with and without folding.

Each Han term scheme of ``qkv.text.zh.han_terms`` tokenises titles and queries alike (the rest of the
text goes through ``qkv.text.keywords.normalize`` as in the index); ranking is OR-BM25 (k1 1.2, b 0.75,
FTS5's) and, as the shipped search does, BM25 × (query terms matched)². Binary gains; MRR@10,
NDCG@10, Recall@100; plus time to tokenise the catalog. Reads ../shared data; says so when absent.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "attributes" / "taobao_zh"
MAX_QUERIES = 1500  # per query set, a deterministic sample (by hash) when there are more


def read_titles(path: Path) -> list[tuple[str, list[tuple[str, str]]]]:
    """(title, [(label, span text)]) per title of a character-BIO file."""
    out, chars, tags = [], [], []

    def flush():
        if chars:
            spans, cur = [], None
            for ch, tag in zip(chars, tags):
                if tag.startswith("B-") or (tag.startswith("I-") and (cur is None or cur[0] != tag[2:])):
                    cur = [tag[2:], ch]
                    spans.append(cur)
                elif tag.startswith("I-"):
                    cur[1] += ch
                else:
                    cur = None
            out.append(("".join(chars), [(lab, txt) for lab, txt in spans]))
        chars.clear()
        tags.clear()

    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            flush()
            continue
        ch, _, tag = line.rpartition(" ")
        chars.append(ch if ch else " ")
        tags.append(tag)
    flush()
    return out


def tokens(text: str, scheme: str, fold: bool = True, query: bool = False) -> list[str]:
    from qkv.text.keywords import normalize
    from qkv.text import zh

    t = zh.fold(text) if fold else text
    out, at = [], 0
    for m in zh.HAN_RUN.finditer(t):
        out += normalize(t[at:m.start()]).split()
        out += zh.han_terms(m.group(0), scheme, query)
        at = m.end()
    out += normalize(t[at:]).split()
    return out


class BM25:
    K1, B = 1.2, 0.75

    def __init__(self, docs: list[list[str]]):
        self.n = len(docs)
        self.dl = np.array([len(d) for d in docs], np.float64)
        self.avgdl = float(self.dl.mean())
        post: dict[str, dict[int, int]] = defaultdict(dict)
        for i, d in enumerate(docs):
            for t, c in Counter(d).items():
                post[t][i] = c
        self.post = {t: (np.fromiter(p.keys(), np.int64), np.fromiter(p.values(), np.float64)) for t, p in post.items()}

    def search(self, terms: list[str], k: int, coverage: bool) -> list[int]:
        acc = np.zeros(self.n)
        hits = np.zeros(self.n)
        for t in dict.fromkeys(terms):
            if t not in self.post:
                continue
            rows, tf = self.post[t]
            df = len(rows)
            idf = max(math.log((self.n - df + 0.5) / (df + 0.5)), 1e-6)
            acc[rows] += idf * tf * (self.K1 + 1) / (tf + self.K1 * (1 - self.B + self.B * self.dl[rows] / self.avgdl))
            hits[rows] += 1
        if coverage:
            acc *= np.maximum(1, hits) ** 2
        nz = np.flatnonzero(acc)
        order = nz[np.lexsort((nz, -acc[nz]))]
        return order[:k].tolist()


def metrics(ranking: list[int], rel: set[int]) -> tuple[float, float, float]:
    mrr = next((1 / (i + 1) for i, d in enumerate(ranking[:10]) if d in rel), 0.0)
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranking[:10]) if d in rel)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(10, len(rel))))
    return mrr, dcg / idcg, len(rel & set(ranking[:100])) / len(rel)


def sample(items: list, n: int) -> list:
    if len(items) <= n:
        return items
    key = lambda q: hashlib.blake2b(repr(q).encode(), digest_size=8).digest()
    return sorted(items, key=key)[:n]


def query_sets(titles):
    by_type, by_brand_type, by_char = defaultdict(set), defaultdict(set), defaultdict(set)
    for i, (_, spans) in enumerate(titles):
        types = {t for lab, t in spans if lab == "HCCX" and len(t) >= 2}
        for t in {t for lab, t in spans if lab == "HCCX" and len(t) == 1}:
            by_char[t].add(i)
        brands = {t for lab, t in spans if lab == "HPPX" and len(t) >= 2}
        for t in types:
            by_type[t].add(i)
        for b in brands:
            for t in types:
                by_brand_type[(b, t)].add(i)
    typ = sample(sorted(by_type.items()), MAX_QUERIES)
    bt = sample(sorted(by_brand_type.items()), MAX_QUERIES)
    return ([(t, rel) for t, rel in typ], [(f"{b} {t}", rel) for (b, t), rel in bt], sorted(by_char.items()))


def main() -> None:
    from qkv.text import zh

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--schemes", default=",".join(zh.SCHEMES))
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    files = [a.data / "train.txt", a.data / "dev.txt"]
    if not all(f.is_file() for f in files):
        sys.exit(f"no Taobao data at {a.data} (expected train.txt and dev.txt); pass --data")
    titles = [t for f in files for t in read_titles(f)]
    typ, bt, one = query_sets(titles)
    import opencc

    s2t = opencc.OpenCC("s2t")
    trad = [(s2t.convert(q), rel) for q, rel in typ]
    changed = sum(q != o for (q, _), (o, _) in zip(trad, typ))
    print(f"{len(titles)} titles; queries: type {len(typ)}, brand+type {len(bt)}, "
          f"traditional {len(trad)} ({changed} differ from the simplified), one-character type {len(one)}")
    rows = []
    for scheme in a.schemes.split(","):
        zh._han_terms.cache_clear()
        t0 = time.process_time()
        docs = [tokens(t, scheme) for t, _ in titles]
        tok_s = time.process_time() - t0
        bm = BM25(docs)
        runs = [("type", typ, True), ("brand+type", bt, True), ("type, one character", one, True), ("type, traditional", trad, True),
                ("type, traditional, no fold", trad, False)]
        for name, qs, fold in runs:
            for cov in (False, True):
                m = np.array([metrics(bm.search(tokens(q, scheme, fold, query=True), 100, cov), rel) for q, rel in qs])
                row = {"scheme": scheme, "queries": name, "coverage": cov, "mrr@10": m[:, 0].mean(),
                       "ndcg@10": m[:, 1].mean(), "recall@100": m[:, 2].mean(), "n": len(qs),
                       "terms_per_title": float(np.mean([len(d) for d in docs])), "tokenise_s": tok_s}
                rows.append(row)
                print(f"{scheme:22s} {name:27s} {'×cov²' if cov else 'BM25 '}  MRR@10 {row['mrr@10']:.4f}  "
                      f"NDCG@10 {row['ndcg@10']:.4f}  R@100 {row['recall@100']:.4f}", flush=True)
        print(f"{scheme:22s} {np.mean([len(d) for d in docs]):.1f} terms/title, tokenised in {tok_s:.2f} s CPU")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
