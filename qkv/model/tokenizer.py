"""The model's own tokenizer (``tokenizer.json`` through the ``tokenizers`` library), keeping
character offsets so every token, and every word made of tokens, points back into the text."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkv.errors import InputError, ModelError


@dataclass(frozen=True)
class Tokens:
    """One text's tokens, special tokens included. offsets are (start, end) character spans in
    ``text``; special tokens have (0, 0) and special=True."""

    text: str
    ids: np.ndarray  # int64 [n]
    tokens: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]
    special: tuple[bool, ...]

    def __len__(self) -> int:
        return len(self.ids)

    def words(self, segment: bool = False) -> list["Word"]:
        """The text's words (``group_words``); ``segment=True`` also splits runs of Chinese
        characters into words with the segmenter search uses (``qkv.text.zh``)."""
        return group_words(self, segment)


@dataclass(frozen=True)
class Word:
    """A word of the original text and the token positions it is made of."""

    text: str
    start: int
    end: int
    tokens: tuple[int, ...]
    special: bool = False


def _is_punct(s: str) -> bool:
    return bool(s) and all(unicodedata.category(c).startswith(("P", "S")) for c in s)


def _han_splits(t: Tokens, group: list[int]) -> list[list[int]]:
    """``group`` (touching pieces) cut where the Chinese segmenter puts a word boundary that is
    also a boundary between two pieces; a piece that straddles a segmenter boundary keeps the two
    words together (a piece is never split). Bare "▁" markers go with the piece after them."""
    from qkv.text import zh

    s, e = t.offsets[group[0]][0], t.offsets[group[-1]][1]
    text = t.text[s:e]
    if not zh.has_han(text):
        return [group]
    folded = zh.fold(text)  # jieba's dictionary is simplified; t2s keeps lengths, checked anyway
    cuts = {s + a for _, a, _ in zh.spans(folded if len(folded) == len(text) else text)}
    out: list[list[int]] = []
    for i in group:  # a new word where a piece (or a marker before it) starts at a boundary
        opens = out and t.offsets[i][0] in cuts and any(t.offsets[j][1] > t.offsets[j][0] for j in out[-1])
        if not out or opens:
            out.append([i])
        else:
            out[-1].append(i)
    return out


def group_words(t: Tokens, segment: bool = False) -> list[Word]:
    """Merge word pieces into words: tokens whose character spans touch (no space between) form
    one word ("Men's", "270mm", "##ing" pieces, a run of Chinese characters), except that
    punctuation at either edge of such a run (a trailing comma, brackets) stands alone.
    Special tokens are words of their own. A SentencePiece word start with no characters of its
    own (a bare "▁", empty span) belongs to the word that follows it.

    ``segment``: a run holding Chinese is further cut into the words of ``qkv.text.zh.spans``
    (jieba, as keyword search indexes it) wherever a segmenter boundary falls between two pieces:
    "透气跑鞋" → 透气 | 跑鞋. Without it a run of Chinese characters with no space is one "word"."""
    runs: list[list[int]] = []
    marker = lambda j: not t.special[j] and t.offsets[j][1] <= t.offsets[j][0]  # noqa: E731
    for i, ((s, e), sp) in enumerate(zip(t.offsets, t.special)):
        if sp or e <= s:
            runs.append([i])
            continue
        prev = runs[-1][-1] if runs else None
        if prev is not None and not t.special[prev] and t.offsets[prev][1] == s and (
                t.offsets[prev][1] > t.offsets[prev][0] or all(marker(j) for j in runs[-1])):
            runs[-1].append(i)
        else:
            runs.append([i])
    words: list[Word] = []
    for run in runs:
        if t.special[run[0]] or all(t.offsets[j][1] <= t.offsets[j][0] for j in run):
            words.append(Word(t.tokens[run[0]], 0, 0, (run[0],), special=True))
            continue
        lead = 0  # word-start markers go with the first group
        while marker(run[lead]):
            lead += 1
        markers, run = run[:lead], run[lead:]
        lo, hi = 0, len(run)
        piece = lambda j: t.text[t.offsets[run[j]][0]:t.offsets[run[j]][1]]  # noqa: E731
        while lo < hi - 1 and _is_punct(piece(lo)):
            lo += 1
        while hi - 1 > lo and _is_punct(piece(hi - 1)):
            hi -= 1
        groups = [run[j:j + 1] for j in range(lo)] + [run[lo:hi]] + [run[j:j + 1] for j in range(hi, len(run))]
        groups[0] = markers + groups[0]
        if segment:
            groups = [g for group in groups for g in _han_splits(t, group)]
        for group in groups:
            s, e = t.offsets[group[0]][0], t.offsets[group[-1]][1]
            words.append(Word(t.text[s:e], s, e, tuple(group)))
    return words


METASPACE = "\u2581"  # "▁": SentencePiece's mark of a word start (XLM-R, multilingual-e5)


def _trim_metaspace(text: str, token: str, span: tuple[int, int]) -> tuple[int, int]:
    """A SentencePiece token's span without the space its "▁" stands for, so a span holds the
    token's own characters as WordPiece spans do. A bare "▁" (a word start with its characters in
    the next token) gets an empty span where the word starts; tokenizers gives the first one the
    span of the text's first character (the space it stands for was added, not in the text)."""
    if not token.startswith(METASPACE):
        return span
    s, e = span
    if token.strip(METASPACE):  # "▁word": skip the space(s) it stands for
        while s < e and text[s].isspace():
            s += 1
        return s, e
    if s < len(text) and text[s].isspace():  # a bare "▁" for real spaces: empty, after them
        while s < e and text[s].isspace():
            s += 1
        return s, s
    return s, s  # a bare "▁" for the added space before the text: empty, where it starts


