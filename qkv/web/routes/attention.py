"""The attention view: heatmaps of one head or all heads of a layer, rollout, the neuron view of
one query token, and the guided tour's five steps. Every number comes from ``qkv.explain``."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from qkv.errors import InputError
from qkv.web.limits import Limits
from qkv.web.routes._util import BODY, Whole, jsonable, require, state

router = APIRouter(tags=["attention"])
_L = Limits()

Text = Annotated[str, Field(min_length=1, max_length=_L.max_text_chars,
                            description="The text to look at (at most 128 tokens with [CLS]/[SEP]).")]
Layer = Annotated[Whole, Field(ge=0, le=63, description="Layer index, 0-based.")]
Head = Annotated[Whole, Field(ge=0, le=63, description="Head index, 0-based.")]


class MapRequest(BaseModel):
    model_config = BODY
    text: Text
    layer: Layer = 0
    head: Head | None = Field(0, description="A head, or null for the heads combined.")
    grid: bool = Field(False, description="Every head of the layer (ignores head).")
    kind: Literal["attention", "norm"] = Field("attention", description="Raw weights, or ‖α·f(x)‖ shares (norm-weighted).")
    level: Literal["token", "word"] = "token"
    hide_special: bool = False


class RolloutRequest(BaseModel):
    model_config = BODY
    text: Text
    layer: Layer | None = Field(None, description="Rollout after this layer (default: the last).")
    level: Literal["token", "word"] = "token"
    hide_special: bool = False


class NeuronRequest(BaseModel):
    model_config = BODY
    text: Text
    layer: Layer = 0
    head: Head = 0
    query: Whole = Field(1, ge=0, description="Position of the query token (0 = [CLS]).")


class TourRequest(BaseModel):
    model_config = BODY
    text: Text
    layer: Layer | None = None
    head: Head | None = None
    lang: Literal["en", "zh"] = "en"


def _text(text: str) -> str:
    if not text.strip():
        raise InputError("text is empty: type something to look at")
    return text


def _labels(seq, unk_id) -> list[str]:
    """Tokens as shown: an unknown token ([UNK]: most Chinese characters for MiniLM's vocabulary)
    carries the characters it stands for, as the tour labels them."""
    return [f"{seq.text[s:e]}→{t}" if i == unk_id and e > s else t
            for t, i, (s, e) in zip(seq.tokens, seq.ids, seq.offsets)]


def _header(m) -> dict:
    """Tokens and words (SentencePiece "▁" pieces and Chinese runs grouped into words as search
    segments them; ``start``/``end`` index the text) of an attention view."""
    unk = m._enc.tokenizer.unk_id if hasattr(m, "_enc") else None
    return {"text": m.text, "tokens": list(m.tokens), "labels": _labels(m.seq, unk), "special": [bool(s) for s in m.special],
            "words": [{"text": w.text, "start": w.start, "end": w.end, "tokens": list(w.tokens), "special": w.special}
                      for w in m.words],
            "num_layers": m.num_layers, "num_heads": m.num_heads}


def _draw(st, op: str, body) -> dict:
    """One attention-view answer (runs in the attention pool, perhaps in a child process)."""
    if op == "tour":
        import qkv.explain as ex

        return jsonable(ex.tour(st.encoder, body.text, body.layer, body.head).to_dict(body.lang))
    m = st.maps(body.text)
    if op == "attention":
        kw = dict(kind=body.kind, hide_special=body.hide_special, level=body.level)
        maps = m.grid(body.layer, **kw) if body.grid else [m.heatmap(body.layer, body.head, **kw)]
        return {**_header(m), "layer": body.layer, "maps": [jsonable(h.to_dict()) for h in maps]}
    if op == "rollout":
        layer = m.num_layers - 1 if body.layer is None else body.layer
        h = m.heatmap(layer, None, kind="rollout", hide_special=body.hide_special, level=body.level)
        return {**_header(m), "layer": layer, "maps": [jsonable(h.to_dict())]}
    return jsonable(m.neuron(body.layer, body.head, body.query).to_dict())


async def _view(request: Request, op: str, body) -> dict:
    require("qkv.explain", "the attention view")
    _text(body.text)
    return await state(request).run("attention", _draw, op, body)


@router.post("/attention", summary="Heatmap of one head, the heads combined, or every head of a layer")
async def attention(body: MapRequest, request: Request) -> dict:
    return await _view(request, "attention", body)


@router.post("/rollout", summary="Attention rollout through the layers")
async def rollout(body: RolloutRequest, request: Request) -> dict:
    return await _view(request, "rollout", body)


@router.post("/neuron", summary="Neuron view: how one query token's weights come about in one head")
async def neuron(body: NeuronRequest, request: Request) -> dict:
    return await _view(request, "neuron", body)


@router.post("/tour", summary="The five steps of attention for one head, with the real numbers")
async def tour(body: TourRequest, request: Request) -> dict:
    require("qkv.explain", "the tour")
    st = state(request)
    text = _text(body.text)
    n = len(st.encoder.tokenize([text])[0])
    if n > st.limits.max_attention_tokens:
        from qkv.web.state import TooLarge

        raise TooLarge(f"the text has {n} tokens; the tour shows at most {st.limits.max_attention_tokens}: shorten it")
    return await _view(request, "tour", body)
