"""What the tagger sees for each token of a title.

Units are the encoder's own word-piece tokens (not whitespace words): gold values sometimes end
inside a whitespace word ("12cm/22G" holds the length "12cm"), and Chinese titles have no spaces at
all (each character is a token), so tokens are the finest grain whose offsets point back into the
title. Each token gets

* dense features: the encoder's contextual vectors from chosen layers, concatenated, plus the mean
  vector of the word the token belongs to (``Tokens.words()``), so a piece knows its whole word;
* sparse features: the token and its word (lower-cased), word shape, digits and unit suffixes,
  position in the title, neighbouring words, the offer's category, and gazetteer hits — whether the
  token lies in a value seen for some attribute in training (leave-one-out while training, so the
  learner does not learn to trust the gazetteer more than it deserves on unseen titles).

Titles longer than the encoder's window are cut into overlapping windows; each token takes its
vector from the window where it sits farthest from an edge.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from qkv.errors import InputError
from qkv.progress import Count

# The encoder's precision for title token vectors. float32: with bfloat16 vectors (AMX) the dev
# micro-F1 moved by -0.71 on AE-110K (80.70 vs 81.41) and +0.34 on OA-Mine (79.71 vs 79.37),
# outside the 0.3 the issue allows, and training time is the CRF's, not the encoder's
# (docs/attributes.md). "bfloat16" is accepted here and by token_vectors(precision=...).
PRECISION = "float32"


@dataclass(frozen=True)
class TitleTokens:
    """A title's content tokens (no specials): character offsets, texts, and word membership."""

    title: str
    offsets: np.ndarray  # int64 [n, 2], title[s:e] is the token's text
    pieces: tuple[str, ...]  # the tokenizer's token strings
    word_of: np.ndarray  # int64 [n] index of the word each token belongs to
    words: tuple[tuple[int, int], ...]  # (start, end) of each word

    def __len__(self) -> int:
        return len(self.offsets)


def _han_words(title: str, start: int, end: int) -> list[tuple[int, int]]:
    """A tokenizer word that holds Han characters, cut into jieba's words (a Chinese title has no
    spaces, so the tokenizer's word is the whole run); other words stay whole."""
    from qkv.text import zh

    text = title[start:end]
    if not zh.has_han(text):
        return [(start, end)]
    cuts = [(start + s, start + e) for _, s, e in zh.spans(text)]
    return cuts or [(start, end)]


def tokenize_titles(enc, titles: list[str], contents=None, han_words: bool = False) -> list[TitleTokens]:
    """Tokens and words of each title, with no length limit (vectors are windowed later).
    ``contents``: the tokenizer's ``content(titles)`` if the caller already has it. ``han_words``:
    words with Han characters are cut into jieba's words (a token belongs to the word its first
    character is in), instead of one word per run between spaces."""
    out = []
    contents = enc.tokenizer.content(titles) if contents is None else contents
    for title, e in zip(titles, contents):
        full = enc.tokenizer.wrap(title, e)  # the whole title, no limit checked here
        offsets, pieces, word_of, words = [], [], [], []
        pos = {}
        for w in full.words():
            if w.special:
                continue
            parts = _han_words(title, w.start, w.end) if han_words else [(w.start, w.end)]
            first = len(words)
            words.extend(parts)
            for t in w.tokens:
                s0 = full.offsets[t][0]
                k = next((j for j, (a, b) in enumerate(parts) if a <= s0 < b), 0)
                pos[t] = first + k
        for t, ((s, e2), sp) in enumerate(zip(full.offsets, full.special)):
            if sp or e2 <= s:
                continue
            offsets.append((s, e2))
            pieces.append(full.tokens[t])
            word_of.append(pos.get(t, len(words) - 1))
        out.append(TitleTokens(title, np.asarray(offsets, dtype=np.int64).reshape(-1, 2), tuple(pieces),
                               np.asarray(word_of, dtype=np.int64), tuple(words)))
    return out