class Tokenizer:
    """Wraps ``tokenizers.Tokenizer``; never pads or truncates behind the caller's back."""

    def __init__(self, path: str | Path):
        from tokenizers import Tokenizer as HFTokenizer

        path = Path(path)
        if not path.is_file():
            raise ModelError(f"no tokenizer at {path}; a model directory needs tokenizer.json "
                             "(save one with transformers' tokenizer.save_pretrained)")
        try:
            self._tok = HFTokenizer.from_file(str(path))
        except Exception as e:  # the library raises a bare Exception on malformed files
            raise ModelError(f"cannot read {path}: {e}") from None
        # Some tokenizer.json files carry truncation/padding settings (MiniLM's: 128): we decide those.
        self._tok.no_truncation()
        self._tok.no_padding()
        empty = self._tok.encode("", add_special_tokens=True)
        self.prefix_ids = list(empty.ids[:1]) if len(empty.ids) >= 1 else []
        self.suffix_ids = list(empty.ids[1:]) if len(empty.ids) >= 2 else []
        self.prefix_tokens = list(empty.tokens[:1]) if len(empty.ids) >= 1 else []
        self.suffix_tokens = list(empty.tokens[1:]) if len(empty.ids) >= 2 else []
        self.n_special = len(self.prefix_ids) + len(self.suffix_ids)

    @property
    def unk_id(self) -> int | None:
        """The id of the model's unknown token ([UNK] for WordPiece, <unk> for SentencePiece), or None."""
        if not hasattr(self, "_unk_id"):
            name = getattr(self._tok.model, "unk_token", None)  # WordPiece exposes it
            if name is not None:
                self._unk_id = self._tok.token_to_id(name)
            else:  # Unigram keeps it in its JSON only (1.7 s to serialise for e5): the usual names
                ids = (self._tok.token_to_id(n) for n in ("<unk>", "[UNK]", "<UNK>"))
                self._unk_id = next((i for i in ids if i is not None), None)
        return self._unk_id

    @staticmethod
    def _check(texts) -> list[str]:
        if isinstance(texts, str):
            raise InputError("expected a list of texts, got one string; wrap it in a list")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"text {i} is {type(t).__name__}, not str; qkv encodes strings only")
        return texts

    def content(self, texts) -> list:
        """The tokenizers Encodings of ``texts`` without special tokens."""
        return self._tok.encode_batch(self._check(texts), add_special_tokens=False)

    def count(self, texts) -> list[int]:
        """Number of tokens of each text, special tokens excluded."""
        return [len(e.ids) for e in self.content(texts)]

    def wrap(self, text: str, enc, start: int = 0, stop: int | None = None) -> Tokens:
        """Tokens[start:stop] of a content encoding, with the model's special tokens around them."""
        stop = len(enc.ids) if stop is None else stop
        ids = self.prefix_ids + list(enc.ids[start:stop]) + self.suffix_ids
        toks = self.prefix_tokens + list(enc.tokens[start:stop]) + self.suffix_tokens
        content = [_trim_metaspace(text, tok, tuple(o)) for tok, o in zip(enc.tokens[start:stop], enc.offsets[start:stop])]
        offs = [(0, 0)] * len(self.prefix_ids) + content + [(0, 0)] * len(self.suffix_ids)
        special = [True] * len(self.prefix_ids) + [False] * (stop - start) + [True] * len(self.suffix_ids)
        return Tokens(text, np.asarray(ids, dtype=np.int64), tuple(toks), tuple(offs), tuple(special))

    def __call__(self, texts, max_tokens: int | None = None) -> list[Tokens]:
        """Tokenize with special tokens; cut to ``max_tokens`` (specials included) when given."""
        texts = self._check(texts)
        out = []
        for text, enc in zip(texts, self.content(texts)):
            stop = None if max_tokens is None else max(0, min(len(enc.ids), max_tokens - self.n_special))
            out.append(self.wrap(text, enc, 0, stop))
        return out
