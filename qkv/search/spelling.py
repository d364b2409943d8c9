"""What an unknown query word most likely meant, in the catalog's own words.

A shopper's word that no title holds ("celing", "blubs", "windowair") finds nothing on the keyword
side and a poor vector on the dense side. Its correction is the most likely catalog word near it,
in the noisy-channel spirit of Norvig's corrector ("How to Write a Spelling Corrector", 2007):
P(word) from how many titles hold it, P(typed | word) falling with the edit distance. Candidates
are every catalog word within ``MAX_DISTANCE`` optimal-string-alignment edits (insertions,
deletions, substitutions and swaps of neighbours: "blubs" → "bulbs" is one; one edit only for a
word shorter than ``TWO_EDITS_FROM`` letters), found by rapidfuzz,
and every split of the typed word into two catalog words of at least ``SPLIT_LEAST`` letters
("walloven" → "wall oven"), which costs ``SPLIT_COST`` edits. Score: ln(df) − ``EDIT_WEIGHT`` ·
edits, so one edit fewer outweighs a ~400 times commoner word.

Measured on Home Depot dev (docs/search.md, "Spelling"): 19% of its queries hold a word no title
holds; the weights below were chosen on half a.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

MAX_DISTANCE = 2  # edits from the typed word to a candidate …
TWO_EDITS_FROM = 7  # … for a word of this many letters; a shorter one takes one ("xmas" is not "gas"), as
# Lucene's fuzziness AUTO does from 6 (half a: 7 best, 0.4306 against 0.4296 for two edits at any length)
EDIT_WEIGHT = 6.0  # ln(df) given up per edit
SPLIT_COST = 1.5  # a run-together word's split, in edits
SPLIT_LEAST = 3  # letters in each half of a split ("sheetin" is not "sheet in")
LEAST_DF = 2  # a candidate is a word at least this many titles hold (one title's typo is no correction)
LEAST_LETTERS = 4  # shorter unknown words are left alone: too many words lie an edit from them


def correct(term: str, df: Mapping[str, int], words: Sequence[str] | None = None) -> str | None:
    """The most likely catalog word(s) for an unknown ``term`` (lower-case, as the keyword side
    cuts it), or None: a word of fewer than ``LEAST_LETTERS`` letters or with a digit, or no
    candidate. ``df``: catalog word → titles holding it; ``words``: the words a correction may be
    (default: those ``df`` holds at least ``LEAST_DF`` times)."""
    from rapidfuzz import process
    from rapidfuzz.distance import OSA

    if len(term) < LEAST_LETTERS or not term.isalpha():
        return None
    if words is None:
        words = [w for w, n in df.items() if n >= LEAST_DF]
    best: tuple[float, str] | None = None
    most = MAX_DISTANCE if len(term) >= TWO_EDITS_FROM else min(MAX_DISTANCE, 1)
    for word, edits, _ in process.extract(term, words, scorer=OSA.distance, score_cutoff=most, limit=None):
        best = max(best or (-math.inf, ""), (math.log(df[word]) - EDIT_WEIGHT * edits, word))
    for cut in range(SPLIT_LEAST, len(term) - SPLIT_LEAST + 1):
        left, right = term[:cut], term[cut:]
        n = min(df.get(left, 0), df.get(right, 0))
        if n >= LEAST_DF:
            best = max(best or (-math.inf, ""), (math.log(n) - EDIT_WEIGHT * SPLIT_COST, f"{left} {right}"))
    return None if best is None else best[1]
