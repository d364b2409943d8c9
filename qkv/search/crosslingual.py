"""Searching with a translated query (``qkv.translate.translator``): the keyword side as a structured
query, and pseudo-relevance feedback on the dense side. ``Index.search`` runs every query that
was translated through ``retrieve`` here; English queries never come here.

* **Structured keyword query** (Pirkola, "The effects of query structure and dictionary setups in
  dictionary-based cross-language information retrieval", SIGIR 1998): a word's English
  alternatives are one synonym group, not a flat bag, so a Chinese word with four glosses does not
  outweigh a word with one, and a title matching two glosses of one word is not credited twice.
  The pool is the OR-BM25 top of every term of every group; each product then scores, per group,
  its best alternative's BM25 (the sum of that alternative's term shares, the shares FTS5's
  bm25() sums), the chosen gloss at full weight and the others at ``ALTERNATIVE_WEIGHT`` (the
  translator's choice by co-occurrence is usually right, but when it is wrong the right sense is
  often among the rest: 吊带 "brace", also "strap").
* **Trust by source** (translation probabilities as weights, after Darwish & Oard, "Probabilistic
  structured query methods", SIGIR 2003, where a term's weight is how likely its translation is):
  a word the seller's or the trade glossary gives, and a unit, count in full; a general
  dictionary's gloss (or a compound composed of its parts' glosses) at ``SOURCE_TRUST``; a lone
  character's gloss from the dictionary at ``CHARACTER_TRUST`` — a character has dozens of senses
  (除 "not including" / "remove", 带 "bear" / "with", 螺 "snail" / "screw"), and when the chosen one is
  wrong its BM25 pulls in products of the wrong sense. The weight scales the whole group (its
  alternatives too); the matched-terms count of the coverage weighting is not scaled (scaling it
  measured no better).
* **Coverage counts the shopper's words** (``COVERAGE``): the coverage weighting of score fusion
  (``fusion.coverage_weighted``: BM25 × matched^p, so that a title holding all of a query's words
  beats one holding a rare one) counts, for a translated query, each group — one word as typed —
  as the share of its best alternative's terms the title holds (at most 1), not that alternative's
  matched English terms: 油锯 is one word, and "ECHO Chain Saw Chaps" (its alternative "chain saw",
  two terms) must not out-cover "ECHO Gas Chainsaw" (its chosen "chainsaw", one). With one-word
  glosses, no alternatives and every word trusted in full this is exactly the flat query's BM25 ×
  coverage weighting (a test checks it); ``COVERAGE = "terms"`` counts English terms, as before.
* **Pseudo-relevance feedback** (Ballesteros & Croft, "Phrasal translation and query expansion
  techniques for cross-language information retrieval", SIGIR 1997: expansion after translation
  recovers much of what dictionary translation loses), as Rocchio's formula in embedding space:
  v' = normalize(v + β · mean of the top ``FEEDBACK_DOCS`` results' vectors), β = ``FEEDBACK_WEIGHT``, then the dense side
  searches again with v' and the fusion runs again. A translation that misses a trade word still
  finds a few right products through the words it got; their vectors carry the word it missed.

Constants chosen on half a of the Chinese Home Depot dev queries (bench/zh_search.py, docs/search.md).
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from qkv.search import fusion
from qkv.text import keywords as textmod
from qkv.text import zh

# Translated queries: weight of the original's vector in the dense query, the rest the English
# translation's. Swept on half a of the Chinese Home Depot dev queries (bench/zh_search.py,
# docs/search.md): with multilingual-e5-small, hybrid NDCG@10 at w 0 / 0.25 / 0.5 was 0.2108 /
# 0.2098 / 0.2080 (its α 0.8), and at α 0.5, w 0 … 1: 0.2029 / 0.2027 / 0.2005 / 0.1987 / 0.1992.
# Flat up to 0.25 against an English catalog; 0.25 keeps the original's own vector, which is what
# meets a bilingual catalog's Chinese titles.
ORIGINAL_WEIGHT = 0.25
# Weight of a word's English alternatives against its chosen gloss in the structured query. Half a,
# hybrid NDCG@10 (bench/zh_search.py --half a, 19:34 UTC; w 0.25, α 0.8; all alternatives, ≤3 a
# word), γ 0 (the chosen gloss only: the flat query as before) / 0.3 / 0.5: no feedback 0.2822 /
# 0.2869 / 0.2875, with feedback (3 docs, β 0.25, as shipped) 0.2855 / 0.2902 / 0.2908. An earlier sweep with
# feedback (3, 1): γ 0.2 … 0.6 0.2964 / 0.2938 / 0.2925 / 0.2933 / 0.2963, γ 1 0.2849: flat from 0.2 to
# 0.6, worse at 1 (alternatives as strong as the chosen gloss); 0.5 in the middle.
ALTERNATIVE_WEIGHT = 0.5
MAX_ALTERNATIVES = 3  # alternatives kept a word (the translator keeps ≤4 candidates: all the others)
# Rocchio feedback: top results whose vectors join the query's, and their weight (0 docs: none).
# Half a, hybrid NDCG@10 at γ 0.5 (same run): none 0.2875; 3 docs, β 0.25 / 0.5 / 1: 0.2908 / 0.2897 /
# 0.2933; 5 docs, β 0.5: 0.2910 (earlier: 5 docs β 1 / 2 0.2918 / 0.2909, 10 docs β 1 0.2911): flat
# within noise from β 0.25 to 1. A larger β drags a bilingual catalog's dense query towards the
# language of the top results: on the sample catalog with the English MiniLM, 透气跑鞋's Chinese
# running shoes leave the top five (an issue-15 requirement, tests/search/test_chinese.py,
# test_index.py, on the embedded and the Milvus store) at β 1, and on Milvus at β 0.5; β 0.25 keeps them.
FEEDBACK_DOCS = 3
FEEDBACK_WEIGHT = 0.25
# Trust by source: weight of a translated word's group by where its English came from (sources not
# named count 1: the seller's glossary, the trade glossary, units). Half a, hybrid NDCG@10 at the
# settings above (bench/zh_search.py --half a --trust …, 21:29 UTC, load 0.8): all 1 (as before)
# 0.2908; lone characters only at 0 / 0.1 / 0.25 / 0.5: 0.2823 / 0.2948 / 0.2937 / 0.2931 (dropping them
# loses: their gloss is often right, 双 double, 白 white); dictionary words D 0.35 / 0.5 / 0.75 ×
# characters C 0.15 / 0.25 / 0.4: 0.2960 0.2972 0.2978 / 0.2958 0.2971 0.2976 / 0.2967 0.2958 0.2964 —
# a plateau; its middle (0.5, 0.25) shipped.
SOURCE_TRUST = {"dictionary": 0.5, "ECDICT": 0.5, "sub-words": 0.5}  # ECDICT read backwards: a general dictionary too
CHARACTER_TRUST = 0.25  # a one-character word whose English came from the dictionary (directly or as a sub-word)
# What the coverage weighting counts for a translated query: "words" (each source word's group,
# as the share of its best alternative's terms held) or "terms" (English terms, as an English
# query). Half a, hybrid NDCG@10 (bench/zh_search.py --half a --coverage terms,words, 21:48 UTC, load 1.8):
# terms 0.2971 / words 0.3061 at the shipped trust (without trust: 0.2908 / 0.3003); a middle way,
# each group scaled to its chosen gloss's term count: 0.3020 (0.2960). Keyword-mode rankings are
# BM25 alone, so they do not change.
COVERAGE = "words"

Group = list[tuple[float, tuple[str, ...]]]  # one source word's alternatives: (weight, keyword terms)


def piece_trust(piece, source_trust: Mapping[str, float] | None = None,
                character_trust: float | None = None) -> float:
    """How far a translated word's English is trusted (module docstring): ``character_trust``
    (default ``CHARACTER_TRUST``) for a lone character glossed by the dictionary, else its source's
    ``source_trust`` (default ``SOURCE_TRUST``; 1 for a source not named)."""
    if len(piece.zh) == 1 and piece.source in ("dictionary", "sub-words"):
        return CHARACTER_TRUST if character_trust is None else character_trust
    return (SOURCE_TRUST if source_trust is None else source_trust).get(piece.source, 1.0)


def translated(piece) -> bool:
    """Whether ``piece`` was translated (its English searched as a group of its own, weighted by
    ``piece_trust``); a token typed as is, or a word nothing was found for, is searched as typed,
    and a function word's English (带 "with") and a size word's (37码 "size") are read by the dense
    side only."""
    return bool(piece.en) and piece.source not in ("as typed", "untranslated", "function word", "size word")


def translation_rows(translation, max_alternatives: int = MAX_ALTERNATIVES) -> list[dict]:
    """A translation word by word, as the CLI and the web API show it: per piece ``{"zh", "en",
    "source", "weight", "alternatives"}`` — ``weight`` the trust its group is searched at
    (``piece_trust``; None for a piece searched as typed), ``alternatives`` the word's other English
    the catalog holds, at most ``max_alternatives`` (``keyword_groups`` searches them at
    ``ALTERNATIVE_WEIGHT`` × weight, less any whose words an earlier word already searched)."""
    alts = translation.alternatives or ((),) * len(translation.pieces)
    return [{"zh": p.zh, "en": p.en, "source": p.source,
             "weight": float(piece_trust(p)) if translated(p) else None,
             "alternatives": list(others[:max_alternatives]) if translated(p) else []}
            for p, others in zip(translation.pieces, alts)]


def keyword_groups(query: str, translation, alternative_weight: float | None = None,
                   max_alternatives: int = MAX_ALTERNATIVES,
                   trust: Callable[[object], float] | None = piece_trust) -> list[Group]:
    """The structured keyword query of a translated ``query``: each term of the query as typed is
    its own group (a bilingual catalog's Chinese titles, brands, sizes), then one group per
    translated word: its chosen English (weight t), then its alternatives (γ·t; γ =
    ``alternative_weight``, default ``ALTERNATIVE_WEIGHT``), t = ``trust(piece)`` (default
    ``piece_trust``; None: 1 for every word). Terms already searched by an earlier group are left
    out of a later one, so no term counts twice; an alternative left with no new term is dropped."""
    gamma = ALTERNATIVE_WEIGHT if alternative_weight is None else alternative_weight
    single = textmod.terms(query)
    seen = set(single)
    groups: list[Group] = [[(1.0, (t,))] for t in single]
    alts = translation.alternatives or ((),) * len(translation.pieces)
    for piece, others in zip(translation.pieces, alts):
        if not translated(piece):
            continue
        weight = 1.0 if trust is None else float(trust(piece))
        group: Group = []
        chosen: tuple[str, ...] = ()
        for j, en in enumerate((piece.en, *(others[:max_alternatives] if gamma > 0 else ()))):
            terms = tuple(t for t in textmod.terms(en) if t not in seen)
            if terms and all(terms != g for _, g in group):
                group.append((weight if j == 0 else gamma * weight, terms))
                if j == 0:
                    chosen = terms
        if group:
            groups.append(group)
            seen.update(chosen)  # the chosen gloss's terms are this word's
    return groups


# Weight of a phrase's Chinese words against its English in an English query's group (a bilingual
# catalog, ``english_groups``): 1, so a Chinese listing holding 跑鞋 scores as an English one holding
# "running shoes" — a listing is not ranked down for the language it is written in.
CHINESE_WEIGHT = 1.0


def english_groups(query: str, found, weight: float | None = None) -> list[Group]:
    """The structured keyword query of an English ``query`` against a catalog that also holds
    Chinese titles: ``found`` is ``Translator.chinese_for(query)`` (per phrase, its terms and its
    Chinese words). Each phrase is one group — its English terms, and each Chinese word as an
    alternative at ``weight`` (default ``CHINESE_WEIGHT``) — and every other term of the query its
    own group, as ``keyword_groups`` groups a Chinese query's words and their English."""
    w = CHINESE_WEIGHT if weight is None else weight
    phrases = {en[0]: (en, cn) for en, cn in found}
    words = textmod.terms(query)
    groups: list[Group] = []
    i = 0
    while i < len(words):
        hit = phrases.get(words[i])
        if hit and tuple(words[i:i + len(hit[0])]) == hit[0]:
            en, cn = hit
            groups.append([(1.0, en)] + [(w, tuple(textmod.terms(c))) for c in cn])
            i += len(en)
        else:
            groups.append([(1.0, (words[i],))])
            i += 1
    return groups


def flat_query(groups: list[Group]) -> str:
    """Every term of every group, for the keyword pool (OR-BM25) and for ``keyword_terms``."""
    out: list[str] = []
    for g in groups:
        for _, terms in g:
            out += [t for t in terms if t not in out]
    return " ".join(out)


def structured_keyword(store, groups: list[Group], depth: int, flt=None,
                       coverage: str | None = None,
                       calibrate: bool = False) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """(ranking by the structured BM25, best first; id → that BM25 × matched^p for score fusion)
    over the OR-BM25 top ``depth`` of ``flat_query(groups)``; matched counted by ``coverage``
    (default ``COVERAGE``): "words", each group as the share of its best alternative's terms held,
    or "terms", that alternative's matched terms. ``calibrate`` (an English query's groups over a
    bilingual catalog): each alternative's BM25 is scaled so that its best holder in the pool
    scores what the group's best alternative's best holder does — a Chinese title is longer in
    keyword terms (its words and their overlapping parts) and its word rarer, so its BM25 for 跑鞋
    is not on the scale of an English title's for "running shoes"; calibrated, the language a
    listing is written in does not rank it down."""
    how = COVERAGE if coverage is None else coverage
    if how not in ("words", "terms"):
        raise ValueError(f"coverage must be 'words' or 'terms', not {how!r}")
    by_word = how == "words"
    flat = flat_query(groups)
    hits = store.keyword_search(flat, depth, flt) if flat else []
    if not hits:
        return [], {}
    parts = store.keyword_terms(flat, [h.id for h in hits])
    scale = _calibration(groups, parts) if calibrate else None
    raw: dict[str, float] = {}
    weighted: dict[str, float] = {}
    for h in hits:
        shares = dict(parts.get(h.id, ()))
        total, matched = 0.0, 0.0
        for gi, group in enumerate(groups):
            best, n = 0.0, 0.0
            for ai, (w, terms) in enumerate(group):
                s = w * sum(shares.get(t, 0.0) for t in terms) * (scale[gi][ai] if scale else 1.0)
                if s > best:
                    held = sum(1 for t in terms if t in shares)
                    best, n = s, (held / len(terms) if by_word else held)
            total += best
            matched += n
        if total > 0:
            raw[h.id] = total
            weighted[h.id] = total * max(1, matched) ** fusion.COVERAGE_POWER
    if calibrate and LANGUAGE_SCALE:
        _by_language(raw, weighted, parts)
    ranking = sorted(raw.items(), key=lambda kv: -kv[1])  # ties keep the store's order
    return ranking, weighted


# An English query over a bilingual catalog: each language's listings scaled so that the best of
# them scores what the best of the other does (``_by_language``); False: alternatives calibrated only.
LANGUAGE_SCALE = True


def _by_language(raw: dict[str, float], weighted: dict[str, float], parts: dict) -> None:
    """Puts the listings that matched Chinese terms on the scale of the others, in place: their
    best (weighted) score becomes the others' best. The query's words that have no Chinese (in
    "backpacking tent", backpacking) cannot be matched by a Chinese title, so its coverage and BM25
    stay below an English title's however right it is; each language's best is its own match."""
    han = {i for i in raw if any(zh.has_han(t) for t, _ in parts.get(i, ()))}
    top_zh = max((weighted[i] for i in han), default=0.0)
    top_en = max((weighted[i] for i in raw if i not in han), default=0.0)
    if top_zh > 0 and top_en > 0:
        f = top_en / top_zh
        for i in han:
            raw[i] *= f
            weighted[i] *= f


def _calibration(groups: list[Group], parts: dict) -> list[list[float]]:
    """Per group and alternative, the factor that puts the alternative's best BM25 in the pool
    (``parts``: id → [(term, share)…]) on its group's best alternative's (``structured_keyword``)."""
    tops = [[0.0] * len(g) for g in groups]
    for terms_shares in parts.values():
        shares = dict(terms_shares)
        for gi, group in enumerate(groups):
            for ai, (_, terms) in enumerate(group):
                tops[gi][ai] = max(tops[gi][ai], sum(shares.get(t, 0.0) for t in terms))
    return [[(max(top) / t if t > 0 else 1.0) for t in top] for top in tops]


def mix_vectors(original: np.ndarray, translated: np.ndarray, weight: float | None = None) -> np.ndarray:
    """A translated query's dense vector: w·original + (1 − w)·translation, renormalised (rows
    of matrices too); w = ``weight``, default ORIGINAL_WEIGHT."""
    w = ORIGINAL_WEIGHT if weight is None else weight
    v = w * np.asarray(original, np.float32) + (1 - w) * np.asarray(translated, np.float32)
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return (v / np.where(n > 0, n, 1)).astype(np.float32)


def feedback_vector(vector: np.ndarray, feedback: np.ndarray, weight: float = FEEDBACK_WEIGHT) -> np.ndarray:
    """Rocchio in embedding space: normalize(v + weight · mean of the ``feedback`` rows)."""
    v = np.asarray(vector, np.float32)
    if len(feedback) and weight:
        v = v + np.float32(weight) * np.asarray(feedback, np.float32).mean(axis=0)
    n = float(np.linalg.norm(v))
    return (v / n if n > 0 else v).astype(np.float32)


def retrieve(st, groups: list[Group], vector: np.ndarray | None, k: int, mode: str, flt, fusion_: str,
             alpha: float, depth: int, feedback_docs: int | None = None,
             feedback_weight: float | None = None, coverage: str | None = None,
             calibrate: bool = False) -> tuple[list[tuple[str, float, dict]], np.ndarray | None]:
    """Ranked (id, score, details) for a translated query, as ``Index._ranked`` ranks an English
    one, with the structured keyword side and dense feedback (module docstring); and the dense
    vector finally searched. ``depth``: each side's candidates (at least ``k``); ``coverage`` and
    ``calibrate``: as for ``structured_keyword``."""
    fb_docs = FEEDBACK_DOCS if feedback_docs is None else feedback_docs
    fb_w = FEEDBACK_WEIGHT if feedback_weight is None else feedback_weight
    kw_rank, kw_weighted = structured_keyword(st, groups, depth, flt, coverage, calibrate) if mode != "dense" else ([], {})
    if mode == "keyword":
        ranked = kw_rank[:k]
        dense_hits: list = []
    else:
        dense_hits = st.dense_search(vector, max(depth, fb_docs), flt)

        def fused(hits, vector):
            if mode == "dense":
                return [(h.id, h.score) for h in hits]
            if fusion_ == "rrf":
                return fusion.ranked(fusion.rrf([[h.id for h in hits], [i for i, _ in kw_rank]]), max(k, fb_docs))
            cos = {h.id: h.score for h in hits}
            extra = [i for i in kw_weighted if i not in cos]
            if extra:
                cos.update(zip(extra, (st.get_vectors(extra) @ vector).tolist()))  # exact cosines
            return fusion.ranked(fusion.score_fusion(cos, kw_weighted, alpha), max(k, fb_docs))

        ranked = fused(dense_hits, vector)
        if fb_docs > 0 and fb_w and ranked:
            vector = feedback_vector(vector, st.get_vectors([i for i, _ in ranked[:fb_docs]]), fb_w)
            dense_hits = st.dense_search(vector, depth, flt)
            ranked = fused(dense_hits, vector)
        ranked = ranked[:k]
    d_pos = {h.id: (r, h.score) for r, h in enumerate(dense_hits, 1)}
    k_pos = {pid: (r, s) for r, (pid, s) in enumerate(kw_rank, 1)}
    ids = [pid for pid, _ in ranked]
    need = [i for i in ids if i not in d_pos] if vector is not None and mode != "keyword" else []
    cos = dict(zip(need, (st.get_vectors(need) @ vector).tolist())) if need else {}
    out = []
    for pid, s in ranked:
        dr, ds = d_pos.get(pid, (None, cos.get(pid)))
        kr, ks = k_pos.get(pid, (None, None))
        out.append((pid, float(s), {"dense_rank": dr, "dense_score": None if ds is None else float(ds),
                                    "keyword_rank": kr, "keyword_score": ks}))
    return out, vector
