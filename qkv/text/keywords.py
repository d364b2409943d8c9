"""The keyword tokenizer: how text becomes keyword terms, for titles and queries alike — the one
place to change it. ``normalize`` turns a title or a query into space-separated words: the same
normalisation on both, so "2x4x18", "18in." and "18 inch" meet as the same terms. Han text is folded
to simplified and each run becomes ``qkv.text.zh.han_terms`` — jieba search-mode words plus the
bigrams they lack, measured against characters, bigrams and plain words in docs/search.md — so
運動鞋 finds 运动鞋 and 保温杯 no longer meets 保湿面霜 on 保. ``han="chars"`` (``LEGACY_HAN``) is the
earlier behaviour, every Han character a term and no folding: an index records the scheme it was
written with (manifest ``extra.keyword_han``; none recorded = ``chars``) and is queried with it.
Kana and Hangul are still split into characters (FTS5's unicode61 tokenizer would otherwise keep a
run as one unsearchable word). ``terms`` is a query's distinct words, stopwords dropped.
Every store indexes ``normalize``'s output: the embedded store through FTS5 (Porter stemming on
top, ``qkv.search.embedded.generations.FTS_TOKENIZE``), Milvus through its ``standard`` analyzer."""

from __future__ import annotations

import re
import unicodedata

from qkv.text import zh

# Units spelled many ways in product titles; each variant → one short term. Applied to whole words.
_UNITS = {
    "in": "in", "inch": "in", "inches": "in", "\"": "in", "''": "in",
    "ft": "ft", "foot": "ft", "feet": "ft", "'": "ft",
    "gal": "gal", "gallon": "gal", "gallons": "gal",
    "lb": "lb", "lbs": "lb", "pound": "lb", "pounds": "lb",
    "oz": "oz", "ounce": "oz", "ounces": "oz",
    "mm": "mm", "cm": "cm", "m": "m",
    "qt": "qt", "quart": "qt", "quarts": "qt",
    "sq": "sq", "square": "sq",
    "cu": "cu", "cubic": "cu",
    "v": "volt", "volt": "volt", "volts": "volt",
    "w": "watt", "watt": "watt", "watts": "watt",
    "amp": "amp", "amps": "amp", "a": "a",
    "btu": "btu", "mah": "mah", "ml": "ml", "l": "l", "kg": "kg", "g": "g",
}
_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af])")
_KANA_HANGUL = re.compile(r"([\u3040-\u30ff\uac00-\ud7af])")
LEGACY_HAN = "chars"  # the scheme of indexes that record none
MANIFEST_KEY = "keyword_han"  # where an index's manifest (extra) records its scheme


def han_scheme(manifest_extra) -> str:
    """The Han scheme an index was written with (``chars`` when it records none)."""
    return str((manifest_extra or {}).get(MANIFEST_KEY, LEGACY_HAN))
_NUM_UNIT = re.compile(r"(?<=\d)(?=[a-z])|(?<=[a-z])(?=\d)")  # 18in → 18 in, r19 → r 19
_BY = re.compile(r"(?<=\d)\s*[x×*]\s*(?=\d|\.\d)")  # 2x4x18 → 2 x 4 x 18
_FEET_INCH = re.compile(r"(?<=\d)\s*(''|\"|')")  # 6' → 6 ft, 1/2" → 1/2 in
_WORD = re.compile(r"[0-9]+(?:[./][0-9]+)*|[^\W\d_]+", re.UNICODE)

STOPWORDS = frozenset("""a an and are as at be by for from has have in is it its of on or that the this to
was were will with""".split()) - {"in"}


def normalize(text: str, han: str = zh.SCHEME) -> str:
    """Lower-case, NFKC, units and sizes split and unified, Han runs folded and cut into ``han``
    terms (``qkv.text.zh.SCHEMES``, or ``chars``), kana and Hangul characters spaced."""
    t = unicodedata.normalize("NFKC", text).lower()
    t = _FEET_INCH.sub(lambda m: " in " if m.group(1) != "'" else " ft ", t)
    t = _BY.sub(" x ", t)
    t = _NUM_UNIT.sub(" ", t)
    if han == LEGACY_HAN:
        t = _CJK.sub(r" \1 ", t)
    elif zh.has_han(t):
        t = _KANA_HANGUL.sub(r" \1 ", zh.fold(t))
        t = zh.HAN_RUN.sub(lambda m: " " + " ".join(zh.han_terms(m.group(0), han)) + " ", t)
    else:
        t = _KANA_HANGUL.sub(r" \1 ", t)
    words = _WORD.findall(t)
    return " ".join(_UNITS.get(w, w) for w in words)


def terms(text: str, stopwords: bool = True, han: str = zh.SCHEME) -> list[str]:
    """Distinct keyword terms of a query, in order (stopwords dropped unless that leaves nothing)."""
    words = normalize(text, han).split()
    kept = [w for w in words if w not in STOPWORDS] if stopwords else words
    out: list[str] = []
    for w in kept or words:
        if w not in out:
            out.append(w)
    return out
