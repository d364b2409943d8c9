"""What this server offers: model, index, limits and which views work."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Request
from pydantic import BaseModel

from qkv.web.routes._util import available, state

router = APIRouter(tags=["meta"])


class Health(BaseModel):
    status: str
    model: str
    fingerprint: str
    num_layers: int
    num_heads: int
    index: str | None
    attributes_model: str | None
    features: dict[str, bool]
    limits: dict[str, int]


@router.get("/health", response_model=Health, summary="Model, index, limits and available views")
async def health(request: Request) -> Health:
    st = state(request)
    enc = st.encoder
    return Health(
        status="ok",
        model=enc.name,
        fingerprint=st.fingerprint(),
        num_layers=enc.config.num_layers,
        num_heads=enc.config.num_heads,
        index=st.index_dir.name if st.index_dir else None,  # names only: no server paths to clients
        attributes_model=st.attributes_path.name if st.attributes_path else None,
        features={
            "attention": True,
            "explain": available("qkv.explain"),
            "search": st.index_dir is not None and available("qkv.search"),
            "attributes": st.attributes_path is not None and available("qkv.attributes"),
            "summaries": available("qkv.summarize"),
        },
        limits=asdict(st.limits),
    )
