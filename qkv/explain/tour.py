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

Default for multilingual-e5-small: MEASURED_E5 below, chosen the same way but on word-level maps
(``head_profile(level="word")``: its bare "▁" word-start pieces would otherwise count as tokens that
words can "pick out") over 300 OA-Mine + 300 AE-110K English titles and 300 Chinese Taobao titles
(``bench/explain.py --model multilingual-e5-small --level word --zh``, load 3.5): layer 11 head 6,
far_peak 0.192 over the 895 titles with three words or more (English 0.180, Chinese 0.216 — the best
head on the Chinese titles alone), with 27% of its weight on <s>/</s>; the runner-up, layer 11
head 1 (0.185; best on the English titles alone, 0.189), gives 41% to them.

The tour answers one question at word level (pieces merged as in ``words.merge_attention``: a
word's query pieces averaged, its key pieces summed; Chinese runs cut by the search segmenter):
how much does word A attend to word B, in every head of the layer — by default the text's first
two words ("运动鞋 跑步 …": how much does 运动鞋 attend to 跑步?), or ``ask=(A, B)``.
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
from qkv.explain.tour_text import LACKS_SCRIPT
from qkv.explain.words import merge_attention
from qkv.errors import InputError
from qkv.model.linear import seen
from qkv.model.tokenizer import Word

MEASURED_E5 = (11, 6)  # see the module docstring and docs/explain.md for the figures
DEFAULTS = {("all-MiniLM-L6-v2", 6, 12): (5, 11), ("multilingual-e5-small", 12, 12): MEASURED_E5}
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
    word_weights: np.ndarray = None  # [heads, words, words] every head of the layer, word level
    question: tuple[int, int] | None = None  # (word i, word j): how much does i attend to j?
    unknown_chars: str = ""  # the characters the model's unknown tokens stand for
    x_rounded: bool = False  # the products read X rounded to int8 blocks (4-bit without AMX), and so did the tour
    _extra: dict = field(default_factory=dict, repr=False)

    @property
    def n_content(self) -> int:
        return len(self.tokens) - sum(self.special)

    @property
    def unknown_rate(self) -> float:
        """Share of the content tokens that are the model's unknown token."""
        return self.n_unknown / max(1, self.n_content)

    @property
    def lacks_script(self) -> bool:
        """The model does not know this text's characters (judged by its tokenizer, not the language)."""
        return self.unknown_rate >= LACKS_SCRIPT

    def word_attends(self, i: int, k: int = 2, head: int | None = None) -> list[tuple[int, float]]:
        w = self.word_weights[self.head if head is None else head][i]
        order = np.argsort(-w, kind="stable")[:k]
        return [(int(j), float(w[j])) for j in order]

    def answer(self) -> dict | None:
        """The tour's question answered from the real weights: how much word i attends to word j in
        the chosen head and in every head of the layer, and where j ranks among i's words there."""
        if self.question is None:
            return None
        i, j = self.question
        per_head = self.word_weights[:, i, j]
        row = self.word_weights[self.head, i]
        content = np.asarray([not w.special for w in self.words])
        special = float(row[~content].sum())
        return {"from": self.words[i].text, "to": self.words[j].text, "from_word": i, "to_word": j,
                "weight": float(per_head[self.head]), "per_head": [float(x) for x in per_head],
                "rank": int((row[content] > row[j]).sum()) + 1, "of": int(content.sum()), "special": special,
                "top_head": int(np.argmax(per_head)), "top_weight": float(per_head.max()),
                "mean": float(per_head.mean()), "uniform": 1.0 / len(row)}

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
                "words": [{"text": w.text, "start": w.start, "end": w.end, "tokens": list(w.tokens),
                           "special": w.special} for w in self.words],
                f"layers.{self.layer}.attn.weights[word level]": r(self.word_weights),
                "question": self.answer(),
                "unknown": {"tokens": self.n_unknown, "rate": round(self.unknown_rate, 6),
                            "chars": self.unknown_chars, "lacks_script": self.lacks_script},
                "checks": [c.to_dict() for c in self.checks], "ok": self.ok,
                "steps": self.steps(lang)}


def _labels(seq, unk: set[int]) -> tuple[str, ...]:
    out = []
    for i, (t, (s, e)) in enumerate(zip(seq.tokens, seq.offsets)):
        out.append(f"{seq.text[s:e]}→{t}" if i in unk and e > s else t)
    return tuple(out)


