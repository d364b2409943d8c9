"""The search view: the index chosen at start-up, searched through ``qkv.search.Index``.

A search answers at once with ranked results; a result's match grid (``qkv.search.explain``) costs a
forward pass over its title, so it is computed only when asked for: for the first ``explain``
results in the same request, or per result through ``/api/search/explain`` (what the page calls when
a result is opened)."""

from __future__ import annotations

import functools
import json
import time
from typing import Annotated, Literal, Union

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from qkv.web.limits import Limits
from qkv.web.routes._util import jsonable, require, state
from qkv.web.state import NotFound

router = APIRouter(tags=["search"])
_L = Limits()
_MAX_CHOICES = 60  # a text field with at most this many distinct values becomes a drop-down


class FieldFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    field: Annotated[str, Field(min_length=1, max_length=100)]
    op: Literal["=", "!=", "<", "<=", ">", ">=", "contains"] = "="
    value: Union[float, Annotated[str, Field(max_length=200)]]


Query = Annotated[str, Field(min_length=1, max_length=_L.max_query_chars)]
Detail = Annotated[Literal["full", "grid"], Field(
    description='"full": the explanation with its words, word-level grid and contrast, top pairs and the '
                'cosine\'s split; "grid": only the token grid, its sums and keyword terms (what the page draws; '
                'about a fifth of the bytes). The highlights come with both.')]


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: Query
    mode: Literal["hybrid", "dense", "keyword"] = "hybrid"
    k: int = Field(10, ge=1, le=_L.max_results)
    filters: Annotated[list[FieldFilter], Field(max_length=20)] = []
    explain: Union[bool, Annotated[int, Field(ge=0, le=_L.max_results)]] = Field(
        False, description="Add the match grid and word shares of the first N results (true: all, false: none); "
                           "others are explained on request by /api/search/explain.")
    explain_detail: Detail = "full"


class ExplainRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: Query
    ids: Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]],
                   Field(min_length=1, max_length=_L.max_results, description="Products to explain (from a search).")]
    detail: Detail = "full"


class FieldDescription(BaseModel):
    name: str
    kind: Literal["text", "number"]
    values: list[str] | None = None  # distinct values, when few
    min: float | None = None
    max: float | None = None


class FieldsResponse(BaseModel):
    index: str
    count: int
    model: str
    fields: list[FieldDescription]


def _where(filters: list[FieldFilter]):
    """The filter tree of qkv.search.filters, built directly (no user text is parsed or spliced)."""
    if not filters:
        return None
    from qkv.search.filters import And, Compare, Filter

    nodes = tuple(Compare(f.field, f.op, f.value if isinstance(f.value, str) else float(f.value)) for f in filters)
    text = " and ".join(f"{f.field} {f.op} {f.value!r}" for f in filters)
    return Filter(nodes[0] if len(nodes) == 1 else And(nodes), text)


def _highlights(explanation, terms) -> list[dict]:
    """Title words to mark: those a keyword term matched (the index's own normalisation), and each
    word's share of the dense score from the match explanation."""
    matched = {t for t, _ in terms}
    out = []
    for w in explanation.title_words:
        if w.special:
            continue
        out.append({"start": w.start, "end": w.end, "share": w.share, "answers": w.best_query_word,
                    "keyword": sorted(_terms_of_word(w.text) & matched)})
    return out


@functools.lru_cache(maxsize=65536)
def _terms_of_word(word: str) -> frozenset:
    """A title word's keyword terms (titles come back again and again; normalising each word of
    three titles was a tenth of an explained search's time)."""
    from qkv.search.text import normalize

    return frozenset(normalize(word).split())


def _explanations(index, query: str, ids: list[str], titles: list[str],
                  detail: str = "full") -> tuple[list[dict], object]:
    """The match explanation and title highlights of each product, of the query as it was
    searched (``Index.plan_query``: a Chinese query's keyword side also holds its English), and
    its translation (None: searched as typed). The query's token vectors come from its search pass and the titles'
    from the index's cache (``Index.explain_titles``), so this costs little more than the search."""
    kw_query, tr = index.plan_query(query.strip())
    terms = index.store.keyword_terms(kw_query, ids)
    exps = index.explain_titles(query, titles, [terms.get(i, []) for i in ids])
    return ([{"explanation": _explanation_json(e, detail), "highlights": jsonable(_highlights(e, e.keyword_terms))}
             for e in exps], tr)


def _translated_as(tr) -> dict:
    """What a query was searched as: ``searched_as`` (the English, None for a query searched as
    typed) and ``translation``, word by word (``crosslingual.translation_rows``: each word's
    English, source, trust weight and alternatives; None as well)."""
    if tr is None:
        return {"searched_as": None, "translation": None}
    from qkv.search.crosslingual import translation_rows

    return {"searched_as": tr.text, "translation": translation_rows(tr)}


