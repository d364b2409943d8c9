"""Gold values -> token spans -> BIO labels, and back from labels to character spans."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from qkv.attributes.data import Example, Span
from qkv.attributes.features import TitleTokens


@dataclass
class AlignStats:
    """What happened to the gold values while making training labels."""

    titles: int = 0
    empty_titles: int = 0
    values: int = 0
    labelled: int = 0  # value occurrences turned into spans
    not_in_title: int = 0  # value string does not occur in the title: skipped
    off_boundary: int = 0  # occurs, but starts or ends inside a token: skipped
    overlapping: int = 0  # occurs on tokens another attribute already took: skipped
    snaps: Counter = field(default_factory=Counter)  # (attr, covered text lower, ds, de) -> n
    colabels: Counter = field(default_factory=Counter)  # (category, attr kept, attr dropped) -> n
    labels_by_cat: Counter = field(default_factory=Counter)  # (category, attr) -> n spans labelled
    examples_not_in_title: list = field(default_factory=list)  # a few (title, attr, value) to show

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("snaps", "colabels", "labels_by_cat")}
        d["examples_not_in_title"] = [list(x) for x in self.examples_not_in_title]
        return d


def occurrences(title: str, value: str) -> list[tuple[int, int]]:
    """Every non-overlapping (start, end) where ``value`` occurs in ``title`` exactly."""
    out, i = [], 0
    if not value:
        return out
    while True:
        i = title.find(value, i)
        if i < 0:
            return out
        out.append((i, i + len(value)))
        i += len(value)


def token_span(tt: TitleTokens, start: int, end: int) -> tuple[int, int] | None:
    """(first, last) token whose offsets begin at ``start`` and end at ``end``, else None."""
    if len(tt) == 0:
        return None
    i = np.nonzero(tt.offsets[:, 0] == start)[0]
    j = np.nonzero(tt.offsets[:, 1] == end)[0]
    if len(i) == 0 or len(j) == 0 or j[-1] < i[0]:
        return None
    return int(i[0]), int(j[-1])


def covering_span(tt: TitleTokens, start: int, end: int) -> tuple[int, int] | None:
    """(first, last) token of the smallest token-aligned span covering [start, end)."""
    inside = np.nonzero((tt.offsets[:, 1] > start) & (tt.offsets[:, 0] < end))[0]
    if len(inside) == 0:
        return None
    return int(inside[0]), int(inside[-1])


def gold_spans(ex: Example) -> list[Span]:
    """Character spans of an example's gold values (given spans, else every occurrence)."""
    if ex.spans is not None:
        return list(ex.spans)
    out = []
    for attr, vals in ex.values.items():
        for v in vals:
            for s, e in occurrences(ex.title, v):
                out.append(Span(attr, s, e, v))
    return out


def bio_labels_for(ex: Example, tt: TitleTokens, attr_index: dict[str, int], stats: AlignStats,
                   order: dict[str, int]) -> np.ndarray:
    """Label ids (0 = O, 2a+1 = B-attr a, 2a+2 = I-attr a) of each token of the title.
    More frequent attributes claim shared tokens first (``order``: attr -> rank)."""
    y = np.zeros(len(tt), dtype=np.int64)
    stats.titles += 1
    if len(tt) == 0:
        stats.empty_titles += 1
    cands = []
    if ex.spans is not None:
        stats.values += len(ex.spans)
        cands = list(ex.spans)
    else:
        for attr, vals in ex.values.items():
            for v in vals:
                stats.values += 1
                occ = occurrences(ex.title, v)
                if not occ:
                    stats.not_in_title += 1
                    if len(stats.examples_not_in_title) < 5:
                        stats.examples_not_in_title.append((ex.title, attr, v))
                    continue
                cands.extend(Span(attr, s, e, v) for s, e in occ)
    cands.sort(key=lambda s: (order.get(s.attr, 10**6), s.start))
    # A value whose every occurrence cuts through a token ("Jersey" inside "Jerseys", " 7.5g" with
    # its space) is labelled on the covering tokens, and the cut is remembered (``snaps``) so that
    # extraction can cut a predicted span the same way.
    aligned = {(s.attr, s.value) for s in cands if token_span(tt, s.start, s.end) is not None}
    taken: dict[tuple[int, int], str] = {}
    cat = ex.category or ""
    snapped_values = set()
    for s in cands:
        if s.attr not in attr_index:
            continue
        ts = token_span(tt, s.start, s.end)
        if ts is None:
            if (s.attr, s.value) in aligned or (s.attr, s.value) in snapped_values:
                continue
            ts = covering_span(tt, s.start, s.end)
            if ts is None:
                stats.off_boundary += 1
                continue
            snapped_values.add((s.attr, s.value))
            stats.off_boundary += 1
        i, j = ts
        cs, ce = int(tt.offsets[i, 0]), int(tt.offsets[j, 1])
        if y[i:j + 1].any():
            if (i, j) in taken and taken[(i, j)] != s.attr:
                stats.colabels[(cat, taken[(i, j)], s.attr)] += 1
            stats.overlapping += 1
            continue
        a = attr_index[s.attr]
        y[i] = 2 * a + 1
        y[i + 1:j + 1] = 2 * a + 2
        taken[(i, j)] = s.attr
        stats.labelled += 1
        stats.labels_by_cat[(cat, s.attr)] += 1
        stats.snaps[(s.attr, ex.title[cs:ce].lower(), s.start - cs, s.end - ce)] += 1
    return y


def label_spans(tt: TitleTokens, labels: np.ndarray, conf: np.ndarray, attrs: list[str]):
    """(attr, start, end, confidence) of each B/I run; confidence = mean marginal of its tokens."""
    out = []
    i, n = 0, len(labels)
    while i < n:
        lab = int(labels[i])
        if lab == 0 or lab % 2 == 0:  # O, or a stray I (cannot happen with constrained decoding)
            i += 1
            continue
        a = (lab - 1) // 2
        j = i
        while j + 1 < n and int(labels[j + 1]) == 2 * a + 2:
            j += 1
        out.append((attrs[a], int(tt.offsets[i, 0]), int(tt.offsets[j, 1]), float(conf[i:j + 1].mean())))
        i = j + 1
    return out


def attr_frequency(examples) -> Counter:
    c = Counter()
    for ex in examples:
        if ex.spans is not None:
            c.update(s.attr for s in ex.spans)
        else:
            c.update(a for a, vs in ex.values.items() if vs)
    return c
