"""The guided tour: the five steps of attention computed by hand on the real model, for one text,
one layer and one head, then checked against the engine's own trace.

``tour(enc, text, layer, head)`` returns a ``Tour``: plain arrays for every step (the web page and
the CLI render the same data), ``steps(lang)`` with the explanations in English or Chinese, and
``checks``: for q, k, v, scores, scaled_scores, weights, context and attn.out, the largest
difference between the tour's hand computation (from X entering the layer and the layer's
weights ``enc.weights.layers[L]``) and the engine's trace of that layer.

Default layer 5, head 11 (for all-MiniLM-L6-v2): over 600 real product titles (OA-Mine and AE-110K
train splits, ``bench/explain.py``) it is the head where a word most clearly picks out another,
non-neighbouring word of the title (``heads.far_peak`` = 0.173, the highest of the 72 heads; the
runner-up, layer 2 head 0, scores 0.1725 but gives half its weight to [CLS]/[SEP], against 0.32
here). It is also the last layer, the one the sentence vector is pooled from. Qualitatively it is
a "product noun" head: "Stainless Steel Water Bottle" puts its weight on "bottle".
"""

from __future__ import annotations

import math
import unicodedata
import warnings
from dataclasses import dataclass, field

import numpy as np

from qkv.attention import merge_heads, project, scale_scores, scores, softmax, split_heads, weighted_sum
from qkv.explain._inputs import check_head, check_layer, tokenize_one
from qkv.explain.display import ShowsHtml
from qkv.explain.layer import head_slices, layer_input_name
from qkv.model.tokenizer import Word

DEFAULTS = {("all-MiniLM-L6-v2", 6, 12): (5, 11)}
CHECKED = ("attn.q", "attn.k", "attn.v", "attn.scores", "attn.scaled_scores", "attn.weights",
           "attn.context", "attn.out")


def default_layer_head(enc) -> tuple[int, int]:
    c = enc.config
    for (name, nl, nh), lh in DEFAULTS.items():
        if (enc.name or "").endswith(name) and c.num_layers == nl and c.num_heads == nh:
            return lh
    return c.num_layers - 1, 0


def _is_cjk(ch: str) -> bool:
    return "CJK" in unicodedata.name(ch, "") or "\u3040" <= ch <= "\u30ff" or "\uac00" <= ch <= "\ud7af"


@dataclass(frozen=True)
class Check:
    name: str  # engine trace name, e.g. "layers.5.attn.weights"
    shape: tuple[int, ...]
    max_abs_diff: float
    scale: float  # max |value| of the engine's array
    ok: bool

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "max_abs_diff": self.max_abs_diff,
                "max_abs_value": self.scale, "ok": self.ok}


@dataclass(frozen=True)
class Tour(ShowsHtml):
    text: str
    model: str
    layer: int
    head: int
    tokens: tuple[str, ...]
    labels: tuple[str, ...]  # tokens as shown: "[UNK]" tokens carry the characters they stand for
    special: tuple[bool, ...]
    words: tuple[Word, ...]
    x_name: str  # trace name of X: "embeddings" or "layers.{L-1}.out"
    x: np.ndarray  # [n, H]
    wq: np.ndarray  # [H, d] this head's columns of W_q (likewise wk, wv)
    wk: np.ndarray
    wv: np.ndarray
    bq: np.ndarray
    bk: np.ndarray
    bv: np.ndarray
    q: np.ndarray  # [n, d]
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray  # [n, n] Q·Kᵀ
    scaled: np.ndarray  # [n, n] / √d_k
    weights: np.ndarray  # [n, n] softmax rows
    context: np.ndarray  # [n, d] weights·V
    all_context: np.ndarray  # [heads, n, d] every head, by hand
    w_o: np.ndarray  # [H, H]
    attn_out: np.ndarray  # [n, H] concat(heads)·W_o + b_o
    checks: tuple[Check, ...]
    n_unknown: int
    n_cjk: int
    _extra: dict = field(default_factory=dict, repr=False)

    @property
    def d_k(self) -> int:
        return self.q.shape[1]

    @property
    def num_heads(self) -> int:
        return self.all_context.shape[0]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def attends(self, i: int, k: int = 2) -> list[tuple[int, float]]:
        order = np.argsort(-self.weights[i], kind="stable")[:k]
        return [(int(j), float(self.weights[i, j])) for j in order]

    def spread(self) -> dict:
        """Spread of one row's scores before and after scaling: std, max − min (averaged over rows)."""
        def st(a):
            return {"std": float(a.std(axis=1).mean()), "range": float((a.max(1) - a.min(1)).mean()),
                    "min": float(a.min()), "max": float(a.max())}
        top_raw = float(softmax(self.scores, axis=-1).max(axis=1).mean())
        return {"before": st(self.scores), "after": st(self.scaled), "sqrt_d_k": math.sqrt(self.d_k),
                "top_weight_without_scaling": top_raw, "top_weight_with_scaling": float(self.weights.max(1).mean())}

    def steps(self, lang: str = "en") -> list[dict]:
        from qkv.explain.tour_text import steps

        return steps(self, lang)

    def to_dict(self, lang: str = "en") -> dict:
        r = lambda a: np.round(np.asarray(a, dtype=float), 6).tolist()  # noqa: E731
        return {"text": self.text, "model": self.model, "layer": self.layer, "head": self.head,
                "tokens": list(self.tokens), "labels": list(self.labels), "special": list(self.special),
                "d_k": self.d_k, "num_heads": self.num_heads, "x_name": self.x_name,
                "arrays": {self.x_name: r(self.x),
                           f"layers.{self.layer}.attn.q[{self.head}]": r(self.q),
                           f"layers.{self.layer}.attn.k[{self.head}]": r(self.k),
                           f"layers.{self.layer}.attn.v[{self.head}]": r(self.v),
                           f"layers.{self.layer}.attn.scores[{self.head}]": r(self.scores),
                           f"layers.{self.layer}.attn.scaled_scores[{self.head}]": r(self.scaled),
                           f"layers.{self.layer}.attn.weights[{self.head}]": r(self.weights),
                           f"layers.{self.layer}.attn.context[{self.head}]": r(self.context),
                           f"layers.{self.layer}.attn.out": r(self.attn_out)},
                "spread": self.spread(),
                "attends": [[{"token": j, "label": self.labels[j], "weight": round(w, 6)} for j, w in self.attends(i)]
                            for i in range(len(self.tokens))],
                "checks": [c.to_dict() for c in self.checks], "ok": self.ok,
                "steps": self.steps(lang)}


