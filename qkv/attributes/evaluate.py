"""Scores by the exact-match protocol of the attribute data sets.

Per (offer, attribute) pair listed in the offer's ``target_scores`` (an offer lists the attributes
it is judged on; predictions of attributes it does not list are counted as "unjudged", not scored):

* predicted value equal to a gold value -> true positive;
* a prediction where gold is n/a, or a value equal to no gold value -> false positive;
* a gold value and no prediction -> false negative.

Micro P/R/F1 pool the counts over attributes; macro averages the per-attribute F1 over attributes
that have any count. ``normalize=True`` compares values after ``normalize_value`` (reported as a
separate score). For data with exact spans (character BIO), ``span_scores`` counts (attribute,
start, end) triples instead, as in CoNLL NER scoring.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from qkv.attributes.data import Example
from qkv.attributes.normalize import normalize_value


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict:
        return {"tp": self.tp, "fp": self.fp, "fn": self.fn, "precision": round(100 * self.precision, 2),
                "recall": round(100 * self.recall, 2), "f1": round(100 * self.f1, 2)}


@dataclass
class Scores:
    per_attr: dict[str, Counts] = field(default_factory=dict)
    gold_counts: dict[str, int] = field(default_factory=dict)  # judged pairs with a gold value
    offers: int = 0
    unjudged: int = 0
    protocol: str = "exact"

    @property
    def micro(self) -> Counts:
        c = Counts()
        for x in self.per_attr.values():
            c.tp += x.tp
            c.fp += x.fp
            c.fn += x.fn
        return c

    @property
    def macro(self) -> dict:
        xs = [x for x in self.per_attr.values() if x.tp + x.fp + x.fn]
        if not xs:
            return {"precision": 0.0, "recall": 0.0, "f1": 0.0}
        n = len(xs)
        return {"precision": round(100 * sum(x.precision for x in xs) / n, 2),
                "recall": round(100 * sum(x.recall for x in xs) / n, 2),
                "f1": round(100 * sum(x.f1 for x in xs) / n, 2)}

    def as_dict(self) -> dict:
        return {"protocol": self.protocol, "offers": self.offers, "unjudged_predictions": self.unjudged,
                "micro": self.micro.as_dict(), "macro": self.macro,
                "per_attribute": {a: {**c.as_dict(), "gold": self.gold_counts.get(a, 0)}
                                  for a, c in sorted(self.per_attr.items(), key=lambda kv: -self.gold_counts.get(kv[0], 0))}}


def score(examples: list[Example], predictions, *, normalize: bool = False) -> Scores:
    """Exact-match scores. ``predictions[i]``: Attributes (or (attr, value) pairs, or a dict
    attr -> value) for ``examples[i]``; for an attribute predicted more than once the first
    listed counts (``extract`` lists one per attribute unless asked for all spans)."""
    if len(predictions) != len(examples):
        raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
    s = Scores(protocol="exact-normalized" if normalize else "exact")
    per = defaultdict(Counts)
    gold_n: dict[str, int] = defaultdict(int)
    norm = (lambda a, v: normalize_value(a, v)) if normalize else (lambda a, v: v)
    for ex, pred in zip(examples, predictions):
        s.offers += 1
        pv: dict[str, str] = {}
        items = pred.items() if isinstance(pred, dict) else ((p.attr, p.value) if hasattr(p, "attr") else p for p in pred)
        for a, v in items:
            pv.setdefault(a, v)
        for a in pv:
            if a not in ex.values:
                s.unjudged += 1
        for a, gold in ex.values.items():
            c = per[a]
            if gold:
                gold_n[a] += 1
            p = pv.get(a)
            if p is None:
                if gold:
                    c.fn += 1
                continue
            if gold and norm(a, p) in {norm(a, g) for g in gold}:
                c.tp += 1
            else:
                c.fp += 1
    s.per_attr = dict(per)
    s.gold_counts = dict(gold_n)
    return s


def span_scores(examples: list[Example], predictions) -> Scores:
    """(attribute, start, end) matching for examples with exact gold spans (all spans predicted)."""
    s = Scores(protocol="span")
    per = defaultdict(Counts)
    gold_n: dict[str, int] = defaultdict(int)
    for ex, pred in zip(examples, predictions):
        s.offers += 1
        gold = {(g.attr, g.start, g.end) for g in (ex.spans or ())}
        got = {(p.attr, p.start, p.end) for p in pred}
        for a, _, _ in gold:
            gold_n[a] += 1
        for t in got & gold:
            per[t[0]].tp += 1
        for t in got - gold:
            per[t[0]].fp += 1
        for t in gold - got:
            per[t[0]].fn += 1
    s.per_attr = dict(per)
    s.gold_counts = dict(gold_n)
    return s


def dictionary_baseline(train: list[Example], titles: list[str]) -> list[dict[str, str]]:
    """The reference the targets are set against: for each attribute, the longest value seen
    with it in training that occurs in the title (case-sensitive, on word boundaries)."""
    import re

    by_attr: dict[str, set[str]] = defaultdict(set)
    for ex in train:
        for a, vs in ex.values.items():
            by_attr[a].update(v for v in vs if v.strip())
    pats = {a: sorted(vs, key=lambda v: (-len(v), v)) for a, vs in by_attr.items()}  # deterministic ties
    out = []
    for t in titles:
        got = {}
        for a, vs in pats.items():
            for v in vs:
                if re.search(r"(?<!\w)" + re.escape(v) + r"(?!\w)", t):
                    got[a] = v
                    break
        out.append(got)
    return out


def paired_bootstrap(examples: list[Example], preds_a, preds_b, n: int = 2000, seed: int = 0) -> dict:
    """How sure is a micro-F1 difference between two systems on the same titles? Resample the
    titles with replacement ``n`` times (both systems' counts for a title travel together) and
    report the difference A − B on the data, its standard deviation over the resamples and the
    central 95 % interval, in F1 points (Koehn 2004, "Statistical significance tests for machine
    translation evaluation", applied to extraction counts)."""
    import numpy as np

    if not (len(examples) == len(preds_a) == len(preds_b)):
        raise ValueError("one prediction list per system, one entry per example")

    def counts(preds):
        rows = []
        for ex, p in zip(examples, preds):
            m = score([ex], [p]).micro
            rows.append((m.tp, m.fp, m.fn))
        return np.asarray(rows, dtype=np.float64).reshape(-1, 3)

    A, B = counts(preds_a), counts(preds_b)

    def f1(c):
        tp, fp, fn = c.sum(0)
        return 100 * 2 * tp / (2 * tp + fp + fn) if tp else 0.0

    rng = np.random.default_rng(seed)
    diffs = np.empty(n)
    for k in range(n):
        i = rng.integers(0, len(examples), len(examples))
        diffs[k] = f1(A[i]) - f1(B[i])
    lo, hi = np.percentile(diffs, [2.5, 97.5]) if n else (0.0, 0.0)
    return {"f1_a": f1(A), "f1_b": f1(B), "diff": f1(A) - f1(B), "sd": float(diffs.std()) if n else 0.0,
            "ci95": (float(lo), float(hi)), "resamples": n}
