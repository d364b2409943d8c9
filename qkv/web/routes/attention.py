"""The attention view: one layer's heads for a text, rollout, the neuron view and the tour."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from qkv.errors import InputError
from qkv.web.limits import Limits
from qkv.web.routes._util import rounded, state

router = APIRouter(tags=["attention"])
_L = Limits()

Text = Annotated[str, Field(min_length=1, max_length=_L.max_text_chars,
                            description="The text to look at (at most 128 tokens for the maps).")]


class AttentionRequest(BaseModel):
    text: Text
    layer: int = Field(0, ge=0, description="Layer index, 0-based.")


class AttentionResponse(BaseModel):
    tokens: list[str]
    special: list[bool]
    layer: int
    num_layers: int
    num_heads: int
    weights: list[list[list[float]]] = Field(description="[heads][query][key], each row sums to 1")


def _check_text(text: str) -> str:
    if not text.strip():
        raise InputError("text is empty: type something to look at")
    return text


@router.post("/attention", response_model=AttentionResponse, summary="All heads of one layer")
async def attention(body: AttentionRequest, request: Request) -> AttentionResponse:
    st = state(request)
    text = _check_text(body.text)
    n_layers = st.encoder.config.num_layers
    if body.layer >= n_layers:
        raise InputError(f"layer {body.layer} does not exist: this model has layers 0..{n_layers - 1}")
    att = await st.run(st.attention, text)
    return AttentionResponse(tokens=list(att.tokens), special=list(att.special), layer=body.layer,
                             num_layers=att.weights.shape[0], num_heads=att.weights.shape[1],
                             weights=rounded(att.weights[body.layer]))
