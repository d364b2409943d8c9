"""Chinese text: fold traditional to simplified, segment into words, index terms for keyword search.

* ``fold(text)`` — traditional characters to simplified with OpenCC's ``t2s`` tables (phrase-aware:
  頭髮 → 头发, 乾燥 → 干燥), so 運動鞋 and 运动鞋 meet. Text without Han characters is returned as is.
* ``segment(text)`` / ``spans(text)`` — words, from jieba's dictionary and HMM through its Rust port
  (``rjieba``, MIT, the dictionary ships inside the wheel; ~13× the pure-Python jieba's speed here).
  Latin runs, digits and sizes come back as typed ("DEWALT", "20V").
* ``han_terms(run)`` — the keyword terms of one run of Han characters, as search indexes them: jieba's
  search-mode words (a long word and the dictionary words inside it) plus overlapping character
  bigrams, chosen by measurement on Taobao titles (docs/search.md, ``bench/zh_keyword.py``).

Both libraries are imported on first use, so importing this module costs nothing.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

# CJK Unified Ideographs, extension A, compatibility ideographs, extensions B–F (not kana or Hangul).
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
HAN_RUN = re.compile(f"[{HAN}]+")
_HAN_CHAR = re.compile(f"[{HAN}]")

SCHEMES = ("chars", "bigrams", "bigrams+chars", "words", "search-words", "words+bigrams", "search-words+bigrams")
SCHEME = "search-words+bigrams"  # see han_terms; the figures are in docs/search.md

_lock = threading.Lock()
_converter = None
_jieba = None


def has_han(text: str) -> bool:
    """True if ``text`` holds at least one Han character."""
    return _HAN_CHAR.search(text) is not None


def _t2s():
    global _converter
    if _converter is None:
        with _lock:
            if _converter is None:
                try:
                    import opencc
                except ImportError as e:  # a declared dependency; say how to get it rather than fail obscurely
                    raise ImportError("Chinese folding needs the 'opencc' package: pip install opencc") from e
                _converter = opencc.OpenCC("t2s")
    return _converter


def _segmenter():
    global _jieba
    if _jieba is None:
        with _lock:
            if _jieba is None:
                try:
                    import rjieba
                except ImportError as e:
                    raise ImportError("Chinese word segmentation needs the 'rjieba' package: pip install rjieba") from e
                _jieba = rjieba.Jieba()
    return _jieba


def fold(text: str) -> str:
    """``text`` with traditional Han characters turned simplified (OpenCC t2s); other text unchanged.

    The conversion keeps the length of every run in practice (t2s maps characters and phrases one to
    one), but callers that need offsets into the original should not rely on it: fold, then segment.
    """
    if not has_han(text):
        return text
    return _t2s().convert(text)


def segment(text: str) -> list[str]:
    """The words of ``text`` in order (jieba's accurate mode, HMM for unknown words); whitespace
    dropped. Fold first if the text may be traditional."""
    return [w for w in _segmenter().cut(text) if w.strip()]


def spans(text: str) -> list[tuple[str, int, int]]:
    """``segment`` with character offsets: (word, start, end) into ``text``."""
    return [(w, s, e) for w, s, e in _segmenter().tokenize(text) if w.strip()]


def search_words(text: str) -> list[str]:
    """jieba's search mode: each word, and before a long word the dictionary words inside it
    (保温杯 → 保温, 保温杯), so a query for a part finds the whole."""
    return [w for w in _segmenter().cut_for_search(text) if w.strip()]


def bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of a Han run (a one-character run is its own term)."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i:i + 2] for i in range(len(run) - 1)]


@lru_cache(maxsize=65536)
def _han_terms(run: str, scheme: str, query: bool = False) -> tuple[str, ...]:
    if scheme == "chars":
        return tuple(run)
    if scheme == "bigrams":
        return tuple(bigrams(run))
    if scheme == "bigrams+chars":  # queries: bigrams (a one-character query is its character)
        return tuple(bigrams(run) + ([] if query or len(run) < 2 else list(dict.fromkeys(run))))
    words = search_words(run) if scheme.startswith("search-words") else segment(run)
    if scheme.endswith("+bigrams"):
        # bigrams only add what the words lack: a two-character word already is its own bigram
        extra = [b for b in bigrams(run) if b not in words] if len(run) > 2 else []
        return tuple(words + extra)
    return tuple(words)


def han_terms(run: str, scheme: str = SCHEME, query: bool = False) -> list[str]:
    """Keyword terms for one run of (folded) Han characters, under one of ``SCHEMES``:

    * ``chars`` — each character (qkv's behaviour before: 保温杯 met 保湿面霜 on 保);
    * ``bigrams`` — overlapping bigrams (保温 温杯), the classic segmentation-free choice
      (Kwok 1997; Nie, Gao, Zhang & Zhou 2000, "On the use of words and n-grams for Chinese IR");
    * ``words`` / ``search-words`` — jieba words, accurate or search mode;
    * ``…+bigrams`` — the words plus the bigrams they do not already hold (words give precision,
      bigrams recover what a segmentation split differently in query and title).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown Chinese term scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    return list(_han_terms(run, scheme, query))


def keyword_text(text: str, scheme: str = SCHEME) -> str:
    """``text`` folded, with each Han run replaced by its space-separated ``han_terms``; the rest as is."""
    return HAN_RUN.sub(lambda m: " " + " ".join(han_terms(m.group(0), scheme)) + " ", fold(text))
