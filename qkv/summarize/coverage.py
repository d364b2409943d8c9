"""What many reviews say, per token: word coverage for Chinese summaries (SumBasic).

A reference summary of a group of reviews names the points several reviewers make ("待机时间短",
"物流很快"). Attention centrality (rank.py) finds units that sound like many others, but in
Chinese it also favours narrative clauses that share only the review register ("一大清早，",
"看看电视上上网。"). SumBasic (Nenkova & Vanderwende 2005, "The impact of frequency on
summarization") scores a unit by the input frequency of its content words and, once a unit is
chosen, squares the probability of its words, so the next pick covers something else. Here:

* content words are rjieba's words tagged noun, verb, adjective, idiom or other content class
  (the closed classes — pronouns, particles, conjunctions, prepositions, numerals, adverbs — say
  what kind of sentence it is, not what the product is like);
* a word's probability is the number of reviews that use it over the total (each review votes
  once: "how many say it", not how often one reviewer repeats it);
* a unit's value is the sum of its distinct words' probabilities per token of the budget it uses
  (value per token, as in budgeted maximum coverage, Khuller et al. 1999), times its attention
  π relative to the best unit to a power (``Params.coverage_power``): lexical and semantic
  centrality agree on the units a summary should hold.

Measured on the zh_reviews dev set (docs/summarize.md); English stays with attention and MMR.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from qkv.summarize.units import is_chinese

# rjieba (jieba's) part-of-speech tags whose words carry content: n* nouns, v* verbs, a* adjectives,
# i idioms, l fixed expressions, z state words, j abbreviations, b distinguishing words. Everything
# else (r pronouns, u particles, c conjunctions, p prepositions, m numerals, q measure words, d
# adverbs, y modal particles, e interjections, x punctuation) is a closed class. jieba tags 很 "zg",
# which passes the z test; leaving zg out measured zh dev 35.86/12.43 against 36.17/12.73
# with it (within noise on 40 groups), so the rule stays as first written and measured.
CONTENT_TAGS = ("n", "v", "a", "i", "l", "z", "j", "b")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
SHARE_SAMPLE = 2000  # reviews read for the word shares in larger inputs (seeded sample)


def content_words(text: str) -> list[str]:
    """The distinct content words of a Chinese text, in order of first use."""
    import rjieba

    seen: dict[str, None] = {}
    for w, tag in rjieba.tag(text):
        if tag[:1] in CONTENT_TAGS and _HAN.search(w):
            seen.setdefault(w, None)
    return list(seen)


def word_shares(reviews: list[str], sample: int = SHARE_SAMPLE) -> dict[str, float]:
    """P(w): reviews that use content word w, over the sum of those counts; from a seeded sample
    of ``sample`` reviews in larger inputs."""
    live = [t for t in reviews if t.strip()]
    if len(live) > sample:
        pick = np.sort(np.random.default_rng(0).choice(len(live), sample, replace=False))
        live = [live[i] for i in pick]
    df: Counter[str] = Counter()
    for t in live:
        df.update(content_words(t))
    total = sum(df.values())
    return {w: c / total for w, c in df.items()} if total else {}


def applies(texts: list[str]) -> bool:
    """Coverage is the Chinese scoring: most candidate units are Chinese."""
    return bool(texts) and sum(is_chinese(t) for t in texts) * 2 > len(texts)


class Coverage:
    """SumBasic state over the candidate units: ``values()`` is each unit's current Σ P(w) over its
    distinct content words; ``take(j)`` squares the probabilities of unit j's words."""

    def __init__(self, p: dict[str, float], words: list[list[str]]):
        self.p = dict(p)  # squared as units are taken: a copy, so the shares can be reused
        self.words = words

    @classmethod
    def of(cls, reviews: list[str], units: list[str]) -> "Coverage":
        return cls(word_shares(reviews), [content_words(u) for u in units])

    def values(self) -> np.ndarray:
        return np.array([sum(self.p.get(w, 0.0) for w in ws) for ws in self.words])

    def take(self, j: int) -> None:
        for w in self.words[j]:
            if w in self.p:
                self.p[w] *= self.p[w]
