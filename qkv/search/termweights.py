"""Learned term weights on the keyword side (DeepCT-Index): each title's keyword document is
written with a term-weight head's per-word weights as term frequencies instead of raw counts.

DeepCT-Index (Dai & Callan 2019, "Context-Aware Sentence/Passage Term Importance Estimation for
First Stage Retrieval", §3.2) turns a predicted term weight ŷ ∈ [0, 1] into an integer term
frequency, tf = round(ŷ · scale), and indexes the document as if each term occurred that often, so
an unchanged BM25 engine reads the learned weights. Here the head is ``qkv.explain.terms.TermHead``
(``qkv terms train``: how likely a title word is to be searched) and the engine is FTS5's bm25 over
``qkv.text.keywords.normalize``'s words, so the keyword document becomes each of the title's
normalised words repeated tf times:

    tf(t) = round(clip(ŷ(w), 0, 1) · scale)     for t a keyword term of the head's word w
    tf(t) = max(tf(t), 1) when ``keep_zero``    (a word the head gives ~0 stays findable)
    terms no head word covers (a unit made of "'", a stop word the head skips) keep their count.

Only the indexed keyword text changes: the stored title (display, snippets, highlights, the
dense side) and queries are untouched. The index's manifest records which head and settings wrote
it (``extra.term_weights``), so an update weights new titles by the same head and a rebuild keeps
the option; searching needs no head (the weights are in the index).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from qkv.errors import InputError
from qkv.text import keywords as textmod

MANIFEST_KEY = "term_weights"  # where an index's manifest (extra) records the weighting
SCALE = 10.0  # tf of a word the head is sure shoppers search (ŷ = 1); measured in docs/search.md
KEEP_ZERO = True  # a word weighted ~0 is kept once rather than dropped (docs/search.md)
BATCH = 256  # titles per head pass
OFF = "none"  # ``term_weights="none"``: build a plain keyword side (drop an index's weighting)


def file_digest(path: Path) -> str:
    """sha256 of a head file: the manifest names the exact head that weighted the titles."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class TermWeighting:
    """How an index's keyword side is weighted (the manifest's ``extra.term_weights``)."""

    head: str  # the head file's absolute path when the index was written
    sha256: str
    model: str  # the encoder whose token vectors the head reads
    scale: float = SCALE
    keep_zero: bool = KEEP_ZERO

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d) -> "TermWeighting":
        try:
            return cls(str(d["head"]), str(d["sha256"]), str(d["model"]), float(d.get("scale", SCALE)),
                       bool(d.get("keep_zero", KEEP_ZERO)))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"the index's manifest records term weights it cannot read ({e}); "
                             "rebuild it with --term-weights HEAD or --term-weights none") from None

    @classmethod
    def of_file(cls, path, *, scale: float = SCALE, keep_zero: bool = KEEP_ZERO) -> "TermWeighting":
        """The weighting by the head at ``path`` (checked: a clear error for a missing or foreign file)."""
        from qkv.explain.terms import TermHead

        if not scale > 0:
            raise InputError(f"the term-weight scale must be above 0 (got {scale})")
        path = Path(path).expanduser().resolve()
        head = TermHead.load(path)  # refuses a missing, damaged or foreign file, saying which
        return cls(str(path), file_digest(path), head.model, float(scale), bool(keep_zero))


def recorded(manifest_extra) -> TermWeighting | None:
    """The weighting an index records (None: a plain keyword side)."""
    d = (manifest_extra or {}).get(MANIFEST_KEY)
    return None if not d else TermWeighting.from_json(d)


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
                 keep_zero: bool = KEEP_ZERO, han: str | None = None) -> str:
    """The keyword document of ``title`` whose head words ``words`` weigh ``weights``: its
    normalised terms, each repeated tf times (module doc), in the title's order."""
    kw = {} if han is None else {"han": han}
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
            tf = int(round(weight[t] * scale))
            tf = max(tf, 1) if keep_zero else tf
        else:
            tf = count[t]
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
                out.append(keyword_text(t, words, ys, scale=self.tw.scale, keep_zero=self.tw.keep_zero, han=self.han))
            if progress is not None:
                progress(len(part))
        return out
