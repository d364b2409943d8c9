"""The search view: the index chosen at start-up, searched through ``qkv.search.Index``."""

from __future__ import annotations

import time
from typing import Annotated, Literal, Union

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from qkv.web.limits import Limits
from qkv.web.routes._util import jsonable, require, state

router = APIRouter(tags=["search"])
_L = Limits()
_MAX_CHOICES = 60  # a text field with at most this many distinct values becomes a drop-down


class FieldFilter(BaseModel):
    field: Annotated[str, Field(min_length=1, max_length=100)]
    op: Literal["=", "!=", "<", "<=", ">", ">=", "contains"] = "="
    value: Union[float, Annotated[str, Field(max_length=200)]]


class SearchRequest(BaseModel):
    query: Annotated[str, Field(min_length=1, max_length=_L.max_query_chars)]
    mode: Literal["hybrid", "dense", "keyword"] = "hybrid"
    k: int = Field(10, ge=1, le=_L.max_results)
    filters: Annotated[list[FieldFilter], Field(max_length=20)] = []
    explain: bool = Field(True, description="Add each result's match grid and word shares.")


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
    from qkv.search.text import normalize

    matched = {t for t, _ in terms}
    out = []
    for w in explanation.title_words:
        if w.special:
            continue
        words = set(normalize(w.text).split())
        out.append({"start": w.start, "end": w.end, "share": w.share, "answers": w.best_query_word,
                    "keyword": sorted(words & matched)})
    return out


@router.post("/search", summary="Search the index: hybrid, dense or keyword, with filters")
async def search(body: SearchRequest, request: Request) -> dict:
    st = state(request)
    require("qkv.search", "search")
    index = await st.run(st.index)
    where = _where(body.filters)

    def run():
        t0 = time.perf_counter()
        results = index.search(body.query, k=body.k, mode=body.mode, where=where, explain=body.explain)
        return results, dict(index.last_timings), time.perf_counter() - t0

    results, timings, seconds = await st.run(run)
    out = []
    for r in results:
        item = jsonable(r.to_json())
        if r.explanation is not None:
            item["highlights"] = jsonable(_highlights(r.explanation, r.explanation.keyword_terms))
        out.append(item)
    return {"query": body.query, "mode": body.mode, "count": len(out), "results": out,
            "server_ms": round(seconds * 1000, 2),
            "timings_ms": {k: round(v * 1000, 2) for k, v in timings.items()}}


@router.get("/search/fields", response_model=FieldsResponse, summary="Fields of the index, for filters")
async def fields(request: Request) -> FieldsResponse:
    st = state(request)
    require("qkv.search", "search")
    index = await st.run(st.index)
    return await st.run(_describe_fields, st, index)


def _describe_fields(st, index) -> FieldsResponse:
    if st.fields_cache is not None:
        return st.fields_cache
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
    st.fields_cache = out
    return out