def _explanation_json(e, detail: str) -> dict:
    """``jsonable(e.to_json(detail))`` without walking the grid again: ``to_json`` gives it rounded
    in float64 as ``jsonable`` would (its rows were most of an explained search's jsonable time)."""
    d = e.to_json(detail)
    grid = d.pop("grid")
    out = jsonable(d)
    out["grid"] = grid
    return out


def _json(answer: dict) -> Response:
    """The answer, already plain JSON (qkv.jsonable), written as Starlette's JSONResponse writes it
    but in the pool's thread, not on the event loop (which then only sends the bytes), and
    without FastAPI's encoder walking every number of the grids again (2.8 ms of a search with
    three explanations)."""
    return Response(json.dumps(answer, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode(),
                    media_type="application/json")


@router.post("/search", summary="Search the index: hybrid, dense or keyword, with filters")
async def search(body: SearchRequest, request: Request) -> dict:
    st = state(request)
    require("qkv.search", "search")
    where = _where(body.filters)
    n_explain = body.k if body.explain is True else int(body.explain)

    def run(st):
        index = st.index()
        t0 = time.perf_counter()
        results = index.search(body.query, k=body.k, mode=body.mode, where=where)
        timings = dict(index.last_timings)
        out = [jsonable(r.to_json()) for r in results]
        if n_explain and out:
            t1 = time.perf_counter()
            first = results[:n_explain]
            exps, _ = _explanations(index, body.query, [r.id for r in first], [r.title for r in first],
                                    body.explain_detail)
            for item, e in zip(out, exps):
                item.update(e)
            timings["explain"] = time.perf_counter() - t1
        tr = index.last_translation  # this search's (kept per thread, and run() searched in this one)
        t2 = time.perf_counter()
        from qkv.search.floor import weak_results

        weak, floor = weak_results(index, body.query, results)  # nothing close: said, not hidden
        for item, w in zip(out, weak):
            item["weak"] = w
        if floor is not None:
            timings["floor"] = time.perf_counter() - t2
        seconds = time.perf_counter() - t0
        return _json({"query": body.query, **_translated_as(tr), "mode": body.mode, "count": len(out),
                      "floor": None if floor is None else round(floor, 4),
                      "results": out, "server_ms": round(seconds * 1000, 2), "generation": st.generation,
                      "timings_ms": {k: round(v * 1000, 2) for k, v in timings.items()}})

    return await st.run("search", run)


@router.post("/search/explain", summary="Why these results matched: match grid and highlights, per product")
async def explain(body: ExplainRequest, request: Request) -> dict:
    st = state(request)
    require("qkv.search", "search")
    ids = list(dict.fromkeys(body.ids))

    def run(st):
        index = st.index()
        t0 = time.perf_counter()
        rows = index.store.get_rows(ids)
        missing = [i for i, r in zip(ids, rows) if not r]
        if missing:
            raise NotFound(f"no product {missing[0]!r} in the index (it may have been removed since the search); "
                           "search again")
        exps, tr = _explanations(index, body.query, ids, [r["title"] for r in rows], body.detail)
        answer = {"query": body.query, "explanations": dict(zip(ids, exps)),
                  "server_ms": round((time.perf_counter() - t0) * 1000, 2)}
        if tr is not None:
            answer.update(_translated_as(tr))
        return _json(answer)

    return await st.run("explain", run)


@router.get("/search/fields", response_model=FieldsResponse, summary="Fields of the index, for filters")
async def fields(request: Request) -> FieldsResponse:
    st = state(request)
    require("qkv.search", "search")
    return await st.run("search", lambda st: _describe_fields(st, st.index()))


def _describe_fields(st, index) -> FieldsResponse:
    from qkv.web.state import _generation

    generation = _generation(index)
    cached_for, cached = st.fields_cache
    if cached_for == generation:  # described once per generation
        return cached
    store = index.store
    infos = store.fields()
    rows = []
    # Distinct values come from the stored rows; only for a catalog small enough to read at once.
    if hasattr(store, "all_ids") and store.count() <= 50_000:
        rows = [r for r in store.get_rows(store.all_ids()) if r]
    described = []
    for f in infos:
        vals = [r.get(f.name) for r in rows if r.get(f.name) is not None]
        if f.kind == "number":
            nums = [float(v) for v in vals]
            described.append(FieldDescription(name=f.name, kind="number", min=min(nums) if nums else None,
                                              max=max(nums) if nums else None))
        else:
            distinct = sorted({str(v) for v in vals})
            described.append(FieldDescription(name=f.name, kind="text",
                                              values=distinct if 0 < len(distinct) <= _MAX_CHOICES else None))
    out = FieldsResponse(index=st.index_dir.name, count=store.count(), model=index.manifest.model, fields=described)
    st.fields_cache = (generation, out)
    return out