def visible(tok, title: str, content) -> np.ndarray | None:
    """Which content tokens of a title cover some of its characters (``tokenize_titles`` keeps
    only those): a SentencePiece model emits a bare word-start piece "▁" of no width before
    Chinese text. None when every token does (always so for WordPiece)."""
    w = tok.wrap(title, content)
    keep = np.fromiter((e > s for (s, e), sp in zip(w.offsets, w.special) if not sp), dtype=bool,
                       count=len(content.ids))
    return None if keep.all() else keep


def _windows(n: int, width: int) -> list[tuple[int, int]]:
    if n <= width:
        return [(0, n)]
    stride = max(1, width // 2)
    starts = list(range(0, n - width, stride)) + [n - width]
    return [(s, s + width) for s in starts]


def token_vectors(enc, titles: list[str], layers: tuple[int, ...], batch_size: int = 32,
                  progress=None, contents=None, precision: str | None = None) -> list[np.ndarray]:
    """Contextual vectors [n_content_tokens, hidden·len(layers)] of each title, in input order.

    Uses the encoder's forward pass stopped after the last chosen layer (layers past it are not
    computed; its output is the pass's result, the others come through a trace selector); long
    titles are windowed (see module doc). ``progress`` (``qkv.progress``) counts stage "encode" in
    windows (a title is one window unless it is longer than the model's). ``contents``: the tokenizer's
    ``content(titles)`` if the caller already has it. ``precision``: the encoder's (default
    PRECISION, float32).
    """
    from qkv.model.encoder import Workspace
    from qkv.model.threads import blas_threads
    from qkv.model.trace import Selector

    nl = enc.config.num_layers
    if any(not -nl <= l < nl for l in layers):
        raise InputError(f"layers {list(layers)} out of range for a {nl}-layer model")
    chosen = [l % nl for l in layers]
    tok = enc.tokenizer
    width = enc.config.window_tokens - tok.n_special
    contents = tok.content(titles) if contents is None else contents
    items = []  # (title index, start, stop) windows
    for i, e in enumerate(contents):
        for s, t in _windows(len(e.ids), width):
            if t > s:
                items.append((i, s, t))
    dim = enc.config.hidden_size * len(chosen)
    whole = [len(_windows(len(e.ids), width)) == 1 for e in contents]  # one window: no merging needed
    out = [None if w and len(e.ids) else np.zeros((len(e.ids), dim), dtype=np.float32) for e, w in zip(contents, whole)]
    best = [None if w else np.full(len(e.ids), -1, dtype=np.int64) for e, w in zip(contents, whole)]
    last = max(chosen)  # the forward pass returns this one; the others are traced
    selector = Selector(sorted({f"layers.{l}.out" for l in chosen if l != last}), nl)
    order = sorted(range(len(items)), key=lambda j: items[j][2] - items[j][1])
    count = Count(progress, "encode", len(items))
    pre = len(tok.prefix_ids)
    ws = Workspace()  # the encoder's scratch arrays, reused by every batch of this call
    with blas_threads(enc.threads):
        for b0 in range(0, len(order), batch_size):
            idx = order[b0:b0 + batch_size]
            seqs = [tok.prefix_ids + list(contents[items[j][0]].ids[items[j][1]:items[j][2]]) + tok.suffix_ids
                    for j in idx]
            L = max(len(s) for s in seqs)
            ids = np.full((len(seqs), L), enc.config.pad_token_id, dtype=np.int64)
            mask = np.zeros((len(seqs), L), dtype=bool)
            for r, s in enumerate(seqs):
                ids[r, :len(s)] = s
                mask[r, :len(s)] = True
            store: dict = {}
            hidden = enc.forward(ids, mask, selector, store, upto=last + 1, workspace=ws,
                                 precision=precision or PRECISION)
            parts = [hidden if l == last else store[f"layers.{l}.out"] for l in chosen]
            feats = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)
            for r, j in enumerate(idx):
                i, s, t = items[j]
                if whole[i]:
                    out[i] = feats[r, pre:pre + t].copy()
                    continue
                rows = np.arange(s, t)
                edge = np.minimum(rows - s, t - 1 - rows)
                edge[rows == s] += (s == 0) * 10**6  # a window's edge that is the title's edge is fine
                edge[rows == t - 1] += (t == len(contents[i].ids)) * 10**6
                take = edge > best[i][s:t]
                out[i][rows[take]] = feats[r, pre + np.nonzero(take)[0]]
                best[i][s:t] = np.maximum(best[i][s:t], edge)
            count.add(len(idx))
    for i, (title, e) in enumerate(zip(titles, contents)):  # the tokens tokenize_titles keeps, no others
        keep = visible(tok, title, e)
        if keep is not None:
            out[i] = out[i][keep]
    return out


