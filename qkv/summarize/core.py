"""Extractive review summaries under a hard token budget.

    reviews ─ split ─▶ sentences ─ encoder ─▶ E ─ attention softmax(E·Eᵀ/τ) ─▶ importance π
            ─ MMR under the budget (and rating balance) ─▶ summary

The budget is checked on the exact text that is returned, in the chosen tokenizer, each time a
sentence is added: BPE counts of joined sentences are not always the sum of their parts, so the
sum is only a fast pre-check. A summary therefore never has more tokens than the budget.

Large inputs (more than ``full_limit`` sentences) are reduced first: every sentence gets a cheap
vector (the mean of the model's own input token embeddings, no transformer layers), k-means groups
them into ``clusters`` groups, and the sentence nearest each centroid stands for its group with
the group's size as its mass. Only those representatives go through the encoder, so time and
memory stay bounded (see bench/summarize.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np

from qkv.errors import InputError
from qkv.model.threads import blas_threads
from qkv.summarize.rank import importance, kmeans, received
from qkv.summarize.readers import Review, rating_scale
from qkv.summarize.units import compose, split_units
from qkv.summarize.tokens import Counter, get_counter

ORDERS = ("original", "score")
# The encoder's precision for sentences. float32 until ROUGE in bfloat16 is measured against it
# (`qkv eval summarize` with PRECISION = "bfloat16" ran, but its qkv rows were not kept in time);
# "bfloat16" runs on the CPU's matrix unit where there is one.
PRECISION = "float32"


@dataclass(frozen=True)
class Params:
    """How sentences are scored and chosen. The defaults are the variant that scored best on the
    FewSum dev data (train + val); docs/summarize.md has the comparison."""

    score: str = "stationary"  # stationary (π = πP) | received (one step) | centroid (cosine to the mean)
    tau: float = 0.2           # softmax temperature over cosine similarities
    lam: float = 0.7           # MMR: weight of importance against redundancy
    personal: float = 0.5      # importance × this for first-person sentences ("I bought it for my wife")
    relevance: str = "log"     # MMR's importance term: linear (π / max π) or log (τ·log π, cosine units)
    duplicate: float = 0.85    # a sentence this similar (cosine) to a chosen one is never added
    length_power: float = 0.0  # positive gains divided by tokens**length_power (linear relevance only; 0: off)
    balance: bool = True       # keep positive and negative reviews' points in proportion
    informative: bool = True   # never choose units that say nothing about the product (informative.py)
    share: str = "proportional"  # proportional: complaint units' share follows the reviews' | one: >= 1 each side
    # Without ratings, praise/complaint from the text: "review" (each unit takes its whole review's side;
    # zh dev R-1 33.00) beat "unit" (each clause read alone: 32.10) and "off" (32.50).
    text_sentiment: str = "review"
    min_words: float = 3       # shorter fragments are merged into a neighbour
    full_limit: int = 1500     # above this many sentences, cluster first
    clusters: int = 400        # representatives kept when reducing
    reduce: str = "cluster"    # how large inputs are reduced: cluster (k-means on static vectors) | sample
    dedup: bool = True         # identical sentences are encoded once and weigh as many (mass)
    center: str = "auto"       # auto | on | off: score on vectors minus their mean (see _centre)
    units: str = "auto"        # auto (clauses in Chinese, sentences otherwise) | sentence | clause
    clause_words: float = 2    # shorter clauses are merged into a neighbour (a Han character: half a word)
    # Chinese units are chosen by word coverage per token × (π / max π)**coverage_power (coverage.py;
    # zh dev without ratings 33.41/11.14 → 36.17/12.73, docs/summarize.md); auto: when most units are Chinese.
    coverage: str = "auto"     # auto | on | off (off: MMR on attention alone, as for English)
    coverage_power: float = 2.0
    cost_power: float = 1.0    # coverage per tokens**cost_power (1: value per token)


@dataclass(frozen=True)
class SummarySentence:
    text: str
    review: int        # index of the source review (0-based)
    start: int         # character span in that review
    end: int
    score: float       # attention received π (a share of all attention; halved for first-person sentences)
    tokens: int        # tokens of this sentence alone
    rating: float | None = None
    rank: int = 0      # 1 = picked first
    shown: str = ""    # as it reads in the summary: a clause closed with 。, a dangling 但是 dropped


@dataclass(frozen=True)
class Summary:
    text: str
    sentences: tuple[SummarySentence, ...]
    budget: int
    tokenizer: str
    tokens_before: int
    tokens_after: int
    n_reviews: int
    n_sentences: int
    order: str = "original"
    cut: bool = False
    notes: tuple[str, ...] = ()
    method: str = "qkv"
    points: dict | None = None  # {"praise": [Point], "complaints": [Point]} when asked (points.py)
    model: str = ""    # the encoder that read the reviews (the language picks it when none is named)

    @property
    def saving(self) -> float:
        """Share of the input's tokens not sent, in percent."""
        return 100.0 * (1 - self.tokens_after / self.tokens_before) if self.tokens_before else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["sentences"] = [asdict(s) for s in self.sentences]
        d["notes"] = list(self.notes)
        d["saving"] = round(self.saving, 2)
        d.pop("points")
        if self.points is not None:
            d["points"] = {side: [p.to_dict() for p in ps] for side, ps in self.points.items()}
        return d


