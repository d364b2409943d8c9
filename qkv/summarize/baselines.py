"""Baselines scored side by side with qkv in ``qkv eval summarize``. Each ranks the sentences of
one product; ``fill`` then takes them in rank order while they fit the same hard budget, and
prints them in review order, exactly as qkv's own summaries are checked.

- lead: the first sentence of every review, then the second of every review, ...
- random: a random order (the evaluation averages several seeds);
- TF-IDF centroid (Radev et al. 2004): cosine to the mean TF-IDF vector of the product's reviews;
- LexRank (Erkan & Radev 2004): PageRank (damping 0.85) on the graph of TF-IDF cosines ≥ 0.1;
- TextRank (Mihalcea & Tarau 2004): PageRank on word overlap / (log|Si| + log|Sj|);
- oracle: greedy choice of the sentences that most raise ROUGE-1 + ROUGE-2 against the references
  (an upper reference point; it reads the answers).
The TF-IDF weights are fitted on the product's own sentences (each sentence a document), with the
same Unicode word tokenizer (stemmed) that the ROUGE option uses.
"""

from __future__ import annotations

import math
from collections import Counter as Bag

import numpy as np

from qkv.summarize.rouge import UnicodeTokenizer, rouge

_TOK = None


def words(text: str) -> list[str]:
    global _TOK
    if _TOK is None:
        _TOK = UnicodeTokenizer(use_stemmer=True)
    return _TOK.tokenize(text)


def tfidf(sentences: list[str], extra: list[str] = ()) -> tuple[np.ndarray, np.ndarray]:
    """L2-normalised TF-IDF rows for ``sentences`` and ``extra`` texts (smooth idf over the
    sentences, as scikit-learn's default: ln((1 + N) / (1 + df)) + 1)."""
    toks = [words(s) for s in sentences]
    vocab: dict[str, int] = {}
    for t in toks:
        for w in t:
            vocab.setdefault(w, len(vocab))
    df = np.zeros(len(vocab))
    for t in toks:
        for w in set(t):
            df[vocab[w]] += 1
    idf = np.log((1 + len(toks)) / (1 + df)) + 1

    def rows(token_lists):
        m = np.zeros((len(token_lists), len(vocab)))
        for i, t in enumerate(token_lists):
            for w, c in Bag(t).items():
                if w in vocab:
                    m[i, vocab[w]] = c * idf[vocab[w]]
        m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
        return m

    return rows(toks), rows([words(e) for e in extra])


def pagerank(w: np.ndarray, damping: float = 0.85, iters: int = 200, tol: float = 1e-10) -> np.ndarray:
    """PageRank of a weighted graph (rows normalised; dangling rows jump uniformly)."""
    n = len(w)
    out = w.sum(axis=1, keepdims=True)
    p = np.where(out > 0, w / np.where(out > 0, out, 1), 1.0 / n)
    r = np.full(n, 1.0 / n)
    for _ in range(iters):
        nxt = (1 - damping) / n + damping * (r @ p)
        if np.abs(nxt - r).sum() < tol:
            return nxt
        r = nxt
    return r


def rank_lead(sentences: list[str], review_of: np.ndarray) -> np.ndarray:
    pos = np.zeros(len(sentences), dtype=int)
    seen: dict[int, int] = {}
    for i, r in enumerate(review_of):
        pos[i] = seen.get(int(r), 0)
        seen[int(r)] = pos[i] + 1
    return np.lexsort((review_of, pos))


def rank_random(sentences: list[str], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(len(sentences))


def rank_centroid(sentences: list[str], reviews: list[str]) -> np.ndarray:
    s, docs = tfidf(sentences, reviews)
    centroid = docs.mean(axis=0)
    return np.argsort(-(s @ centroid), kind="stable")


def rank_lexrank(sentences: list[str], threshold: float = 0.1) -> np.ndarray:
    s, _ = tfidf(sentences)
    sim = s @ s.T
    adj = (sim >= threshold).astype(float)
    np.fill_diagonal(adj, 0)
    return np.argsort(-pagerank(adj), kind="stable")


def rank_textrank(sentences: list[str]) -> np.ndarray:
    toks = [set(words(x)) for x in sentences]
    n = len(toks)
    w = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            if len(toks[i]) > 1 and len(toks[j]) > 1:
                w[i, j] = w[j, i] = len(toks[i] & toks[j]) / (math.log(len(toks[i])) + math.log(len(toks[j])))
    return np.argsort(-pagerank(w), kind="stable")


def fill(ranking, sentences: list[str], budget: int, counter, join) -> list[int]:
    """Sentences taken in ``ranking`` order while the joined text (in input order) fits."""
    chosen: list[int] = []
    counts = counter.count_many(sentences)
    used = 0
    for i in ranking:
        i = int(i)
        if used + counts[i] > budget + 2:  # fast pre-check; the exact count below decides
            continue
        trial = sorted([*chosen, i])
        if counter.count(join([sentences[j] for j in trial])) <= budget:
            chosen = trial
            used += counts[i]
    return chosen


def _grams(tokens: list[str]) -> tuple[Bag, Bag]:
    return Bag(tokens), Bag(zip(tokens, tokens[1:]))


def _f1(overlap: int, pred: int, ref: int) -> float:
    return 2 * overlap / (pred + ref) if overlap else 0.0


def oracle(sentences: list[str], references: list[str], budget: int, counter, join,
           rouge_tokenizer: str = "default") -> list[int]:
    """Greedy: add the unit that most raises ROUGE-1 + ROUGE-2 F1 (mean over references) while the
    joined text fits. The gain is computed on n-gram counts of the units (bigrams across a join
    are not counted, a small underestimate); the final summary is scored by rouge-score as any other."""
    from qkv.summarize.rouge import scorer

    tok = scorer(rouge_tokenizer)._tokenizer
    units = [_grams(tok.tokenize(s)) for s in sentences]
    refs = [_grams(tok.tokenize(r)) for r in references]
    counts = counter.count_many(sentences)
    chosen: list[int] = []
    uni, bi = Bag(), Bag()
    best = 0.0
    while True:
        pick, pick_gain = None, best
        used = sum(counts[j] for j in chosen)
        for i, (u1, u2) in enumerate(units):
            if i in chosen or used + counts[i] > budget + 2 or not u1:
                continue
            t1, t2 = uni + u1, bi + u2
            n1, n2 = sum(t1.values()), sum(t2.values())
            gain = sum(_f1(sum((t1 & r1).values()), n1, sum(r1.values())) +
                       _f1(sum((t2 & r2).values()), n2, sum(r2.values())) for r1, r2 in refs) / len(refs)
            if gain > pick_gain:
                trial = sorted([*chosen, i])
                if counter.count(join([sentences[j] for j in trial])) <= budget:
                    pick, pick_gain = i, gain
        if pick is None:
            return sorted(chosen)
        chosen.append(pick)
        uni, bi = uni + units[pick][0], bi + units[pick][1]
        best = pick_gain
