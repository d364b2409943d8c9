"""Sentence splitting for reviews in English and Chinese.

A boundary is a run of terminal punctuation (. ! ? … and the full-width 。！？；．｡⋯) with any
closing quotes, brackets and emoji that follow it, then whitespace, the end of the text, or (after
full-width punctuation, which needs no space) anything at all; an ASCII mark between Chinese
characters ("很好.下次还来") counts as full-width. No boundary falls inside a paired quotation
(“…” 「…」 『…』 《…》 of at most QUOTE_MAX characters on one line): "他说：“好。不错”然后…" keeps the quote
whole, and a closing quote after the mark stays with its sentence. A period after a known abbreviation
("e.g.", "Mr.", "approx.") or a single capital initial is not a boundary. Every line break is a
boundary and bullet markers (-, *, •, 1., 2)) at the start of a line are dropped. Fragments too
short to stand alone ("Wow!", "OK.", "赞！") are merged into the sentence before them (or after, for
the first), so the budget is never spent on them alone.

Each sentence keeps the (start, end) character span it covers in the review; its text is the
pieces of that span joined by single spaces, without bullet markers and line breaks.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Lower-case words that end with a period without ending a sentence. "etc." is absent on purpose:
# it usually does end one.
ABBREVIATIONS = frozenset("""
mr mrs ms dr prof sr jr st vs etc.al e.g i.e eg ie approx appx apt dept est fig inc ltd co corp
no nos vol ft oz lb lbs pt qt gal in cm mm kg mfg jan feb mar apr jun jul aug sep sept oct nov dec
mon tue wed thu fri sat sun u.s u.k a.m p.m
""".split())

_TERMINAL = ".!?…。！？；．｡⋯"
_CJK_TERMINAL = "…。！？；．｡⋯"
# Paired quotation marks whose inside holds no boundary, and the longest quote treated so (a
# stray opening mark must not swallow the rest of a review).
_QUOTES = {"“": "”", "「": "」", "『": "』", "《": "》", "﹁": "﹂"}
QUOTE_MAX = 80
_CLOSERS = "\"'”’»)]}）】」』》"
_BULLET = re.compile(r"[ \t]*(?:[-*•·◦▪▫●○■□➢➤►▶✓✔–—]+|\(?\d{1,2}[.)、]|\(?[a-zA-Z][)])[ \t]+")
# A run of terminal punctuation, then closers and emoji (possibly space-separated) that belong to it.
_EMOJI_CHARS = "\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F\u200D"
_EMOTICON = r"[:;=]-?[)(DPp]"
_BOUNDARY = re.compile(r"(?:[.!?…。！？；．｡⋯]+[\"'”’»)\]}）】」』》]*(?:[ \t]*(?:[" + _EMOJI_CHARS + r"]+|" + _EMOTICON
                       + r"))*|(?<=\S)[ \t]*[" + _EMOJI_CHARS + r"]+(?=[ \t]+[A-Z]))")
_EMOJI = re.compile("[" + _EMOJI_CHARS + "]")


@dataclass(frozen=True)
class Span:
    """One sentence: its text and the span of the review it covers. ``text`` equals
    ``review[start:end]`` unless line breaks or bullet markers were removed from inside it."""

    text: str
    start: int
    end: int


def _is_cjk(ch: str) -> bool:
    return "\u3040" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" or "\uf900" <= ch <= "\ufaff"


_CJK_RANGES = "\u3040-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{_CJK_RANGES}]")
_NON_CJK_WORD = re.compile(f"[^\\W_{_CJK_RANGES}]+")


def _weight(text: str) -> float:
    """How much a fragment says: words, with each CJK character worth half a word."""
    return len(_NON_CJK_WORD.findall(text)) + len(_CJK_CHAR.findall(text)) / 2


def _is_break(text: str, m: re.Match) -> bool:
    """Whether the punctuation run matched at ``m`` ends a sentence."""
    run = m.group(0)
    end = m.end()
    if run.lstrip()[:1] and _EMOJI.match(run.lstrip()):
        return True  # emoji standing in for the full stop: "Works great 😍 Will buy again"
    nxt = text[end] if end < len(text) else ""
    if any(c in _CJK_TERMINAL for c in run):
        return True  # full-width marks need no space after them
    after = text[end:end + 3].lstrip(" \t")[:1]
    if _is_cjk(after) and _is_cjk(text[m.start() - 1:m.start()] or " "):
        return True  # an ASCII mark written between Chinese characters: "很好.下次还来", "住. 不错"
    if run[0] == "." and len(run.rstrip(_CLOSERS)) == 1:
        # A single period: decimals (3.5), URLs (amazon.com) and abbreviations are not breaks.
        before = text[:m.start()]
        word = re.search(r"([\w.]+)$", before)
        w = word.group(1).lower() if word else ""
        if nxt and not nxt.isspace():
            # "great.I cannot": a missing space between two sentences, but not "e.g.I" or "3.5".
            prev = before[-1:] if before else ""
            return bool(prev.isalpha() and prev.islower() and nxt.isupper() and len(w) > 1
                        and w not in ABBREVIATIONS)
        if w in ABBREVIATIONS or w.rstrip(".") in ABBREVIATIONS:
            return False
        if len(w) == 1 and w.isalpha() and before[-1:].isupper():
            return False  # an initial: "J. Smith", "U. S."
        return True
    # ! ? … and runs like "!!!", "?!", "...": a break before whitespace or the end.
    return not nxt or nxt.isspace() or _is_cjk(nxt) or nxt in _CLOSERS or bool(_EMOJI.match(nxt)) or \
        (nxt.isupper() and text[m.start() - 1:m.start()].isalpha())


def _quoted(text: str, ls: int, le: int) -> list[tuple[int, int]]:
    """(open, close) positions of the paired quotations on one line (not nested, ≤ QUOTE_MAX)."""
    out, i = [], ls
    while i < le:
        close = _QUOTES.get(text[i])
        if close is not None:
            j = text.find(close, i + 1, min(le, i + 1 + QUOTE_MAX))
            if j >= 0:
                out.append((i, j))
                i = j
        i += 1
    return out


def _raw_pieces(text: str) -> list[tuple[int, int]]:
    """Spans between boundaries, before trimming and merging."""
    pieces: list[tuple[int, int]] = []
    for line in re.finditer(r"[^\r\n]+", text):
        ls, le = line.start(), line.end()
        b = _BULLET.match(text, ls)
        start = b.end() if b else ls
        quotes = _quoted(text, ls, le)
        for m in _BOUNDARY.finditer(text, start, le):
            if any(o < m.end() <= c for o, c in quotes):
                continue  # the mark is inside a quotation (its closer not yet reached)
            if _is_break(text, m):
                pieces.append((start, m.end()))
                start = m.end()
        pieces.append((start, le))
    return pieces


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and (text[s].isspace() or unicodedata.category(text[s]) in ("Cf", "Zs")):
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def split_sentences(text: str, min_words: float = 3) -> list[Span]:
    """Split one review into sentences; fragments weighing less than ``min_words`` words (a CJK
    character counts half) are merged into a neighbour. Returns spans in order."""
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    spans = []
    for s, e in _raw_pieces(text):
        s, e = _trim(text, s, e)
        if e > s:
            spans.append((s, e))
    if not spans:
        return []
    merged: list[list] = []  # [start, end, joined text]
    for s, e in spans:
        piece = text[s:e]
        if merged and (_weight(piece) < min_words or _weight(merged[-1][2]) < min_words):
            # Join with the previous sentence (it is short, or this one is). Pieces that touched
            # in the review ("很好。赞") stay touching; anything else between them becomes one space.
            gap = text[merged[-1][1]:s]
            merged[-1][2] += (gap if gap in ("", " ") else " ") + piece
            merged[-1][1] = e
        else:
            merged.append([s, e, piece])
    # A review of punctuation or emoji alone ("!!!", "👍") has nothing to summarise.
    return [Span(t, s, e) for s, e, t in merged if _weight(t) > 0]