def _question(words, ask) -> tuple[int, int] | None:
    """Word indices of ``ask`` = (A, B); None asks about the first two words that are not
    special tokens or punctuation."""
    from qkv.model.tokenizer import _is_punct

    content = [i for i, w in enumerate(words) if not w.special and not _is_punct(w.text)]
    if ask is None:
        return (content[0], content[1]) if len(content) >= 2 else None
    if isinstance(ask, str) or len(ask) != 2:
        raise InputError("ask is two words of the text: (A, B) asks how much A attends to B")
    out = []
    for a in ask:
        hit = [i for i in content if words[i].text == a] or [i for i in content if words[i].text.lower() == str(a).lower()]
        if not hit:
            raise InputError(f"{a!r} is not a word of the text; its words are: "
                             + ", ".join(words[i].text for i in content))
        out.append(hit[0])
    return out[0], out[1]


def tour(enc, text: str, layer: int | None = None, head: int | None = None, *, truncate: bool = False,
         rtol: float = 1e-4, ask: tuple[str, str] | None = None) -> Tour:
    """Compute the five steps for ``text`` at ``layer``/``head`` by hand and check them against the
    engine's trace (a check passes when max |difference| ≤ rtol · max(1, max |value|)).
    ``ask=(A, B)``: the question the tour answers at word level (default: its first two words)."""
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
    packed = enc.weights.layers[layer]
    cfg, lw = enc.config, packed.dense()  # matrices as numbers, whatever the format
    d, nh = cfg.head_dim, cfg.num_heads
    # X as the engine's products read it: X itself, or rounded to int8 blocks where the 4-bit
    # products quantise it (multilingual-e5-small without AMX tiles): the same quantisation as the
    # trace, so the checks compare the same computation (qkv.model.linear.seen).
    xs = seen(packed.w_qkv, x)

    # Steps 1–5 for the chosen head, with this head's columns of the fused Q|K|V weights.
    sq, sk, sv = head_slices(enc, head)
    wq, wk, wv = lw.w_qkv[:, sq], lw.w_qkv[:, sk], lw.w_qkv[:, sv]
    bq, bk, bv = lw.b_qkv[sq], lw.b_qkv[sk], lw.b_qkv[sv]
    q, k, v = project(xs, wq, bq), project(xs, wk, bk), project(xs, wv, bv)
    s = scores(q, k)
    ss = scale_scores(s, d)
    w = softmax(ss, axis=-1)
    ctx = weighted_sum(w, v)

    # Every head the same way (as one [H, H] projection split into heads), concatenated, then W_o.
    H = cfg.hidden_size
    qa = split_heads(project(xs, lw.w_qkv[:, :H], lw.b_qkv[:H]), nh)
    ka = split_heads(project(xs, lw.w_qkv[:, H:2 * H], lw.b_qkv[H:2 * H]), nh)
    va = split_heads(project(xs, lw.w_qkv[:, 2 * H:], lw.b_qkv[2 * H:]), nh)
    sa = scores(qa, ka)
    ssa = scale_scores(sa, d)
    wa = softmax(ssa, axis=-1)
    ca = weighted_sum(wa, va)
    out = project(seen(packed.w_o, merge_heads(ca)), lw.w_o, lw.b_o)

    mine = {"attn.q": qa, "attn.k": ka, "attn.v": va, "attn.scores": sa, "attn.scaled_scores": ssa,
            "attn.weights": wa, "attn.context": ca, "attn.out": out}
    checks = []
    for n in CHECKED:
        name = f"layers.{layer}.{n}"
        ref = tr.get(name, 0)
        diff = float(np.abs(mine[n].astype(np.float64) - ref).max())
        scale = float(np.abs(ref).max())
        checks.append(Check(name, tuple(ref.shape), diff, scale, diff <= rtol * max(1.0, scale)))
    unk_id = enc.tokenizer.unk_id
    unk = {i for i, (t, sp) in enumerate(zip(seq.ids, seq.special)) if not sp and t == unk_id}
    chars = "".join(dict.fromkeys(seq.text[seq.offsets[i][0]:seq.offsets[i][1]] for i in sorted(unk)))
    n_cjk = sum(_is_cjk(ch) for ch in text)
    words = seq.words(segment=True)
    ww = merge_attention(wa.astype(np.float64), words)  # every head, from the hand computation (= the trace)
    return Tour(text, enc.name, layer, head, seq.tokens, _labels(seq, unk), seq.special, tuple(words), x_name, x,
                wq, wk, wv, bq, bk, bv, q, k, v, s, ss, w, ctx, ca, lw.w_o, out, tuple(checks), len(unk), n_cjk,
                ww, _question(words, ask), chars, xs is not x)