def cached_token_vectors(enc, titles: list[str], layers: tuple[int, ...], cache_dir: str | Path | None,
                         progress=None, contents=None) -> list[np.ndarray]:
    """``token_vectors`` with an optional on-disk cache keyed by encoder fingerprint, layers and
    the exact titles (so repeated experiments on a data set encode it once)."""
    if cache_dir is None:
        return token_vectors(enc, titles, layers, progress=progress, contents=contents)
    from qkv.model.linear import effective_precision

    h = hashlib.sha1()
    h.update(f"{enc.name}|{enc.fingerprint()}|{list(layers)}|{enc.config.window_tokens}".encode())
    prec = effective_precision(PRECISION, enc)
    if prec != "float32":  # float32 keys unchanged: caches made before precision existed stay valid
        h.update(f"|{prec}".encode())
    for t in titles:
        h.update(t.encode("utf-8") + b"\0")
    path = Path(cache_dir) / f"vectors-{h.hexdigest()[:20]}.npz"
    if path.is_file():
        z = np.load(path)
        flat, lens = z["flat"], z["lens"]
        Count(progress, "encode", len(lens)).set(len(lens))  # all there already
        return np.split(flat, np.cumsum(lens)[:-1]) if len(lens) else []
    vecs = token_vectors(enc, titles, layers, progress=progress, contents=contents)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    lens = np.asarray([len(v) for v in vecs], dtype=np.int64)
    flat = np.concatenate(vecs) if vecs else np.zeros((0, 0), np.float32)
    np.savez(tmp, flat=flat, lens=lens)
    tmp.replace(path)
    return vecs


def dense_features(tt: TitleTokens, vecs: np.ndarray) -> np.ndarray:
    """Token vectors next to the mean vector of each token's word: [n, 2·D]."""
    if len(tt) == 0:
        return np.zeros((0, 2 * vecs.shape[1] if vecs.ndim == 2 else 0), dtype=np.float32)
    nw = int(tt.word_of.max()) + 1
    sums = np.zeros((nw, vecs.shape[1]), dtype=np.float32)
    np.add.at(sums, tt.word_of, vecs)
    counts = np.bincount(tt.word_of, minlength=nw).astype(np.float32)
    word_mean = sums / np.maximum(counts, 1)[:, None]
    return np.concatenate([vecs, word_mean[tt.word_of]], axis=1)


# ---------------------------------------------------------------------------- sparse features
_UNIT = re.compile(r"^[\d.,/x×*+-]*\d([a-z\"'#%]+)", re.I)


@lru_cache(maxsize=1 << 16)
def shape(s: str) -> str:
    """Word shape with runs collapsed: "YA180" -> "Xd", "Men's" -> "Xx'x", "85mm" -> "dx"."""
    out = []
    for c in s:
        k = "X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c
        if not out or out[-1] != k:
            out.append(k)
    return "".join(out)[:8]


def _lower_slicer(title: str):
    """``f(s, e) == title[s:e].lower()``, from one lower-cased copy when that is exact (ASCII:
    every character lower-cases alone, to one character), else slice by slice."""
    if title.isascii():
        low = title.lower()
        return lambda s, e: low[s:e]
    return lambda s, e: title[s:e].lower()


