"""Learned term weights on the keyword side (DeepCT-Index): each title's keyword document is
written with a term-weight head's per-word weights as term frequencies instead of raw counts.

DeepCT-Index (Dai & Callan 2019, "Context-Aware Sentence/Passage Term Importance Estimation for
First Stage Retrieval", §3.2) turns a predicted term weight ŷ ∈ [0, 1] into an integer term
frequency, tf = round(ŷ · scale), and indexes the document as if each term occurred that often, so
an unchanged BM25 engine reads the learned weights. Here the head is ``qkv.explain.terms.TermHead``
(``qkv terms train``: how likely a title word is to be searched) and the keyword document becomes
each of the title's normalised words (``qkv.text.keywords.normalize``) repeated round(tf · scale)
times, with

    tf(t) = max(λ · count(t) + clip(ŷ(w), 0, 1), floor)   for t a keyword term of the head's word w
    (λ = ``blend``: raw counts mixed in; ``floor`` when ``keep_zero``: a word the head gives ~0
    stays findable, at least one repeat; 0 when not)
    terms no head word covers (a unit made of '"', a stop word the head skips): count(t) ·
    max(λ, floor), at least one repeat per occurrence.

The BM25 that scores them (``qkv.search.embedded.bm25.Scoring``): with ``k1``/``b`` set, the
postings plans read tf = repeats / scale — the learned weight itself, to 1/scale — and score it with
those k1 and b, as DeepCT and HDCT (Dai & Callan 2020, "Context-Aware Document Term Weighting for
Ad-Hoc Search") tune BM25's k1/b for their weighted documents rather than keep the defaults made for
raw counts (DeepCT's MS MARCO runs are reported with k1 = 10, b = 0.9 at scale 100 — k1 = 0.1 in
weight units — in AdeDZY/DeepCT issue 2; Home Depot half a chose the same, docs/search.md).
With ``k1`` None (indexes written before these settings were recorded) FTS5's bm25() ranks the
repeat counts (k1 = 1.2, b = 0.75). FTS5's own bm25() only picks rows for queries the postings
cannot score (a term FTS5 splits); those rows are scored by the index's formula too.

Only the indexed keyword text changes: the stored title (display, snippets, highlights, the
dense side) and queries are untouched. The index's manifest records which head and settings wrote
it (``extra.term_weights``), so an update weights new titles by the same head and scores as before,
and a rebuild keeps the option; searching needs no head (the weights are in the index).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable, Sequence

from qkv.errors import InputError
from qkv.text import keywords as textmod

MANIFEST_KEY = "term_weights"  # where an index's manifest (extra) records the weighting
# Defaults chosen on Home Depot dev half a, reported on half b (docs/search.md, "Learned term weights")
SCALE = 20.0  # repeats of a word of weight 1: the weights to 0.05 (as good as 0.01 on half a, a fifth
              # of scale 100's keyword documents)
KEEP_ZERO = True  # a word weighted ~0 is kept rather than dropped (moot while BLEND > 0)
K1, B = 0.1, 0.9  # BM25 over tf = repeats / scale (None: FTS5's k1/b over the repeat counts)
BLEND = 0.25  # λ: tf = λ · count + ŷ — every title word keeps a quarter of a plain occurrence
FLOOR = None  # the least weight a kept word gets (None: one repeat, 1 / scale)
BATCH = 256  # titles per head pass
OFF = "none"  # ``term_weights="none"``: build a plain keyword side (drop an index's weighting)


def file_digest(path: Path) -> str:
    """sha256 of a head file: the manifest names the exact head that weighted the titles."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def check_settings(scale: float, k1: float | None, b: float | None, blend: float, floor: float | None) -> None:
    """Refuse settings no BM25 can read, saying which and what is allowed."""
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise InputError(f"the term-weight scale must be above 0 (got {scale}): repeats of a word of weight 1")
    if (k1 is None) != (b is None):
        raise InputError("give the keyword side's BM25 k1 and b together (--term-k1 and --term-b), or neither")
    if k1 is not None and not (math.isfinite(k1) and k1 > 0):
        raise InputError(f"BM25's k1 must be above 0 (got {k1}): it sets how fast a term's weight saturates")
    if b is not None and not 0 <= b <= 1:
        raise InputError(f"BM25's b must be between 0 and 1 (got {b}): the share of length normalisation")
    if not (math.isfinite(blend) and blend >= 0):
        raise InputError(f"the term-weight blend λ must be 0 or above (got {blend}): tf = λ · count + weight")
    if floor is not None and not (math.isfinite(floor) and 0 <= floor <= 1):
        raise InputError(f"the term-weight floor must be between 0 and 1 (got {floor}): "
                         "the least weight a kept word gets")


