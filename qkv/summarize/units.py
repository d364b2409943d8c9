"""Summary units: whole sentences, or clauses where the language runs that way.

Chinese reviews are long comma-spliced sentences ("屏幕很清楚，电池不耐用，客服态度也差。"): one
sentence carries praise and complaints, and a whole sentence rarely fits a small budget next to
others. A greedy oracle over clauses (split at ，；、) scores 13 ROUGE-1 points above one over
whole sentences on the Chinese dev set (issue 27), so in Chinese text the unit is the clause.
English sentences stay whole (``units="auto"``): a comma there joins parts of one thought more
often than two claims.

Clauses are cut at the full-width comma and semicolon, and at an ASCII comma written between
Chinese characters; fragments lighter than ``min_words`` (a Han character counts half a word)
are merged into a neighbour, as sentences are. ``compose`` joins chosen units back into text
that reads as sentences: a clause whose neighbour from the same review is chosen too keeps the
review's own comma; any other clause is closed with 。 and loses a leading connective whose
partner clause is missing ("但是电池不耐用" → "电池不耐用。").
"""

from __future__ import annotations

import re

from qkv.summarize.sentences import Span, _weight, split_sentences

UNITS = ("auto", "sentence", "clause")

# A clause boundary: a run of ，；, (ASCII , only between Chinese characters, below) plus spaces.
_CLAUSE = re.compile(r"[，；;,]+\s*")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
# Connectives that tie a clause to the one before it. Alone they dangle ("但是电池不耐用"); the
# list is the closed class of Chinese conjunctions and linking adverbs, not drawn from any data.
CONNECTIVES = ("但是", "但", "可是", "不过", "然而", "而且", "并且", "而", "所以", "因此", "因为", "于是",
               "然后", "另外", "况且", "何况", "甚至", "只是", "就是", "同时", "虽然", "尽管", "总之",
               "总的来说", "也就是说", "再说")
# Not here: conditionals (如果, 要是, 即使) whose removal changes the claim, and 又, 还有, which
# also begin plain clauses ("又快又好", "还有一点").
_LEADING = re.compile(r"^(?:" + "|".join(sorted(map(re.escape, CONNECTIVES), key=len, reverse=True))
                      + r")[，,\s]*")
# Dependent clauses: they open with a subordinating word, or end as a condition or time ("…的话",
# "…的时候"), and only say something with the clause after them ("如果你是学生，就把它当工具书"). Such a
# clause is kept with the next one as one unit. The list is the closed class of Chinese
# subordinators, not drawn from any data.
SUBORDINATORS = ("如果", "要是", "假如", "假设", "即使", "即便", "哪怕", "除了", "对于", "关于", "虽然", "虽说",
                 "尽管", "只要", "只有", "无论", "不管", "不论", "因为", "由于", "为了", "自从", "一旦", "既然")
_DEPENDENT = re.compile(r"^(?:但是?|可是|不过|而且|所以|并且|而)?(?:" + "|".join(SUBORDINATORS) + r")|(?:的话|的时候|之后|以后|之前|以前)[，,；;\s]*$")
_ENUMERATOR = re.compile(r"^\s*(?:\d{1,2}|[一二三四五六七八九十])\s*[、.．)）]\s*")
_OPEN_END = "，,；;、：:"
_CLOSED_END = "。！？!?…」』”）)》】~～"


def is_chinese(text: str) -> bool:
    """More Han characters than Latin words: the clause is the unit."""
    return len(_HAN.findall(text)) > len(_LATIN_WORD.findall(text))


def _clauses(text: str, sent: Span, min_words: float) -> list[Span]:
    parts, start = [], sent.start
    for m in _CLAUSE.finditer(text, sent.start, sent.end):
        if m.group(0)[0] in ",;" and not (_HAN.match(text, m.start() - 1) and _HAN.match(text, m.end())):
            continue  # an ASCII comma outside Chinese text ("3,000", "Hi, there") is not a clause mark
        parts.append((start, m.start() + 1))  # the mark stays with its clause
        start = m.end()
    parts.append((start, sent.end))
    merged: list[list[int]] = []
    last = ""  # the last clause added, which alone decides whether the next one joins it
    for s, e in parts:
        if e <= s or not text[s:e].strip(" ，,；;"):
            continue
        prev = text[merged[-1][0]:merged[-1][1]].strip() if merged else ""
        dependent = bool(_DEPENDENT.search(last.strip()))
        last = text[s:e]
        if merged and (_weight(text[s:e]) < min_words or _weight(prev) < min_words or dependent):
            merged[-1][1] = e
        else:
            merged.append([s, e])
    if len(merged) == 1:
        return [sent]
    return [Span(text[s:e].strip(), s, e) for s, e in merged]


def split_units(text: str, units: str = "auto", min_words: float = 3, clause_words: float = 2) -> list[Span]:
    """Sentences of ``text``, each Chinese one cut into clauses (``units`` auto or clause) of at
    least ``clause_words`` words (4 Han characters by default)."""
    if units not in UNITS:
        from qkv.errors import InputError

        raise InputError(f"unknown units {units!r}; choose {', '.join(UNITS)}")
    out: list[Span] = []
    for sp in split_sentences(text, min_words):
        # A sentence with its line breaks removed has a text that is not its span: keep it whole.
        whole = units == "sentence" or text[sp.start:sp.end] != sp.text or \
            (units == "auto" and not is_chinese(sp.text))
        out.extend([sp] if whole else _clauses(text, sp, clause_words))
    return out


def strip_connective(text: str) -> str:
    """``text`` without a leading connective ("但是屏幕太小" → "屏幕太小"), unless nothing would be left."""
    rest = _LEADING.sub("", text, count=1)
    return rest if _weight(rest) >= 1 else text


def close(text: str) -> str:
    """A Chinese clause ending as a sentence ends: a trailing comma becomes 。, and 。 is added
    when the clause ends without a mark. Other text is returned as it is."""
    if not is_chinese(text):
        return text
    t = text.rstrip()
    while t and t[-1] in _OPEN_END:
        t = t[:-1].rstrip()
    if t and t[-1] not in _CLOSED_END and t[-1] not in ".。！？!?":
        t += "。"
    return t or text


def compose(pieces: list[tuple[str, int, int]]) -> list[str]:
    """Texts for units given in output order as (text, review, position), where position is the
    unit's index among its review's units: runs of consecutive units of one review stay one
    sentence (with their own commas); every other unit is closed and loses a dangling connective."""
    out: list[str] = []
    for k, (text, review, pos) in enumerate(pieces):
        prev = pieces[k - 1] if k else None
        nxt = pieces[k + 1] if k + 1 < len(pieces) else None
        joined_before = prev is not None and prev[1] == review and prev[2] == pos - 1
        joined_after = nxt is not None and nxt[1] == review and nxt[2] == pos + 1
        t = text
        if not joined_before and is_chinese(t):
            t = strip_connective(_ENUMERATOR.sub("", t, count=1))
        if not joined_after:
            t = close(t)
        elif is_chinese(t) and t[-1:] not in _OPEN_END + _CLOSED_END:
            t += "，"
        out.append(t)
    return out