@dataclass
class Document:
    """Reviews split into sentences, with vectors for the candidate sentences."""

    reviews: list[str]
    ratings: list[float | None]
    texts: list[str]                 # every sentence
    review_of: np.ndarray            # [n] source review index
    spans: list[tuple[int, int]]
    cand: np.ndarray                 # indices of sentences that may be picked
    vectors: np.ndarray              # [len(cand), d] unit vectors
    mass: np.ndarray                 # [len(cand)] sentences each candidate stands for
    scale: tuple[float, float] | None = None
    notes: list[str] = field(default_factory=list)
    threads: int | None = None       # BLAS threads for the scoring (the encoder's setting)
    position: np.ndarray | None = None  # [n] index of each unit among its review's units
    member: np.ndarray | None = None    # [n] the candidate (position in cand) each unit is counted with; -1: none
    model: str = ""                  # the encoder that read them (its name), said with the summary

    @property
    def n(self) -> int:
        return len(self.texts)


def default_encoder(texts):
    """The encoder used when none is given: the shared one (``qkv.model.shared``) of the model the
    rule picks for these texts (``qkv.model.default_model``: English → MiniLM, Chinese → e5)."""
    from qkv.model import default_model, shared_encoder

    return shared_encoder(default_model(texts))


def _as_reviews(reviews, ratings) -> tuple[list[str], list[float | None]]:
    if isinstance(reviews, str):
        raise InputError("expected a list of reviews, got one string; wrap it in a list "
                         "(or use read_reviews for a file)")
    texts, rates = [], []
    for i, r in enumerate(reviews):
        if isinstance(r, Review):
            texts.append(r.text)
            rates.append(r.rating)
        elif isinstance(r, str):
            texts.append(r)
            rates.append(None)
        else:
            raise InputError(f"review {i} is {type(r).__name__}, not str")
    if ratings is not None:
        ratings = list(ratings)
        if len(ratings) != len(texts):
            raise InputError(f"{len(ratings)} ratings for {len(texts)} reviews; give one per review (None if unknown)")
        rates = [None if r is None or (isinstance(r, float) and math.isnan(r)) else float(r) for r in ratings]
    return texts, rates


def polarity(rating: float | None, scale: tuple[float, float] | None) -> int:
    """+1 for a good rating, -1 for a bad one, 0 for the middle or unknown."""
    if rating is None or scale is None:
        return 0
    lo, hi = scale
    if hi <= lo:
        return 0
    x = (rating - lo) / (hi - lo)
    return 1 if x >= 0.7 else (-1 if x <= 0.3 else 0)


def static_vectors(encoder, texts: list[str], block: int = 8192) -> np.ndarray:
    """Cheap sentence vectors: the mean of the model's input token embeddings (no layers run),
    centred on the corpus mean so the shared direction does not dominate the cosine. Computed as
    a sparse (sentences × vocabulary) averaging matrix times the embedding table, so no
    tokens × hidden array is ever built."""
    from scipy.sparse import csr_matrix

    table = encoder.weights.word
    out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
    for s in range(0, len(texts), block):
        encs = encoder.tokenizer.content(texts[s:s + block])
        lens = np.array([len(e.ids) for e in encs])
        ids = np.concatenate([np.asarray(e.ids, dtype=np.int64) for e in encs] + [np.zeros(0, np.int64)])
        # Only the rows these sentences use: a 4-bit table (multilingual-e5-small's 250k rows) expands
        # just those, and a float table is not copied whole.
        used, cols = np.unique(ids, return_inverse=True)
        rows = np.asarray(table[used], dtype=np.float32)
        weights = np.repeat(1.0 / np.maximum(lens, 1), lens).astype(np.float32)
        indptr = np.concatenate([[0], np.cumsum(lens)])
        avg = csr_matrix((weights, cols.ravel(), indptr), shape=(len(encs), len(used)))
        out[s:s + len(encs)] = avg @ rows
    out -= out.mean(axis=0)
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out


