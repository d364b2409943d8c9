"""What buyers say, counted: points several reviewers make, each with the exact number of reviews
that make it and one quoted example, grouped as praise and complaints.

A point is a group of units that say nearly the same thing on the same side. Candidates are taken
in order of importance (π); each one not yet placed starts a group and takes every unplaced
candidate of the same side whose cosine (on the vectors the scoring uses) is at least ``similar``
(greedy leader clustering, as in Hartigan 1975's leader algorithm). Every unit of the input is
counted with the candidate that stands for it (itself, its identical twins, or, in a large input,
its k-means cluster), so the count — distinct reviews with a unit in the group — covers every
review and is exact for that grouping; only groups from at least ``min_reviews`` reviews are kept.

The label is a span from the units themselves, never generated: the shortest member unit (its
punctuation and a leading connective removed), and the example is the leader, quoted whole
(a clause's trailing comma dropped).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from qkv.summarize.units import strip_connective

# Cosine at which two units make the same point. Centred multilingual-e5 vectors put unrelated
# units near 0 and paraphrases ("加热很快" / "加热速度快") at 0.5-0.8; MiniLM's raw cosines are
# similar for paraphrases.
SIMILAR = 0.55
MIN_REVIEWS = 2
LABEL_CHARS = 16


@dataclass(frozen=True)
class Point:
    label: str                 # a short span from the units
    count: int                 # reviews that make the point (distinct reviews)
    example: str               # one unit, quoted whole
    side: str                  # "praise" | "complaint"
    reviews: tuple[int, ...]   # which reviews (0-based)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["reviews"] = list(self.reviews)
        return d


def _label(text: str) -> str:
    t = strip_connective(text.strip()).strip(" ，,。.！!？?；;、：:…~～")
    return t


def find_points(doc, pi: np.ndarray, pol: np.ndarray, *, similar: float = SIMILAR, min_reviews: int = MIN_REVIEWS,
                limit: int = 8, uninformative=None, review_side=None) -> dict[str, list[Point]]:
    """{"praise": [...], "complaints": [...]}, each list by count, at most ``limit`` points.
    ``review_side``: the side of every review when known (ratings): a unit counts towards its
    candidate's point only from a review on that side (a coarse cluster of a large input can hold
    both)."""
    cand = doc.cand
    member = doc.member if doc.member is not None else np.arange(doc.n)
    reviews_of = [set() for _ in cand]
    for i, c in enumerate(member):
        r = int(doc.review_of[i])
        if c >= 0 and (review_side is None or review_side[r] == pol[c]):
            reviews_of[int(c)].add(r)
    skip = np.zeros(len(cand), bool) if uninformative is None else np.asarray(uninformative, bool)
    placed = skip | (pol == 0)
    out: dict[str, list[Point]] = {"praise": [], "complaints": []}
    for lead in np.argsort(-pi, kind="stable"):
        if placed[lead]:
            continue
        sims = doc.vectors @ doc.vectors[lead]
        group = np.flatnonzero(~placed & (pol == pol[lead]) & (sims >= similar))
        group = np.union1d(group, [lead])
        placed[group] = True
        revs = set().union(*(reviews_of[g] for g in group))
        if len(revs) < min_reviews:
            continue
        labels = sorted((_label(doc.texts[cand[g]]) for g in group), key=lambda t: (len(t), t))
        label = next((t for t in labels if t), "") or _label(doc.texts[cand[lead]])
        if len(label) > LABEL_CHARS and not label.isascii():
            label = label[:LABEL_CHARS] + "…"
        side = "praise" if pol[lead] > 0 else "complaints"
        example = doc.texts[cand[lead]].strip().rstrip("，,；;、：:")  # quoted whole, not left on a comma
        out[side].append(Point(label, len(revs), example, "praise" if pol[lead] > 0 else "complaint",
                               tuple(sorted(revs))))
    for side in out:
        out[side] = sorted(out[side], key=lambda p: -p.count)[:limit]
    return out
