"""Retrieval evaluation on BEIR-format data: NDCG@10, MRR@10, Recall@100 per mode.

Protocols
* full corpus (default): each query retrieves from every product; unjudged products count as not
  relevant (a pessimistic bound, since only a few products per query are judged).
* rerank: each query ranks only its own judged products; adds the mean per-query Spearman
  correlation between the system's scores and the judgments (queries whose judged products all
  share one grade are left out of it).

Gains: NDCG uses linear gain = judgment − offset, where ``gain_offset`` defaults to 1 when the
judgments are graded from 1 (Home Depot: 1 = irrelevant … 3 = exact) and 0 otherwise; a product is
*relevant* for MRR and recall when its judgment exceeds the offset.

Query halves: ``half="a"``/``"b"`` keeps the queries whose id hashes (blake2b) to even/odd, so a
setting can be tuned on one half and reported on the other.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qkv.errors import InputError
from qkv.progress import Count, Progress
from qkv.search.filters import Compare, Filter

MODES = ("keyword", "dense", "hybrid")


def _read_jsonl(path: Path, what: str) -> list[dict]:
    if not path.is_file():
        raise InputError(f"no {what} file at {path}")
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise InputError(f"{path}:{n}: not JSON ({e.msg})") from None
    return out


def load_queries(path, field: str = "text") -> dict[str, str]:
    """BEIR queries: ``_id`` → the ``field`` of each record (``text``; e.g. ``en`` in the Chinese
    Home Depot queries, whose records also hold the English original)."""
    recs = _read_jsonl(Path(path), "queries")
    try:
        return {str(r["_id"]): str(r[field]) for r in recs}
    except KeyError as e:
        raise InputError(f"{path}: BEIR queries need '_id' and '{field}' (missing {e})") from None


def load_qrels(path) -> dict[str, dict[str, float]]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no qrels file at {path}")
    out: dict[str, dict[str, float]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.strip().split("\t")
        if not line.strip() or (n == 1 and parts[0] == "query-id"):
            continue
        if len(parts) < 3:
            raise InputError(f"{path}:{n}: expected 'query-id<TAB>corpus-id<TAB>score'")
        try:
            out.setdefault(parts[0], {})[parts[1]] = float(parts[2])
        except ValueError:
            raise InputError(f"{path}:{n}: score {parts[2]!r} is not a number") from None
    return out


def in_half(qid: str, half: str | None) -> bool:
    if half in (None, "all"):
        return True
    bit = hashlib.blake2b(qid.encode(), digest_size=1).digest()[0] & 1
    return bit == (0 if half == "a" else 1)


def ndcg(ranking: list[str], judged: dict[str, float], offset: float, k: int = 10) -> float:
    gains = sorted((max(0.0, g - offset) for g in judged.values()), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    if idcg <= 0:
        return float("nan")
    dcg = sum(max(0.0, judged.get(d, offset) - offset) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    return dcg / idcg


def mrr(ranking: list[str], judged: dict[str, float], offset: float, k: int = 10) -> float:
    for i, d in enumerate(ranking[:k]):
        if judged.get(d, offset) > offset:
            return 1.0 / (i + 1)
    return 0.0


def recall(ranking: list[str], judged: dict[str, float], offset: float, k: int = 100) -> float:
    rel = {d for d, g in judged.items() if g > offset}
    if not rel:
        return float("nan")
    return len(rel & set(ranking[:k])) / len(rel)


def spearman(scores: list[float], gold: list[float]) -> float:
    from scipy.stats import spearmanr

    if len(set(gold)) < 2 or len(scores) < 2:
        return float("nan")
    if len(set(scores)) < 2:
        return 0.0
    return float(spearmanr(scores, gold).statistic)


@dataclass
class EvalResult:
    protocol: str
    queries: int
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # mode → metric → mean
    settings: dict = field(default_factory=dict)
    qids: list[str] = field(default_factory=list, repr=False)  # the queries scored, in order
    per_query: dict[str, dict[str, list[float]]] = field(default_factory=dict, repr=False)  # mode → metric → by qids

    def save_per_query(self, path) -> None:
        """Each query's metrics, for ``qkv.search.significance.compare`` (``--per-query``/``--baseline``)."""
        from qkv.search import significance

        significance.save(path, self.protocol, self.settings, self.qids, self.per_query)

    def as_per_query(self) -> dict:
        """This result as a loaded per-query file reads (``significance.load``)."""
        return {"protocol": self.protocol, "settings": self.settings, "queries": self.qids,
                "modes": {m: {k: list(v) for k, v in ms.items()} for m, ms in self.per_query.items()}}

    def to_json(self) -> dict:
        return {"protocol": self.protocol, "queries": self.queries, "settings": self.settings,
                **{m: self.metrics[m] for m in self.metrics}}


def _mean(xs) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return float(np.mean(xs)) if xs else float("nan")


