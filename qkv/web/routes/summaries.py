"""The summaries view: reviews (pasted or uploaded) → ``qkv.summarize.summarize`` under a budget."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from qkv.errors import InputError
from qkv.web.limits import Limits
from qkv.web.routes._util import BODY, Whole, jsonable, require, state
from qkv.web.state import TooLarge

router = APIRouter(tags=["summaries"])
_L = Limits()

Tokenizer = Literal["cl100k", "o200k", "model"]
Order = Literal["original", "score"]


class SummarizeRequest(BaseModel):
    model_config = BODY
    reviews: Annotated[list[Annotated[str, Field(max_length=_L.max_review_chars)]],
                       Field(min_length=1, max_length=_L.max_reviews)]
    ratings: list[Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-_L.max_rating, le=_L.max_rating)] | None] | None = Field(
        None, description="One per review (or null), e.g. 1-5 stars; a finite number within ±max_rating.")
    budget: Whole = Field(75, ge=1, le=_L.max_budget_tokens, description="Most tokens the summary may have.")
    tokenizer: Tokenizer = "cl100k"
    order: Order = "original"
    allow_cut: bool = Field(False, description="When every sentence is over the budget, cut the best one at it "
                                               "(else 422 saying so).")


async def _summarize(request: Request, reviews, ratings, budget: int, tokenizer: str, order: str,
                     allow_cut: bool = False) -> dict:
    st = state(request)
    require("qkv.summarize", "review summaries")
    if not any(isinstance(r, str) and r.strip() or getattr(r, "text", "").strip() for r in reviews):
        raise InputError("every review is empty: paste some review text")
    if ratings is not None and len(ratings) != len(reviews):
        raise InputError(f"{len(ratings)} ratings for {len(reviews)} reviews: give one per review (or none)")
    return await st.run("summary", _summary, list(reviews), ratings, budget, tokenizer, order, allow_cut)


def _summary(st, reviews, ratings, budget: int, tokenizer: str, order: str, allow_cut: bool = False) -> dict:
    """Runs in the summary pool (perhaps in a child process, with its own copy of the model)."""
    import qkv.summarize as mod

    summary = mod.summarize(reviews, budget=budget, tokenizer=tokenizer, encoder=st.encoder, ratings=ratings, order=order,
                            allow_cut=allow_cut, points=True)  # what several reviewers say, counted: {"praise": [...], "complaints": [...]}
    out = jsonable(summary.to_dict())
    out["tokens_saved"] = summary.tokens_before - summary.tokens_after
    return out


@router.post("/summarize", summary="Summarise pasted reviews under a token budget")
async def summarize(body: SummarizeRequest, request: Request) -> dict:
    return await _summarize(request, body.reviews, body.ratings, body.budget, body.tokenizer, body.order, body.allow_cut)


@router.post("/summarize/upload", summary="Summarise an uploaded review file (.txt, .csv/.tsv, .jsonl)")
async def summarize_upload(request: Request,
                           file: Annotated[UploadFile, File(description="Reviews: one per line (.txt), a CSV/TSV with a review column, or JSON lines.")],
                           budget: Annotated[int, Form(ge=1, le=_L.max_budget_tokens)] = 75,
                           tokenizer: Annotated[Tokenizer, Form()] = "cl100k",
                           order: Annotated[Order, Form()] = "original",
                           product: Annotated[int, Form(ge=0, description="Which product of a grouped file.")] = 0,
                           column: Annotated[str | None, Form(max_length=100, description="The review column of a CSV/JSON lines file when its name is not one qkv recognises.")] = None,
                           allow_cut: Annotated[bool, Form()] = False) -> dict:
    st = state(request)
    require("qkv.summarize", "review summaries")
    from qkv.summarize.readers import MissingColumn

    limit = st.limits.max_upload_bytes
    data = await file.read(limit + 1)  # the upload is held in memory only; nothing is written to disk by us
    if len(data) > limit:
        raise TooLarge(f"the file is larger than this server's upload limit of {limit:,} bytes")
    # decoded, read and summarised in the summary pool (behind its queue limit, off the event loop)
    try:
        return await st.run("summary", _upload_summary, data, file.filename or "upload.txt", budget, tokenizer, order,
                            product, column, allow_cut)
    except MissingColumn as e:  # the page offers the file's columns to choose from
        return JSONResponse({"error": 'the uploaded file has no review column qkv recognises; choose which column '
                                      'holds the reviews ("column")', "columns": e.columns}, status_code=422)


def _upload_summary(st, data: bytes, name: str, budget: int, tokenizer: str, order: str, product: int,
                    column: str | None, allow_cut: bool) -> dict:
    """Runs in the summary pool (perhaps in a child process): the file → its products → a summary."""
    from qkv.summarize.readers import decode, parse_json, parse_plain, parse_table

    if b"\x00" in data:
        raise InputError("the file looks binary; upload text: .txt (one review per line), .csv/.tsv or .jsonl")
    text = decode(data, "the file")  # UTF-8, else the encoding it is in (GBK/GB18030 from Excel)
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    first = text.lstrip()[:1]
    label = "the uploaded file"
    if ext in ("jsonl", "ndjson", "json") or (ext not in ("csv", "tsv", "txt") and first in ("{", "[") and first):
        products = parse_json(text, label, column or None)  # MissingColumn reaches the route
    elif ext in ("csv", "tsv"):
        products = parse_table(text, label, column or None)
    else:
        products = parse_plain(text)
    products = [p for p in products if p.reviews]
    if not products:
        raise InputError("the file holds no reviews")
    if product >= len(products):
        raise InputError(f"product {product} does not exist: the file has {len(products)} (0..{len(products) - 1})")
    chosen = products[product]
    if len(chosen.reviews) > st.limits.max_reviews:
        raise TooLarge(f"the file has {len(chosen.reviews)} reviews; this server summarises at most {st.limits.max_reviews}")
    if any(len(r.text) > st.limits.max_review_chars for r in chosen.reviews):
        raise TooLarge(f"a review is longer than {st.limits.max_review_chars:,} characters")
    out = _summary(st, list(chosen.reviews), None, budget, tokenizer, order, allow_cut)
    out["reviews"] = chosen.texts
    out["products"] = [p.id for p in products]
    out["product"] = product
    return out