class Gazetteer:
    """Values seen in training, lower-cased, with how many titles labelled each (attr, value)."""

    def __init__(self, counts: dict[str, dict[str, int]] | None = None, max_tokens: int = 8):
        self.counts: dict[str, dict[str, int]] = counts or {}  # value_lower -> {attr: n}
        self.max_tokens = max_tokens

    @classmethod
    def build(cls, examples) -> "Gazetteer":
        counts: dict[str, Counter] = {}
        for ex in examples:
            seen = {(v.lower(), a) for a, vs in ex.values.items() for v in vs if v.strip()}
            for v, a in seen:
                counts.setdefault(v, Counter())[a] += 1
        return cls({v: dict(c) for v, c in counts.items()})

    def _prefixes(self) -> set[str]:
        """Every character prefix of every value: a scan stops as soon as it leaves this set."""
        if getattr(self, "_prefix_set", None) is None:
            self._prefix_set = {v[:k] for v in self.counts for k in range(1, len(v) + 1)}
        return self._prefix_set

    def matches(self, tt: TitleTokens, exclude=frozenset(), low=None) -> list[tuple[int, int, str, int]]:
        """(first token, last token, attr, count) of every token-aligned match in the title.
        ``exclude``: (value_lower, attr) pairs not to count once (leave-one-out in training)."""
        out = []
        n = len(tt)
        starts, ends = tt.offsets[:, 0].tolist(), tt.offsets[:, 1].tolist()
        low = low or _lower_slicer(tt.title)
        prefixes, counts = self._prefixes(), self.counts
        # lower(t[s:e]) is a prefix of lower(t[s:e2]) for e < e2, except around a capital sigma
        # (its lower case depends on what follows), so pruning by prefix is exact without one
        prune = "Σ" not in tt.title
        for i in range(n):
            s = starts[i]
            for j in range(i, min(n, i + self.max_tokens)):
                key = low(s, ends[j])
                if prune and key not in prefixes:  # no value starts with this text: stop extending
                    break
                hit = counts.get(key)
                if hit:
                    for a, c in hit.items():
                        c -= (key, a) in exclude
                        if c > 0:
                            out.append((i, j, a, c))
        return out


def _char_features(pl: list[str], i: int) -> tuple[str, ...]:
    """Character features of token i (lower-cased token texts ``pl``): its first and last
    characters and the character bigrams across its two edges. A SentencePiece piece often holds
    several Chinese characters ("商务"), so the characters a value starts or ends with, and the
    pair across a piece boundary, are not otherwise seen."""
    x = pl[i]
    return ("c0=" + x[0], "c9=" + x[-1], "bp=" + (pl[i - 1][-1] if i > 0 else "^") + x[0],
            "bn=" + x[-1] + (pl[i + 1][0] if i + 1 < len(pl) else "$"))