_LINK_ONLY = re.compile(r"^\W*(?:https?:|www\.)\S*\W*$", re.I)


def prepare(reviews, *, ratings=None, encoder=None, params: Params = Params(), progress=None) -> Document:
    """Split reviews into sentences and embed the candidates."""
    texts, rates = _as_reviews(reviews, ratings)
    keep = [i for i, t in enumerate(texts) if t.strip()]
    if not keep:
        raise InputError("no reviews to summarise: the input is empty")
    sents, owner, spans, position = [], [], [], []
    for i in keep:
        for k, sp in enumerate(split_units(texts[i], params.units, params.min_words, params.clause_words)):
            if _LINK_ONLY.match(sp.text):
                continue  # a bare link ("http:t.cn/zlQzW9I") says nothing a reader can use
            sents.append(sp.text)
            owner.append(i)
            spans.append((sp.start, sp.end))
            position.append(k)
    if not sents:
        raise InputError("no sentences to summarise: the reviews hold only whitespace or punctuation")
    encoder = encoder or default_encoder(sents)
    notes = []
    n = len(sents)
    if n == 1:
        notes.append("the input has a single sentence: there is nothing to choose between")
    # Identical sentences ("好评！", "不错。") are encoded once; the first occurrence stands for the
    # others with their count as its mass, so what many reviewers wrote still weighs as much.
    if params.dedup:
        first: dict[str, int] = {}
        for i, t in enumerate(sents):
            first.setdefault(" ".join(t.split()), i)
        uniq = np.fromiter(first.values(), dtype=np.int64, count=len(first))
        grp = np.searchsorted(uniq, [first[" ".join(t.split())] for t in sents])
        weight = np.bincount(grp, minlength=len(uniq)).astype(np.float64)
        if len(uniq) < n:
            notes.append(f"{n - len(uniq)} repeated sentences encoded once each")
    else:
        uniq, weight = np.arange(n), np.ones(n)
        grp = np.arange(n)
    u = len(uniq)

    def embed(rows):  # the model's own prefix for symmetric similarity (E5: "query: "), if it has one
        return encoder.encode([sents[i] for i in rows], progress=progress, precision=PRECISION, role="query")

    if u <= params.full_limit:
        cand, mass = uniq, weight
        member = grp
        vecs = embed(cand)
    elif params.reduce == "sample":
        # A seeded uniform sample: dense regions (what many reviewers say) are sampled in proportion.
        pick = np.sort(np.random.default_rng(0).choice(u, size=min(params.clusters, u), replace=False))
        cand, mass = uniq[pick], weight[pick]
        slot = np.full(u, -1)
        slot[pick] = np.arange(len(pick))
        member = slot[grp]
        vecs = embed(cand)
        notes.append(f"{n} sentences: a random sample of {len(cand)} stands for them")
    elif params.reduce == "cluster":
        cheap = static_vectors(encoder, [sents[i] for i in uniq])
        with blas_threads(getattr(encoder, "threads", None)):
            cent, labels = kmeans(cheap, params.clusters)
        sims = np.einsum("ij,ij->i", cheap, cent[labels])
        # The member nearest its centroid represents the cluster.
        order = np.lexsort((-sims, labels))
        head = np.ones(len(order), dtype=bool)
        head[1:] = labels[order][1:] != labels[order][:-1]
        reps = np.sort(order[head])
        cand = uniq[reps]
        mass = np.bincount(labels, weights=weight, minlength=len(cent))[labels[reps]]
        slot = np.full(len(cent), -1)
        slot[labels[reps]] = np.arange(len(reps))
        member = slot[labels[grp]]
        vecs = embed(cand)
        notes.append(f"{n} sentences: grouped into {len(cand)} clusters first; each cluster's most central "
                     "sentence stands for it")
    else:
        raise InputError(f"unknown reduce {params.reduce!r}; choose cluster or sample")
    vecs = np.asarray(vecs, dtype=np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    vecs = _centre(vecs, mass, params.center, notes)
    return Document(texts, rates, sents, np.asarray(owner), spans, cand, vecs, mass,
                    scale=rating_scale(rates), notes=notes, threads=getattr(encoder, "threads", None),
                    position=np.asarray(position), member=np.asarray(member), model=getattr(encoder, "name", ""))


# Some encoders are anisotropic: multilingual-e5-small puts any two review sentences at cosine
# 0.82-0.92 (1st-99th percentile of 600 hotel-review sentences), so softmax(E·Eᵀ/τ) is nearly
# uniform and the duplicate guard (0.85) rejects almost everything after the first pick. Removing
# the common mean direction restores a usable spread (-0.23 ... 0.30 on the same pairs), as in
# Ethayarajh 2019 and Su et al. 2021 ("Whitening sentence representations"). "auto" does it only
# when the input is anisotropic (mean pairwise cosine = |mass-weighted mean|² > CENTRE_ABOVE) and
# large enough for its mean to be a background rather than the sentences themselves.
CENTRE_ABOVE = 0.5
CENTRE_MIN = 10


def _centre(vecs: np.ndarray, mass: np.ndarray, mode: str, notes: list[str]) -> np.ndarray:
    if mode not in ("auto", "on", "off"):
        raise InputError(f"unknown center {mode!r}; choose auto, on or off")
    if mode == "off" or len(vecs) < 2:
        return vecs
    w = np.asarray(mass, np.float64)
    mean = (w[:, None] * vecs).sum(0) / max(w.sum(), 1e-12)
    spread = float(mean @ mean)
    if mode == "auto" and (spread <= CENTRE_ABOVE or len(vecs) < CENTRE_MIN):
        return vecs
    out = vecs - mean.astype(np.float32)
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    notes.append(f"sentence vectors centred (mean cosine {spread:.2f} before)")
    return out


def _joiner(parts: Sequence[str]) -> str:
    """Sentences joined by a space, except after a full-width mark before Chinese text ("很好。物流快"):
    a Chinese sentence that ends without one ("暖气不热") keeps a space, so it does not run into the next."""
    out = ""
    for p in parts:
        if out:
            out += "" if _cjk(out[-1]) and _cjk(p[0]) and _closed(out[-1]) else " "
        out += p
    return out


def _closed(ch: str) -> bool:
    """A CJK or full-width punctuation mark (。！？；」…), not a Han character."""
    return "\u3000" <= ch <= "\u303f" or "\uff00" <= ch <= "\uffef" or ch in "…⋯"


def _cjk(ch: str) -> bool:
    return "\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef"


def select(doc: Document, budget: int, counter: Counter, params: Params = Params(), *,
           scores: np.ndarray | None = None, order: str = "original", allow_cut: bool = False,
           counts: np.ndarray | None = None, tokens_before: int | None = None, points: bool = False) -> Summary:
    """Choose sentences by MMR under ``budget`` tokens; ``scores`` (over ``doc.cand``) override π."""
    if order not in ORDERS:
        raise InputError(f"unknown order {order!r}; choose original or score")
    if not isinstance(budget, (int, np.integer)) or isinstance(budget, bool) or budget < 1:
        raise InputError(f"budget must be a whole number of tokens ≥ 1, got {budget!r}")
    cand = doc.cand
    if scores is None:
        with blas_threads(doc.threads):
            pi = score_sentences(doc, params)
    else:
        pi = np.asarray(scores, float)
    if counts is None:
        counts = np.asarray(counter.count_many([doc.texts[i] for i in cand]))
    if tokens_before is None:
        tokens_before = counter.count("\n".join(t for t in doc.reviews if t.strip()))
    notes = list(doc.notes)
    if params.relevance == "log":
        # τ·log π is in cosine units (a log-sum-exp of the similarities), like the redundancy term.
        rel = params.tau * (np.log(np.maximum(pi, 1e-300)) - np.log(max(pi.max(), 1e-300)))
    else:
        rel = pi / pi.max() if pi.max() > 0 else np.ones(len(pi))
    pol, weight = unit_polarity(doc, params)
    if params.share not in ("proportional", "one"):
        raise InputError(f"unknown share {params.share!r}; choose proportional or one")
    quota = _quotas(doc, pol) if params.balance and params.share == "one" else {}
    target = _shares(doc, pol, weight) if params.balance and params.share == "proportional" else {}

    chosen: list[int] = []  # positions in cand
    max_sim = np.full(len(cand), -np.inf)
    alive = counts <= budget
    if params.informative:
        from qkv.summarize.informative import is_uninformative

        keep = ~np.array([is_uninformative(doc.texts[i]) for i in cand], dtype=bool)
    else:
        keep = np.ones(len(cand), bool)
    if params.informative:
        if (alive & keep).any():  # if nothing else fits, a deferral is still better than no summary
            alive &= keep
        else:
            notes.append("every unit that fits says nothing about the product (e.g. 'will review later')")
    cov = _coverage(doc, params)
    if cov is not None:
        has_words = np.array([bool(w) for w in cov.words])
        if (alive & has_words).any():  # a unit without a content word ("一大清早，") covers nothing
            alive &= has_words
        prior = (pi / max(pi.max(), 1e-300)) ** params.coverage_power / np.maximum(counts, 1) ** params.cost_power
    used = {1: 0, -1: 0, 0: 0}
    while alive.any():
        if cov is not None:
            gain = cov.values() * prior
        else:
            gain = params.lam * rel - (1 - params.lam) * np.where(np.isfinite(max_sim), max_sim, 0.0)
        if params.length_power and cov is None:
            gain = np.where(gain > 0, gain / np.maximum(counts, 1) ** params.length_power, gain)
        gain = np.where(alive, gain, -np.inf)
        need = [g for g, q in quota.items() if used[g] < q and (alive & (pol == g)).any()]
        if target:  # the side furthest below its share of what reviewers say goes next
            k = len(chosen) + 1
            short = {g: t * k - used[g] for g, t in target.items() if (alive & (pol == g)).any()}
            short = {g: d for g, d in short.items() if d >= 0.5}
            need = [max(short, key=short.get)] if short else []
        if need:  # a polarity below its share of the reviews goes first
            gain = np.where(np.isin(pol, need), gain, -np.inf)
        j = int(np.argmax(gain))
        trial = _arrange(doc, [*chosen, j], cand, pi, order)
        if counter.count(trial) <= budget:
            chosen.append(j)
            used[int(pol[j])] += 1
            if cov is not None:
                cov.take(j)
            max_sim = np.maximum(max_sim, doc.vectors @ doc.vectors[j])
            alive &= max_sim < params.duplicate
        alive[j] = False
        # Only sentences that could still fit next to the chosen ones stay alive.
        room = budget - sum(int(counts[c]) for c in chosen)
        alive &= counts <= room
    cut = False
    if not chosen:
        shortest = int(counts.min())
        if not allow_cut:
            raise InputError(f"the budget of {budget} tokens is smaller than every sentence (the shortest has "
                             f"{shortest} {counter.name} tokens); raise the budget, or allow cutting the best "
                             "sentence at the budget (allow_cut=True, --allow-cut)")
        j = int(np.argmax(rel))
        text = counter.cut(doc.texts[cand[j]], budget)
        notes.append(f"every sentence is longer than {budget} tokens: the best one was cut to fit")
        cut = True
        chosen = [j]
        final = text
    else:
        final = _arrange(doc, chosen, cand, pi, order)
    rank_of = {c: r + 1 for r, c in enumerate(chosen)}
    shown = _ordered(doc, chosen, cand, pi, order)
    shown_text = [final] if cut else _pieces(doc, chosen, cand, pi, order)
    sents = tuple(SummarySentence(
        text=(final if cut else doc.texts[cand[j]]), shown=t, review=int(doc.review_of[cand[j]]),
        start=doc.spans[cand[j]][0],
        end=(min(doc.spans[cand[j]][1], doc.spans[cand[j]][0] + len(final)) if cut else doc.spans[cand[j]][1]),
        score=float(pi[j]),
        tokens=(counter.count(final) if cut else int(counts[j])),
        rating=doc.ratings[doc.review_of[cand[j]]], rank=rank_of[j]) for j, t in zip(shown, shown_text))
    after = counter.count(final)
    if after > budget:  # guaranteed by construction above; never hand out a breach regardless
        raise RuntimeError(f"internal error: summary of {after} tokens exceeds the budget of {budget}")
    found = None
    if points:
        from qkv.summarize.points import find_points

        # Each unit's side as the balance reads it: its review's rating, else SnowNLP on its review
        # (SnowNLP on a lone clause was worse: "加热很快" 0.45, "噪音很大" 0.63).
        rated = doc.scale is not None and any(r is not None for r in doc.ratings)
        sides = [polarity(r, doc.scale) for r in doc.ratings] if rated else None
        found = find_points(doc, pi, pol, uninformative=~keep, review_side=sides)
    return Summary(final, sents, int(budget), counter.name, int(tokens_before), int(after),
                   n_reviews=sum(1 for t in doc.reviews if t.strip()), n_sentences=doc.n, order=order,
                   cut=cut, notes=tuple(notes), points=found, model=doc.model)


def _coverage(doc: Document, params: Params):
    """SumBasic state for this selection (coverage.py), or None when coverage is off or the units
    are not Chinese; the word shares and each unit's words are computed once per document."""
    if params.coverage not in ("auto", "on", "off"):
        raise InputError(f"unknown coverage {params.coverage!r}; choose auto, on or off")
    if params.coverage == "off":
        return None
    from qkv.summarize.coverage import Coverage, applies

    texts = [doc.texts[i] for i in doc.cand]
    if params.coverage == "auto" and not applies(texts):
        return None
    if getattr(doc, "_coverage", None) is None:
        doc._coverage = Coverage.of(doc.reviews, texts)
    return Coverage(doc._coverage.p, doc._coverage.words)


# First-person words in English and Chinese: anecdotes ("I got this for my GF") are rarely what
# reviewers collectively say, and summaries are written about the product, not the writer.
_PERSONAL = re.compile(r"(?i:\b(?:i|i'm|i've|i'd|i'll|im|ive|me|my|mine|myself|we|we're|we've|our|us)\b)|我")


def is_personal(text: str) -> bool:
    return bool(_PERSONAL.search(text.replace("’", "'")))


def score_sentences(doc: Document, params: Params) -> np.ndarray:
    """Importance of each candidate sentence: attention received (sums to 1 before the
    personal-sentence factor)."""
    if params.score == "stationary":
        pi = importance(doc.vectors, params.tau, mass=doc.mass)
    elif params.score == "received":
        pi = received(doc.vectors, params.tau, mass=doc.mass)
    elif params.score == "centroid":
        c = (doc.mass[:, None] * doc.vectors).sum(axis=0)
        s = np.maximum(doc.vectors @ (c / max(np.linalg.norm(c), 1e-12)), 0) + 1e-9
        pi = s / s.sum()
    else:
        raise InputError(f"unknown score {params.score!r}; choose stationary, received or centroid")
    if params.personal != 1.0:
        pi = pi * np.array([params.personal if is_personal(doc.texts[i]) else 1.0 for i in doc.cand])
    return pi


def unit_polarity(doc: Document, params: Params) -> tuple[np.ndarray, np.ndarray]:
    """+1 / -1 / 0 per candidate, and the weight each stands for (its mass, or its review for
    ratings). With ratings, a unit takes its review's side; without, its own text's (SnowNLP for
    Chinese; cached on the document)."""
    cand = doc.cand
    rated = doc.scale is not None and any(r is not None for r in doc.ratings)
    if rated or params.text_sentiment == "off":
        pol = np.array([polarity(doc.ratings[doc.review_of[i]], doc.scale) for i in cand], dtype=np.int64)
        return pol, None
    if params.text_sentiment == "review":
        return _review_polarity(doc)
    if getattr(doc, "_text_pol", None) is None:
        from qkv.summarize.sentiment import text_polarity

        doc._text_pol = text_polarity([doc.texts[i] for i in cand])
    return doc._text_pol, np.asarray(doc.mass, float)


REVIEW_SAMPLE = 2000  # reviews read for the sides' shares when there are more (~0.1 ms each)


def _review_polarity(doc: Document) -> tuple[np.ndarray, np.ndarray]:
    """Without ratings: each candidate takes its review's side as SnowNLP reads the whole review
    (what it was measured on: 0.83 accuracy), and the sides' shares come from every review, or
    from a seeded sample of REVIEW_SAMPLE of them in larger inputs."""
    from qkv.summarize.sentiment import positive_probability

    if getattr(doc, "_review_pol", None) is None:
        owners = sorted({int(doc.review_of[i]) for i in doc.cand})
        live = [i for i, t in enumerate(doc.reviews) if t.strip()]
        if len(live) > REVIEW_SAMPLE:
            live = sorted(np.random.default_rng(0).choice(live, REVIEW_SAMPLE, replace=False).tolist())
        need = sorted(set(owners) | set(live))
        p = dict(zip(need, positive_probability([doc.reviews[i] for i in need])))
        side = {i: (1 if v >= 0.5 else -1) if v != 0.5 else 0 for i, v in p.items()}
        pol = np.array([side[int(doc.review_of[i])] for i in doc.cand], dtype=np.int64)
        shares = np.array([side[i] for i in live])
        doc._review_pol = (pol, ("reviews", shares))
    return doc._review_pol


def _shares(doc: Document, pol: np.ndarray, weight) -> dict[int, float]:
    """Each side's share of the reviews (with ratings) or of the polar units (mass-weighted,
    without), for the proportional balance; empty when one side is absent or has no unit (a
    product everyone likes needs no forced complaint)."""
    if weight is None:
        revs = [polarity(r, doc.scale) for r, t in zip(doc.ratings, doc.reviews) if t.strip()]
        pos, neg = float(revs.count(1)), float(revs.count(-1))
    elif isinstance(weight, tuple):  # ("reviews", sides): text sentiment per review, not unit weights
        pos, neg = float((weight[1] == 1).sum()), float((weight[1] == -1).sum())
    else:
        pos, neg = float(weight[pol == 1].sum()), float(weight[pol == -1].sum())
    if not (pol == 1).any() or not (pol == -1).any():
        return {}
    if not pos or not neg:
        return {}
    return {1: pos / (pos + neg), -1: neg / (pos + neg)}


def _quotas(doc: Document, pol: np.ndarray, min_share: float = 0.2) -> dict[int, int]:
    """At least one sentence from each polarity that has ≥ ``min_share`` of the rated reviews,
    when the other polarity exists too (a product everyone likes needs no forced complaint)."""
    revs = [polarity(r, doc.scale) for r, t in zip(doc.ratings, doc.reviews) if t.strip()]
    pos, neg = revs.count(1), revs.count(-1)
    rated = pos + neg
    if not pos or not neg:
        return {}
    return {g: 1 for g, c in ((1, pos), (-1, neg)) if c / rated >= min_share and (pol == g).any()}


def _ordered(doc: Document, chosen: list[int], cand: np.ndarray, pi: np.ndarray, order: str) -> list[int]:
    if order == "score":
        return sorted(chosen, key=lambda j: (-pi[j], cand[j]))
    return sorted(chosen, key=lambda j: cand[j])


def _pieces(doc: Document, chosen: list[int], cand, pi, order: str) -> list[str]:
    """The chosen units' texts in output order, composed to read as sentences (units.compose)."""
    shown = _ordered(doc, chosen, cand, pi, order)
    pos = doc.position if doc.position is not None else np.arange(doc.n)
    return compose([(doc.texts[cand[j]], int(doc.review_of[cand[j]]), int(pos[cand[j]])) for j in shown])


def _arrange(doc: Document, chosen: list[int], cand, pi, order: str) -> str:
    return _joiner(_pieces(doc, chosen, cand, pi, order))


def summarize(reviews, budget: int = 75, *, tokenizer: str = "cl100k", encoder=None, ratings=None,
              order: str = "original", allow_cut: bool = False, params: Params | None = None,
              progress=None, points: bool = False) -> Summary:
    """Summarise ``reviews`` (strings or Review objects) in at most ``budget`` tokens.

    tokenizer: cl100k | o200k | model (the encoder's own). order: original (review order) or score.
    ratings: one per review (or None) when the reviews are plain strings; they turn on the balance
    between positive and negative points. allow_cut: when every sentence is longer than the budget,
    return the best one cut to fit instead of raising InputError.
    """
    params = params or Params()
    if not isinstance(budget, (int, np.integer)) or isinstance(budget, bool) or budget < 1:
        raise InputError(f"budget must be a whole number of tokens ≥ 1, got {budget!r}")
    if order not in ORDERS:
        raise InputError(f"unknown order {order!r}; choose original or score")
    encoder = encoder or default_encoder(_as_reviews(reviews, ratings)[0])
    counter = get_counter(tokenizer, encoder)
    doc = prepare(reviews, ratings=ratings, encoder=encoder, params=params, progress=progress)
    return select(doc, int(budget), counter, params, order=order, allow_cut=allow_cut, points=points)
