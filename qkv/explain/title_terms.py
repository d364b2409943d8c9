"""A title's words as shoppers' words are compared with them: folded, stop words out, hyphen parts.

Shared by the selling-points measure (``evaluate_points``) and the methods that rank a title's
words (``points``, ``terms``): words are whitespace-separated tokens with edge punctuation
stripped, lower-cased, a possessive "'s" and a plural "s" folded ("Tiles" → "tile", not "glass");
a hyphenated or slashed word also stands for its parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STOP = frozenset("a an the and or of for in on with to by at from x".split())
_TOKEN = re.compile(r"\S+")
_EDGE = re.compile(r"^[^\w]+|[^\w]+$", re.UNICODE)
_PARTS = re.compile(r"[-/]+")


def fold(word: str) -> str:
    """Lower-case, edge punctuation off, possessive and plural "s" folded."""
    w = _EDGE.sub("", word.lower())
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss") and w[-2].isalpha():
        w = w[:-1]
    return w


def parts(word: str) -> set[str]:
    """A folded word's hyphen/slash parts (folded), stop words and empty parts left out."""
    out = {fold(p) for p in _PARTS.split(word)} if _PARTS.search(word) else set()
    return {p for p in out if p and p not in STOP}


def _content(w: str) -> bool:
    return bool(w) and w not in STOP and any(c.isalnum() for c in w)


@dataclass(frozen=True)
class TitleWords:
    """A title's distinct content words (folded) in order of first appearance, with the
    character spans of every occurrence."""
    title: str
    words: tuple[str, ...]
    spans: tuple[tuple[tuple[int, int], ...], ...]
    surface: tuple[str, ...]  # the first occurrence as written (edge punctuation off)


def title_words(title: str) -> TitleWords:
    order: dict[str, list[tuple[int, int]]] = {}
    surface: dict[str, str] = {}
    for m in _TOKEN.finditer(title):
        w = fold(m.group())
        if not _content(w):
            continue
        stripped = _EDGE.sub("", m.group())
        lead = m.group().find(stripped[:1]) if stripped else 0
        order.setdefault(w, []).append((m.start() + lead, m.start() + lead + len(stripped)))
        surface.setdefault(w, stripped)
    return TitleWords(title, tuple(order), tuple(tuple(v) for v in order.values()), tuple(surface.values()))


def query_terms(query: str) -> set[str]:
    """A query's folded words and their hyphen/slash parts, stop words left out."""
    out: set[str] = set()
    for m in _TOKEN.finditer(query):
        w = fold(m.group())
        if _content(w):
            out.add(w)
        out |= parts(w)
    return out