@dataclass(frozen=True)
class TermWeighting:
    """How an index's keyword side is weighted (the manifest's ``extra.term_weights``). An index
    written before k1/b/blend/floor were recorded reads as it was written: FTS5's BM25 over the
    repeat counts, no blend, words ~0 kept as one repeat."""

    head: str  # the head file's absolute path when the index was written
    sha256: str
    model: str  # the encoder whose token vectors the head reads
    scale: float = SCALE  # repeats of a word of weight 1 in the keyword document (1 / the weights' resolution)
    keep_zero: bool = KEEP_ZERO
    k1: float | None = K1  # BM25 over tf = repeats / scale (None: FTS5's k1 = 1.2, b = 0.75 over repeats)
    b: float | None = B
    blend: float = BLEND  # λ in tf = λ · count + ŷ
    floor: float | None = FLOOR  # the least weight of a kept word (None: 1 / scale)

    def __post_init__(self):
        check_settings(self.scale, self.k1, self.b, self.blend, self.floor)

    @property
    def least(self) -> float:
        """The weight a word the head gives ~0 keeps (0: it is left out)."""
        if not self.keep_zero:
            return 0.0
        return 1.0 / self.scale if self.floor is None else self.floor

    def scoring(self):
        """The BM25 the index's keyword plans score with (``qkv.search.embedded.bm25.Scoring``)."""
        from qkv.search.embedded import bm25

        return bm25.FTS5 if self.k1 is None else bm25.Scoring(self.k1, self.b, self.scale)

    def settings(self) -> dict:
        """What decides the keyword documents and their scores (an update must write with the same)."""
        return {k: getattr(self, k) for k in SETTINGS}

    def describe(self) -> str:
        """The settings in words (``qkv index`` prints them)."""
        bm = ("FTS5's BM25 over the repeat counts" if self.k1 is None
              else f"BM25 k1 {self.k1:g}, b {self.b:g} over the weights")
        zero = f"words weighted ~0 kept at {self.least:g}" if self.keep_zero else "words weighted ~0 left out"
        # with a blend every word keeps λ per occurrence, so the floor says nothing more
        return f"scale {self.scale:g}, {bm}, " + (f"tf = {self.blend:g} · count + weight" if self.blend else zero)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d) -> "TermWeighting":
        try:
            opt = lambda k: None if d.get(k) is None else float(d[k])  # noqa: E731
            return cls(str(d["head"]), str(d["sha256"]), str(d["model"]), float(d.get("scale", SCALE)),
                       bool(d.get("keep_zero", KEEP_ZERO)), opt("k1"), opt("b"), float(d.get("blend", 0.0)),
                       opt("floor"))
        except (KeyError, TypeError, ValueError, InputError) as e:
            raise InputError(f"the index's manifest records term weights it cannot read ({e}); "
                             "rebuild it with --term-weights HEAD or --term-weights none") from None

    @classmethod
    def of_file(cls, path, **settings) -> "TermWeighting":
        """The weighting by the head at ``path`` (checked: a clear error for a missing or foreign
        file) with ``settings`` (``SETTINGS``; those not given: the defaults)."""
        from qkv.explain.terms import TermHead

        unknown = set(settings) - set(SETTINGS)
        if unknown:
            raise InputError(f"unknown term-weight setting(s) {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(SETTINGS)}")
        s = {**DEFAULTS, **settings}  # as given: k1 = None is FTS5's BM25 over repeats, as recorded
        check_settings(s["scale"], s["k1"], s["b"], s["blend"], s["floor"])  # before the head is read
        path = Path(path).expanduser().resolve()
        head = TermHead.load(path)  # refuses a missing, damaged or foreign file, saying which
        return cls(str(path), file_digest(path), head.model, **s)


# the settings are TermWeighting's fields after the head's identity (head, sha256, model), with their defaults
DEFAULTS = {f.name: f.default for f in fields(TermWeighting)[3:]}
SETTINGS = tuple(DEFAULTS)
OPTIONS = {"scale": "--term-scale", "keep_zero": "--keep-zero/--drop-zero", "k1": "--term-k1", "b": "--term-b",
           "blend": "--term-blend", "floor": "--term-floor"}  # the `qkv index` option of each setting


