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
from pydantic import BaseModel, Field

from qkv.web.limits import Limits
from qkv.web.routes._util import BODY, Whole, jsonable, require, state
from qkv.web.state import NotFound, TooLarge

router = APIRouter(tags=["search"])
_L = Limits()
_MAX_CHOICES = 60  # a text field with at most this many distinct values becomes a drop-down
# A query costing more than this many tokens (a Chinese character ≈ one, a word of other text ≈ one)
# is searched in the "search_long" lane: translation and two encodings of a long query took a
# second, while a product query of a few words takes milliseconds.
_LONG_QUERY_TOKENS = 32


class FieldFilter(BaseModel):
    model_config = BODY
    field: Annotated[str, Field(min_length=1, max_length=100)]
    op: Literal["=", "!=", "<", "<=", ">", ">=", "contains"] = "="
    # a number (finite: NaN/±infinity compare false with everything) or text; text for a number
    # field is converted, or refused when it is no number (qkv.search.filters.Filter.check)
    value: Union[Annotated[float, Field(strict=True, allow_inf_nan=False)], Annotated[str, Field(max_length=200)]]


Query = Annotated[str, Field(min_length=1, max_length=_L.max_query_chars)]
Detail = Annotated[Literal["full", "grid"], Field(
    description='"full": the explanation with its words, word-level grid and contrast, top pairs and the '
                'cosine\'s split; "grid": only the token grid, its sums and keyword terms (what the page draws; '
                'about a fifth of the bytes). The highlights come with both.')]


class SearchRequest(BaseModel):
    model_config = BODY
    query: Query
    mode: Literal["hybrid", "dense", "keyword"] = "hybrid"
    k: Whole = Field(10, ge=1, le=_L.max_results)
    filters: Annotated[list[FieldFilter], Field(max_length=20)] = []
    explain: Union[bool, Annotated[Whole, Field(ge=0, le=_L.max_results)]] = Field(
        False, description="Add the match grid and word shares of the first N results (true: all, false: none); "
                           "others are explained on request by /api/search/explain.")
    explain_detail: Detail = "full"
    spell: bool = Field(True, description="Search an English word no title holds as the catalog word it most likely "
                                          "meant (the answer's `corrected` says as what); false: as typed.")


class ExplainRequest(BaseModel):
    model_config = BODY
    query: Query
    ids: Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]],
                   Field(min_length=1, max_length=_L.max_results, description="Products to explain (from a search).")]
    detail: Detail = "full"
    spell: bool = Field(True, description="As the search asked (its grids are of the text it searched).")


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


def _lane(query: str, limits: Limits) -> str:
    """The pool a search of ``query`` runs in, by its cost; a Chinese query over the Chinese limit is 413."""
    from qkv.text.zh import HAN_RUN

    han = sum(len(m) for m in HAN_RUN.findall(query))
    if han > limits.max_query_han_chars:
        raise TooLarge(f"the query has {han} Chinese characters; a query may have at most "
                       f"{limits.max_query_han_chars} Chinese characters: search with fewer words")
    return "search_long" if han + len(HAN_RUN.sub(" ", query).split()) > _LONG_QUERY_TOKENS else "search"


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
    from qkv.text.keywords import normalize

    return frozenset(normalize(word).split())


def _explanations(index, query: str, ids: list[str], titles: list[str],
                  detail: str = "full", plan=None) -> tuple[list[dict], object]:
    """The match explanation and title highlights of each product, of the query as it was
    searched (``Index.plan``: a Chinese query's keyword side also holds its English), and its
    translation (None: searched as typed). The query's token vectors come from its search pass and the titles'
    from the index's cache (``Index.explain_titles``), so this costs little more than the search.
    ``plan``: the search's own (``SearchResponse.plan``), else the query is planned again."""
    plan = plan or index.plan(query)
    terms = index.store.keyword_terms(plan.keyword, ids)
    exps = index.explain_titles(plan.dense[0], titles, [terms.get(i, []) for i in ids])
    return ([{"explanation": _explanation_json(e, detail), "highlights": jsonable(_highlights(e, e.keyword_terms))}
             for e in exps], plan.translation)


def _translated_as(tr) -> dict:
    """What a query was searched as: ``searched_as`` (the English, None for a query searched as
    typed) and ``translation``, word by word (``crosslingual.translation_rows``: each word's
    English, source, trust weight and alternatives; None as well)."""
    if tr is None:
        return {"searched_as": None, "translation": None}
    from qkv.search.crosslingual import translation_rows

    text = tr.text
    if getattr(tr, "untranslated", 0):
        from qkv.translate.translator import MAX_HAN_CHARS

        text += (f" (only the first {MAX_HAN_CHARS} Chinese characters were translated; "
                 f"{tr.untranslated} more were searched as typed)")
    return {"searched_as": text, "translation": translation_rows(tr)}


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
    lane = _lane(body.query, st.limits)

    def run(st):
        index = st.index()
        t0 = time.perf_counter()
        results = index.search(body.query, k=body.k, mode=body.mode, where=where, spell=body.spell)
        timings = dict(results.timings)
        out = [jsonable(r.to_json()) for r in results]
        if n_explain and out:
            t1 = time.perf_counter()
            first = results[:n_explain]
            exps, _ = _explanations(index, body.query, [r.id for r in first], [r.title for r in first],
                                    body.explain_detail, results.plan)
            for item, e in zip(out, exps):
                item.update(e)
            timings["explain"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        from qkv.search.floor import weak_results

        weak, floor = weak_results(index, body.query, results)  # nothing close: said, not hidden
        for item, w in zip(out, weak):
            item["weak"] = w
        if floor is not None:
            timings["floor"] = time.perf_counter() - t2
        seconds = time.perf_counter() - t0
        return _json({"query": body.query, **_translated_as(results.translation), "corrected": results.corrected,
                      "mode": body.mode, "count": len(out),
                      "query_adapter": body.mode != "keyword" and index.adapter(query=results.plan) is not None,
                      "floor": None if floor is None else round(floor, 4),
                      "results": out, "server_ms": round(seconds * 1000, 2), "generation": st.generation,
                      "timings_ms": {k: round(v * 1000, 2) for k, v in timings.items()}})

    return await st.run(lane, run)


@router.post("/search/explain", summary="Why these results matched: match grid and highlights, per product")
async def explain(body: ExplainRequest, request: Request) -> dict:
    st = state(request)
    require("qkv.search", "search")
    ids = list(dict.fromkeys(body.ids))
    _lane(body.query, st.limits)  # the Chinese limit

    def run(st):
        index = st.index()
        t0 = time.perf_counter()
        rows = index.store.get_rows(ids)
        missing = [i for i, r in zip(ids, rows) if not r]
        if missing:
            raise NotFound(f"no product {missing[0]!r} in the index (it may have been removed since the search); "
                           "search again")
        exps, tr = _explanations(index, body.query, ids, [r["title"] for r in rows], body.detail,
                                 index.plan(body.query, spell=body.spell))
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
