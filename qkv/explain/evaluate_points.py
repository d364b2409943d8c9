"""Do a title's selling points match what shoppers search? Average precision against judged queries.

The protocol (issue 28). Judged search data (BEIR: corpus, queries, qrels) says which title words
shoppers type. For each product that judged-relevant queries point to (judgment ≥ 2.5 of 3), its
*shopper words* are the title's content words that at least one of those queries contains:

* words are the title's whitespace-separated tokens with edge punctuation stripped, lower-cased,
  a possessive "'s" and a plural "s" folded ("Tiles" → "tile", not "glass");
* a hyphenated or slashed word counts if the whole word or one of its parts is a query word (the
  query's words are split the same way, so "strong-tie" in a query finds "Strong-Tie" and "Tie");
* stop words (``STOP``) are no content words.

A ranking of the title's *distinct* content words is scored by average precision of the shopper
words. Titles with fewer than 3 distinct content words, or where all or none are shopper words,
are skipped (AP says nothing there); the score is the mean over the remaining titles.

A ranker is any function title → one score per distinct content word (``TitleWords.words``);
higher ranks first and ties keep title order. ``from_spans`` turns per-span scores (qkv's words
with character offsets) into that shape.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from qkv.errors import InputError
from qkv.explain.title_terms import STOP, TitleWords, fold, parts, query_terms, title_words  # noqa: F401

RELEVANT = 2.5  # mean judgment (1–3) at which a query counts as the shopper's words for a product
MIN_WORDS = 3


def shopper_mask(tw: TitleWords, queries: Sequence[str]) -> np.ndarray:
    """True for each distinct content word that one of ``queries`` contains (see the module doc)."""
    terms: set[str] = set()
    for q in queries:
        terms |= query_terms(q)
    return np.array([w in terms or bool(parts(w) & terms) for w in tw.words], dtype=bool)


def average_precision(scores: np.ndarray, relevant: np.ndarray) -> float:
    """AP of ``relevant`` in the order of ``scores`` (higher first; ties keep the given order)."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    rel = np.asarray(relevant, dtype=bool)[order]
    if not rel.any():
        return 0.0
    hits = np.cumsum(rel)
    return float((hits[rel] / (np.flatnonzero(rel) + 1)).mean())


def from_spans(tw: TitleWords, starts: Sequence[int], ends: Sequence[int], scores: Sequence[float]) -> np.ndarray:
    """Scores of words with character spans (e.g. a ``SellingPoints``) → one per distinct content
    word: the largest score of a span overlapping any of its occurrences (−inf when none does)."""
    out = np.full(len(tw.words), -np.inf)
    for i, occ in enumerate(tw.spans):
        for a, b in occ:
            for s, e, v in zip(starts, ends, scores):
                if s < b and e > a:
                    out[i] = max(out[i], float(v))
    return out


@dataclass(frozen=True)
class JudgedTitle:
    id: str
    words: TitleWords
    shopper: np.ndarray  # bool per distinct content word
    queries: tuple[str, ...]


@dataclass
class Judged:
    """The titles the protocol scores, and the catalog statistics the baselines need."""
    titles: list[JudgedTitle]
    df: Counter  # catalog document frequency of each folded content word
    n_catalog: int
    skipped: dict[str, int] = field(default_factory=dict)


def judged_titles(corpus: Mapping[str, str], queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, float]],
                  *, relevant: float = RELEVANT) -> Judged:
    """Apply the protocol's selection: products with judged-relevant queries, minus the skip rules.
    ``corpus``: id → title."""
    by_product: dict[str, list[str]] = {}
    for qid, judged in qrels.items():
        if qid not in queries:
            continue
        for pid, score in judged.items():
            if score >= relevant and pid in corpus:
                by_product.setdefault(pid, []).append(queries[qid])
    df: Counter = Counter()
    for title in corpus.values():
        df.update(title_words(title).words)
    out, skipped = [], Counter()
    for pid in sorted(by_product):
        tw = title_words(corpus[pid])
        if len(tw.words) < MIN_WORDS:
            skipped["fewer than 3 content words"] += 1
            continue
        mask = shopper_mask(tw, by_product[pid])
        if mask.all() or not mask.any():
            skipped["all or none shopper words"] += 1
            continue
        out.append(JudgedTitle(pid, tw, mask, tuple(by_product[pid])))
    return Judged(out, df, len(corpus), dict(skipped))


Ranker = Callable[[TitleWords], np.ndarray]


def baselines(judged: Judged) -> dict[str, Ranker]:
    """The five reference orders of the issue (random is handled by ``evaluate``)."""
    df = judged.df
    return {
        "IDF over the catalog (rare words first)": lambda tw: np.array([-df[w] for w in tw.words], dtype=float),
        "DF (common catalog words first)": lambda tw: np.array([df[w] for w in tw.words], dtype=float),
        "title order": lambda tw: -np.arange(len(tw.words), dtype=float),
        "reverse title order": lambda tw: _last_position(tw),
    }


def _last_position(tw: TitleWords) -> np.ndarray:
    """Later words first; a repeated word by its last occurrence."""
    return np.array([max(a for a, _ in occ) for occ in tw.spans], dtype=float)