def evaluate(index, queries: dict[str, str], qrels: dict[str, dict[str, float]], *, rerank: bool = False,
             gain_offset: float | None = None, half: str | None = None, limit: int | None = None,
             fusion_: str = "score", alpha: float | None = None, candidates: int | None = None, coverage: bool = True,
             translate: bool = True, spell: bool = True, progress: Progress | None = None) -> EvalResult:
    """Evaluate keyword, dense and hybrid retrieval of ``index`` (an ``Index``) on judged queries.
    Queries holding Han characters are translated as ``Index.search`` does (``translate``), and
    English words no title holds corrected (``spell``)."""
    from qkv.search import crosslingual
    from qkv.search.index import CANDIDATES

    candidates = CANDIDATES if candidates is None else candidates

    qids = [q for q in queries if q in qrels and in_half(q, half)]
    if limit:
        qids = qids[:limit]
    if not qids:
        raise InputError("no query has judgments (check that the queries and qrels files belong together)")
    if gain_offset is None:
        grades = [g for q in qids for g in qrels[q].values()]
        gain_offset = 1.0 if min(grades) >= 1 and max(grades) > 1 else 0.0
    plans = [index.plan(queries[q], translate, spell=spell) for q in qids]  # as Index.search plans them
    # the precision search itself encodes a query in (batched here for speed: the same rounding)
    # each plan's dense text (a corrected query's correction), with the index's query prefix (E5: "query: ")
    # (a translated query's mixed with its English), through the index's query adapter if it has one
    vecs = index.plan_vectors(plans)
    # each query's fusion weight: the one given, else the model's (kept at its pull under an adapter)
    alphas = [alpha if alpha is not None else index.fusion_alpha(plan=p) for p in plans]
    per = {m: {"ndcg@10": [], "mrr@10": [], "recall@100": [], "spearman": []} for m in MODES}
    store = index.store
    count = Count(progress, "queries", len(qids))
    scored = []
    for n, (qid, vec) in enumerate(zip(qids, vecs)):
        judged, alpha = qrels[qid], alphas[n]
        text = plans[n].keyword
        if rerank:
            ids = [d for d in judged]
            known = [d for d, r in zip(ids, store.get_rows(ids)) if r is not None]
            if not known:
                continue
            flt = Filter(Compare("id", "in", tuple(known)), "judged products")
            depth = len(known)
        else:
            flt, depth = None, max(100, candidates)  # hybrid fuses this deep; dense/keyword keep 100
        if plans[n].translated:  # a translated query is searched as Index.search does (crosslingual)
            groups = list(plans[n].groups)
        else:
            groups = None
            dense = store.dense_search(vec, depth, flt) if text.strip() else []
            kw = store.keyword_search(text, depth, flt) if text.strip() else []
        for mode in MODES:
            if groups is not None:
                ranked = crosslingual.retrieve(store, groups, vec, 100 if not rerank else depth, mode, flt, fusion_,
                                               alpha, depth)[0]
            else:
                ranked = index.fuse(mode, dense, kw, 100 if not rerank else depth, vec, fusion_, alpha,
                                    query=text, coverage=coverage)
            ranking = [pid for pid, _, _ in ranked]
            if rerank:  # products a mode did not return go last, in a fixed order
                rest = sorted(set(known) - set(ranking))
                ranking += rest
                scores = [s for _, s, _ in ranked] + [min([s for _, s, _ in ranked], default=0.0) - 1] * len(rest)
                per[mode]["spearman"].append(spearman(scores, [judged[d] for d in ranking]))
            per[mode]["ndcg@10"].append(ndcg(ranking, judged, gain_offset))
            per[mode]["mrr@10"].append(mrr(ranking, judged, gain_offset))
            per[mode]["recall@100"].append(recall(ranking, judged, gain_offset))
        scored.append(qid)
        count.add()
    res = EvalResult("rerank" if rerank else "full-corpus", len(qids),
                     settings={"gain_offset": gain_offset, "half": half or "all", "fusion": fusion_,
                               "alpha": sorted(set(alphas)) if len(set(alphas)) > 1 else alphas[0],
                               "candidates": candidates, "coverage": coverage, "products": store.count(),
                               "translated": sum(len(p.dense) > 1 for p in plans),
                               "corrected": sum(p.corrected is not None for p in plans),
                               "query_adapter": _adapter_settings(index)},
                     qids=scored, per_query={m: {k: v for k, v in per[m].items() if v} for m in MODES})
    for m in MODES:
        res.metrics[m] = {k: _mean(v) for k, v in per[m].items() if v}
    return res


def _adapter_settings(index) -> dict | None:
    """What the evaluation's query adapter was fitted on (None: searched without one)."""
    ad = index.adapter()
    return None if ad is None else {k: ad.info.get(k) for k in ("queries", "epochs", "source", "fitted_on", "trained")}


def fitted_on_these(adapter_settings: dict | None, qrels, half: str) -> bool:
    """Whether the evaluation's adapter was fitted on judgments of ``qrels`` (a path) that the
    evaluated ``half`` shares (its figures then are not held out)."""
    on = (adapter_settings or {}).get("fitted_on") or {}
    if not on.get("qrels") or Path(on["qrels"]) != Path(qrels).resolve():
        return False
    return "all" in (on.get("half", "all"), half) or on.get("half") == half
