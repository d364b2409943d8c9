"""The attributes view: pasted titles → ``qkv.attributes.AttributeModel.extract`` (the model file
is chosen when the server starts, never by the client)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from qkv.errors import InputError
from qkv.web.limits import Limits
from qkv.web.routes._util import BODY, jsonable, require, state

router = APIRouter(tags=["attributes"])
_L = Limits()


class AttributesRequest(BaseModel):
    model_config = BODY
    titles: Annotated[list[Annotated[str, Field(max_length=_L.max_title_chars)]],
                      Field(min_length=1, max_length=_L.max_titles)]
    categories: list[Annotated[str, Field(max_length=100)] | None] | None = Field(
        None, description="One product category per title (or null), when the model was trained with categories.")
    normalize: bool = Field(False, description="Also give each value in a normalised form.")
    min_confidence: float = Field(0.0, ge=0.0, le=1.0)


@router.post("/attributes", summary="Attribute values with their spans and confidences, per title")
async def attributes(body: AttributesRequest, request: Request) -> dict:
    st = state(request)
    require("qkv.attributes", "attribute extraction")
    titles = [t.strip() for t in body.titles]
    if not any(titles):
        raise InputError("every title is empty: paste product titles, one per line")
    return await st.run("attributes", _extract, titles, body)


def _extract(st, titles: list[str], body: AttributesRequest) -> dict:
    """Runs in the attributes pool (perhaps in a child process, with its own copy of the model)."""
    model = st.attribute_model()
    t0 = time.perf_counter()
    found = model.extract(titles, body.categories, normalize=body.normalize, min_confidence=body.min_confidence)
    seconds = time.perf_counter() - t0
    demo = model.info.get("demo")  # qkv.web.sample's demo model: the page says how to train one's own
    return {"attributes": list(model.attrs), "demo": demo if isinstance(demo, dict) else None,
            "results": [{"title": t, "attributes": [jsonable(a.as_dict()) for a in attrs]}
                        for t, attrs in zip(titles, found)],
            "server_ms": round(seconds * 1000, 2)}