@dataclass(frozen=True)
class PointsResult:
    rows: list[tuple[str, float]]  # (ranking, mean AP)
    titles: int
    eligible: int
    skipped: dict[str, int]
    random_seeds: int
    random_range: tuple[float, float]
    sample_seed: int
    # the first row against each other, title by title: (ranking, first's AP − its AP, SE, p)
    against: list[tuple[str, float, float, float]] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"protocol": "selling points: AP of shopper words over a title's distinct content words",
                "titles": self.titles, "eligible": self.eligible, "skipped": self.skipped,
                "random_seeds": self.random_seeds, "sample_seed": self.sample_seed,
                "random_range": [round(x, 4) for x in self.random_range],
                "rows": [{"ranking": n, "ap": round(v, 4)} for n, v in self.rows],
                "first_against": {"ranking": self.rows[0][0] if self.rows else None,
                                  "paired": "per title; p: sign-flip randomization test (qkv.search.significance)",
                                  "rows": [{"ranking": n, "gain": round(d, 4), "se": round(se, 4), "p": round(p, 4)}
                                           for n, d, se, p in self.against]}}


def sample(judged: Judged, n: int | None, seed: int = 0) -> list[JudgedTitle]:
    """``n`` titles drawn at random (``seed``) from the eligible ones, in id order; all when n is None."""
    if n is None or n >= len(judged.titles):
        return judged.titles
    if n < 1:
        raise InputError(f"--sample must be at least 1 (got {n})")
    pick = np.random.default_rng(seed).choice(len(judged.titles), size=n, replace=False)
    return [judged.titles[i] for i in sorted(pick)]


def evaluate(judged: Judged, rankers: Mapping[str, Ranker], *, n: int | None = None, seed: int = 0,
             random_seeds: int = 10, progress=None) -> PointsResult:
    """Mean AP of each ranker (and of random orders, averaged over ``random_seeds``) on ``n``
    sampled titles. ``rankers`` come first in the result, then random and ``baselines``."""
    titles = sample(judged, n, seed)
    if not titles:
        raise InputError("no judged title is left to score: the qrels have no product judged ≥ "
                         f"{RELEVANT} with {MIN_WORDS}+ content words where some but not all are in its queries")
    every = {**rankers, **baselines(judged)}
    per: dict[str, list[float]] = {name: [] for name in every}  # each title's AP, for the paired tests
    per_random: list[float] = []  # each title's AP averaged over the random seeds
    rand = np.zeros(random_seeds)
    rngs = [np.random.default_rng(1000 + s) for s in range(random_seeds)]
    for done, t in enumerate(titles):
        for name, rank in every.items():
            sc = np.asarray(rank(t.words), dtype=float)
            if sc.shape != (len(t.words.words),):
                raise ValueError(f"ranker {name!r} gave {sc.shape} scores for {len(t.words.words)} words")
            per[name].append(average_precision(sc, t.shopper))
        ap_random = [average_precision(rng.random(len(t.words.words)), t.shopper) for rng in rngs]
        rand += ap_random
        per_random.append(float(np.mean(ap_random)))
        if progress is not None:
            progress("titles", done + 1, len(titles))
    from qkv.search.significance import paired_test

    k = len(titles)
    names = list(rankers) + ["random"] + list(baselines(judged))
    per["random"] = per_random
    label = {"random": f"random order (mean of {random_seeds} seeds)"}
    rows = [(label.get(name, name), float(np.sum(per[name]) / k)) for name in names]
    first = np.asarray(per[names[0]])
    against = []
    for name in names[1:]:
        _, gain, se, p = paired_test(np.asarray(per[name]), first)
        against.append((label.get(name, name), gain, se, p))
    return PointsResult(rows, k, len(judged.titles), judged.skipped, random_seeds,
                        (float(rand.min() / k), float(rand.max() / k)), seed, against)


def points_ranker(enc, method: str = "rollout", *, catalog=None, head=None) -> Ranker:
    """qkv's selling points (``selling_points`` by ``method``) as a ranker."""
    from qkv.explain.maps import attention_maps
    from qkv.explain.salience import selling_points

    def rank(tw: TitleWords) -> np.ndarray:
        sp = selling_points(attention_maps(enc, tw.title, truncate=True), method=method, catalog=catalog, head=head)
        return from_spans(tw, sp.starts, sp.ends, sp.score)
    return rank


def load_corpus_titles(path) -> dict[str, str]:
    """BEIR corpus.jsonl → id → title (the ``title``, else the ``text`` of each record)."""
    from qkv.search.evaluate import _read_jsonl  # the BEIR reader search evaluation uses

    out = {}
    for n, r in enumerate(_read_jsonl(Path(path), "corpus"), 1):
        if "_id" not in r:
            raise InputError(f"{path}: record {n} has no '_id' (BEIR corpus records need '_id' and 'title')")
        t = str(r.get("title") or r.get("text") or "").strip()
        if t:
            out[str(r["_id"])] = t
    if not out:
        raise InputError(f"{path}: no record has a title (BEIR corpus records need '_id' and 'title')")
    return out