def sparse_features(tt: TitleTokens, category: str | None, gaz: Gazetteer | None,
                    exclude=frozenset(), vocab: dict[str, int] | None = None, chars: bool = False) -> list[list]:
    """String features of each token (all binary). The word-level ones are made once per word.
    With ``vocab``: each token's feature ids instead (the features in ``vocab``, each once), the
    word-level ones looked up once per word — what extraction needs, without the strings.
    ``chars``: add ``_char_features``."""
    n = len(tt)
    if n == 0:
        return []
    t = tt.title
    low = _lower_slicer(t)
    wspans = tt.words
    words = [t[s:e] for s, e in wspans]
    lw = [low(s, e) for s, e in wspans]
    nw = len(words)
    head, tail = [], []  # per word: features before and after the token's own
    for wi, w in enumerate(words):
        head.append(("w=" + lw[wi], "sh=" + shape(w)))
        f = ["wpos=" + (str(wi) if wi < 3 else "L" if wi == nw - 1 else "M"), "rel=" + str(min(4, 5 * wi // max(1, nw)))]
        tl = []
        if any(c.isdigit() for c in w):
            tl.append("digit")
            m = _UNIT.match(w)
            if m:
                tl.append("unit=" + m.group(1).lower())
        if w.isupper() and len(w) > 1:
            tl.append("allcaps")
        tl += ["p1=" + (lw[wi - 1] if wi > 0 else "<s>"), "n1=" + (lw[wi + 1] if wi + 1 < nw else "</s>"),
               "p2=" + (lw[wi - 2] if wi > 1 else "<s>"), "n2=" + (lw[wi + 2] if wi + 2 < nw else "</s>")]
        tail.append((f, tl))
    offs = tt.offsets.tolist()
    pl = [low(s, e) for s, e in offs]
    word_of = tt.word_of.tolist()
    if vocab is not None:
        return _feature_ids(tt, category, gaz, exclude, vocab, low, head, tail, offs, pl, word_of, chars)
    cat = ["cat=" + category] if category else []
    feats: list[list[str]] = []
    for i, (s, e) in enumerate(offs):
        wi = word_of[i]
        ws, we = wspans[wi]
        (fw, fsh), (fpos, ftl) = head[wi], tail[wi]
        f = ["t=" + pl[i], fw, fsh, "tsh=" + shape(t[s:e]), *fpos,
             "wstart" if s == ws else "wcont", "wend" if e == we else "wmid", *ftl,
             "pt=" + (pl[i - 1] if i > 0 else "<s>"), "nt=" + (pl[i + 1] if i + 1 < n else "</s>"), *cat]
        if chars:
            f += _char_features(pl, i)
        feats.append(f)
    if gaz is not None:
        for i, j, a, c in gaz.matches(tt, exclude, low):
            for k, f in _gazetteer_features(i, j, a, c):
                feats[k].append(f)
    return feats


def _gazetteer_features(i: int, j: int, a: str, c: int):
    """(token, feature) pairs of one gazetteer match of attribute ``a`` over tokens i..j."""
    yield i, "gB=" + a
    for k in range(i + 1, j + 1):
        yield k, "gI=" + a
    if j == i:
        yield i, "gU=" + a
    yield i, "gB*"
    if c > 1:
        yield i, "gB2=" + a


def _feature_ids(tt, category, gaz, exclude, vocab, low, head, tail, offs, pl, word_of, chars=False) -> list[list[int]]:
    """``sparse_features`` as vocabulary ids (see there). The base features of a token are all
    distinct (each template has its own prefix), so only the gazetteer's, which can repeat when
    several matches start at one token, need de-duplicating."""
    get = vocab.get
    n, t, wspans = len(offs), tt.title, tt.words
    word_ids = [[k for k in map(get, (*h, *f, *tl)) if k is not None] for h, (f, tl) in zip(head, tail)]
    edge = [get("wcont"), get("wstart"), get("wmid"), get("wend")]
    fixed = [get("cat=" + category)] if category else []
    out = []
    for i, (s, e) in enumerate(offs):
        wi = word_of[i]
        ws, we = wspans[wi]
        row = [k for k in (get("t=" + pl[i]), get("tsh=" + shape(t[s:e])), edge[s == ws], edge[2 + (e == we)],
                           get("pt=" + (pl[i - 1] if i > 0 else "<s>")),
                           get("nt=" + (pl[i + 1] if i + 1 < n else "</s>")), *fixed) if k is not None]
        row += word_ids[wi]
        if chars:  # distinct from each other and from the base features (own prefixes)
            row += [k for k in map(get, _char_features(pl, i)) if k is not None]
        out.append(row)
    if gaz is not None:
        extra: dict[int, set] = {}
        for i, j, a, c in gaz.matches(tt, exclude, low):
            for k, f in _gazetteer_features(i, j, a, c):
                fid = get(f)
                if fid is not None:
                    extra.setdefault(k, set()).add(fid)
        for k, ids in extra.items():
            out[k] += ids
    return out
