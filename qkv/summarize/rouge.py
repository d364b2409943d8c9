"""ROUGE-1/2/L F1 through the ``rouge-score`` package (Lin 2004; Google's re-implementation of
ROUGE-1.5.5), with stemming, against each reference and averaged over the references.

rouge-score's own tokenizer keeps only a-z and 0-9, so Chinese or accented text scores as empty or
mangled ("café" → "caf"). ``tokenizer="unicode"`` keeps letters of every script: each CJK character
is a token (Chinese has no spaces, and character ROUGE is the usual choice for it), other letters
and digits form words, and ASCII words are Porter-stemmed exactly as rouge-score stems them. On
plain ASCII text both tokenizers give the same tokens.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import numpy as np

from qkv.errors import InputError

TYPES = ("rouge1", "rouge2", "rougeL")
ROUGE_TOKENIZERS = ("default", "unicode")

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


class UnicodeTokenizer:
    """rouge-score tokenizer interface (``tokenize(text) -> list[str]``) for any script."""

    def __init__(self, use_stemmer: bool = True):
        from nltk.stem import porter

        self._stemmer = porter.PorterStemmer() if use_stemmer else None

    def tokenize(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", text).lower()
        out = []
        for tok in _TOKEN.findall(text):
            if self._stemmer and len(tok) > 3 and tok.isascii():
                tok = self._stemmer.stem(tok)
            out.append(tok)
        return out


@lru_cache(maxsize=None)
def scorer(tokenizer: str = "default", stemming: bool = True):
    from rouge_score import rouge_scorer

    if tokenizer == "default":
        return rouge_scorer.RougeScorer(list(TYPES), use_stemmer=stemming)
    if tokenizer == "unicode":
        return rouge_scorer.RougeScorer(list(TYPES), tokenizer=UnicodeTokenizer(stemming))
    raise InputError(f"unknown ROUGE tokenizer {tokenizer!r}; choose default or unicode")


def rouge(prediction: str, references, tokenizer: str = "default", stemming: bool = True) -> dict[str, float]:
    """F1 (×100) of each ROUGE type, averaged over the references."""
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise InputError("ROUGE needs at least one reference summary")
    sc = scorer(tokenizer, stemming)
    rows = [sc.score(ref, prediction) for ref in refs]
    return {t: 100.0 * float(np.mean([r[t].fmeasure for r in rows])) for t in TYPES}