def recorded(manifest_extra) -> TermWeighting | None:
    """The weighting an index records (None: a plain keyword side)."""
    d = (manifest_extra or {}).get(MANIFEST_KEY)
    return None if not d else TermWeighting.from_json(d)


def scoring_of(manifest_extra):
    """The BM25 an index's keyword side is scored with (FTS5's for a plain one)."""
    from qkv.search.embedded import bm25

    tw = recorded(manifest_extra)
    return bm25.FTS5 if tw is None else tw.scoring()


def check_available(tw: TermWeighting, where) -> None:
    """The recorded head must still be the file it was: new titles are weighted by it."""
    p = Path(tw.head)
    if not p.is_file():
        raise InputError(f"the index at {where} weights its keyword side with the term head {p}, which is missing: "
                         "new titles need it. Restore the file, or rebuild with --rebuild --term-weights FILE "
                         "(another head) or --term-weights none (plain)")
    if file_digest(p) != tw.sha256:
        raise InputError(f"the term head {p} changed since the index at {where} was written with it: an update would "
                         "weight new titles by another head. Rebuild with --rebuild to reweight every title by it")


def keyword_text(title: str, words: Sequence[str], weights: Sequence[float], *, scale: float = SCALE,
                 keep_zero: bool = KEEP_ZERO, blend: float = BLEND, floor: float | None = FLOOR,
                 han: str | None = None) -> str:
    """The keyword document of ``title`` whose head words ``words`` weigh ``weights``: its
    normalised terms, each repeated round(tf · scale) times (module doc), in the title's order."""
    kw = {} if han is None else {"han": han}
    least = 0.0 if not keep_zero else (1.0 / scale if floor is None else floor)
    weight: dict[str, float] = {}
    for w, y in zip(words, weights):
        for t in textmod.normalize(w, **kw).split():
            weight[t] = max(weight.get(t, 0.0), min(max(float(y), 0.0), 1.0))
    terms = textmod.normalize(title, **kw).split()
    count: dict[str, int] = {}
    for t in terms:
        count[t] = count.get(t, 0) + 1
    out: list[str] = []
    for t in dict.fromkeys(terms):  # distinct, first-seen order
        if t in weight:
            tf = int(round(max(blend * count[t] + weight[t], least) * scale))
            tf = max(tf, 1) if least > 0 else tf
        else:  # no head word covers it: its count, weighted as the floor (at least one repeat each)
            tf = max(count[t], int(round(count[t] * max(blend, least) * scale)))
        out.extend([t] * tf)
    return " ".join(out)


class Weigher:
    """Keyword documents for titles, by a head (``keyword_texts``): loads the head and the encoder
    its vectors come from (the index's own when it is that model)."""

    def __init__(self, tw: TermWeighting, encoder=None, *, han: str | None = None,
                 catalog_titles: Sequence[str] | None = None):
        from qkv.explain.terms import TermHead

        head = TermHead.load(tw.head)
        if encoder is None or encoder.name != head.model:
            from qkv.model import shared_encoder

            encoder = shared_encoder(head.model)
        head.check(encoder)  # other weights under the same name are refused, saying which model
        self.tw, self.head, self.encoder, self.han = tw, head, encoder, han
        # A head trained with catalog features (neighbour share, brands) reads the catalog being
        # indexed, embedded by its own model once, when the first titles are weighed.
        self._titles, self._catalog = (list(catalog_titles) if catalog_titles is not None else None), None
        if head.needs_catalog and self._titles is None:
            raise InputError("this term head reads the catalog (trained with catalog features); weigh titles "
                             "with the catalog they belong to, or train it with --no-catalog-features")

    def catalog(self):
        if self.head.needs_catalog and self._catalog is None:
            from qkv.explain.points import PointsCatalog

            self._catalog = PointsCatalog.build(self._titles, self.encoder)
        return self._catalog

    def keyword_texts(self, titles: Sequence[str], progress: Callable[[int], None] | None = None) -> list[str]:
        out: list[str] = []
        for a in range(0, len(titles), BATCH):
            part = list(titles[a:a + BATCH])
            for t, (words, ys) in zip(part, self.head.title_scores(self.encoder, part, catalog=self.catalog())):
                out.append(keyword_text(t, words, ys, scale=self.tw.scale, keep_zero=self.tw.keep_zero,
                                        blend=self.tw.blend, floor=self.tw.floor, han=self.han))
            if progress is not None:
                progress(len(part))
        return out