def _labels(seq) -> tuple[str, ...]:
    out = []
    for t, (s, e) in zip(seq.tokens, seq.offsets):
        out.append(f"{seq.text[s:e]}→{t}" if t == "[UNK]" and e > s else t)
    return tuple(out)


def tour(enc, text: str, layer: int | None = None, head: int | None = None, *, truncate: bool = False,
         rtol: float = 1e-4) -> Tour:
    """Compute the five steps for ``text`` at ``layer``/``head`` by hand and check them against the
    engine's trace (a check passes when max |difference| ≤ rtol · max(1, max |value|))."""
    dl, dh = default_layer_head(enc)
    layer = check_layer(enc, layer, dl)
    head = check_head(enc, head, dh)
    seq = tokenize_one(enc, text, truncate)
    x_name = layer_input_name(layer)
    with warnings.catch_warnings():  # tokenize_one has already warned about a cut text
        warnings.simplefilter("ignore")
        tr = enc.trace([text], keep=[x_name, f"layers.{layer}.attn.*"], truncate=truncate)
    seq = tr.seqs[0]
    x = tr.get(x_name, 0)
    cfg, lw = enc.config, enc.weights.layers[layer].dense()  # matrices as numbers, whatever the format
    d, nh = cfg.head_dim, cfg.num_heads

    # Steps 1–5 for the chosen head, with this head's columns of the fused Q|K|V weights.
    sq, sk, sv = head_slices(enc, head)
    wq, wk, wv = lw.w_qkv[:, sq], lw.w_qkv[:, sk], lw.w_qkv[:, sv]
    bq, bk, bv = lw.b_qkv[sq], lw.b_qkv[sk], lw.b_qkv[sv]
    q, k, v = project(x, wq, bq), project(x, wk, bk), project(x, wv, bv)
    s = scores(q, k)
    ss = scale_scores(s, d)
    w = softmax(ss, axis=-1)
    ctx = weighted_sum(w, v)

    # Every head the same way (as one [H, H] projection split into heads), concatenated, then W_o.
    H = cfg.hidden_size
    qa = split_heads(project(x, lw.w_qkv[:, :H], lw.b_qkv[:H]), nh)
    ka = split_heads(project(x, lw.w_qkv[:, H:2 * H], lw.b_qkv[H:2 * H]), nh)
    va = split_heads(project(x, lw.w_qkv[:, 2 * H:], lw.b_qkv[2 * H:]), nh)
    sa = scores(qa, ka)
    ssa = scale_scores(sa, d)
    wa = softmax(ssa, axis=-1)
    ca = weighted_sum(wa, va)
    out = project(merge_heads(ca), lw.w_o, lw.b_o)

    mine = {"attn.q": qa, "attn.k": ka, "attn.v": va, "attn.scores": sa, "attn.scaled_scores": ssa,
            "attn.weights": wa, "attn.context": ca, "attn.out": out}
    checks = []
    for n in CHECKED:
        name = f"layers.{layer}.{n}"
        ref = tr.get(name, 0)
        diff = float(np.abs(mine[n].astype(np.float64) - ref).max())
        scale = float(np.abs(ref).max())
        checks.append(Check(name, tuple(ref.shape), diff, scale, diff <= rtol * max(1.0, scale)))
    n_unk = sum(t == "[UNK]" for t in seq.tokens)
    n_cjk = sum(_is_cjk(ch) for ch in text)
    return Tour(text, enc.name, layer, head, seq.tokens, _labels(seq), seq.special, tuple(seq.words()), x_name, x,
                wq, wk, wv, bq, bk, bv, q, k, v, s, ss, w, ctx, ca, lw.w_o, out, tuple(checks), n_unk, n_cjk)
