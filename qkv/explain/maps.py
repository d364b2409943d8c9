"""Attention maps of one text as plain data: heatmaps per head, per layer grid, all layers, the
neuron view of one query token, rollout and value-norm-weighted maps.

``attention_maps(enc, text)`` runs one traced forward pass and keeps, for every layer, the inputs,
Q, K, V and attention weights. Everything else is computed from those arrays; rendering lives in
``figures`` (matplotlib) and ``html`` (offline page), which import this module, never the reverse. Names follow the engine's trace names.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from qkv.explain import norms as _norms
from qkv.explain import rollout as _rollout
from qkv.explain._inputs import check_head, check_layer, tokenize_one
from qkv.explain.display import ShowsHtml
from qkv.explain.words import merge_attention
from qkv.model.tokenizer import Tokens, Word

CAVEAT = {
    "en": ("Attention weights alone are not an explanation (Jain & Wallace 2019; Wiegreffe & Pinter 2019): "
           "a head may put much weight on a token whose value vector is tiny, and the residual path and "
           "feed-forward layers move information too. Check a map against value-norm weighting, rollout, "
           "value zeroing and occlusion before reading it as 'why'."),
    "zh": ("注意力权重本身并不等于解释（Jain & Wallace 2019；Wiegreffe & Pinter 2019）：某个头可能把大量权重"
           "放在值向量很小的词元上，残差连接和前馈层也在传递信息。请先用值范数加权、注意力展开（rollout）、"
           "值置零和遮挡法核对，再把热图读成“原因”。"),
}

KINDS = ("attention", "norm", "rollout", "value_zeroing")


@dataclass(frozen=True)
class HeatMap(ShowsHtml):
    """One matrix with labelled axes: rows are the tokens (or words) that look, columns the ones looked at."""

    name: str  # engine trace name it comes from, e.g. "layers.2.attn.weights" (with head), or "rollout"
    kind: str  # attention | norm | rollout | value_zeroing
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    values: np.ndarray  # [len(rows), len(cols)]
    layer: int | None = None
    head: int | None = None  # None: heads combined
    level: str = "token"  # token | word
    hidden_share: np.ndarray | None = None  # per row: the share that went to hidden special tokens

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.values.shape)

    @property
    def title(self) -> str:
        what = {"attention": "attention", "norm": "‖α·f(x)‖ share (norm-weighted)",
                "rollout": "rollout", "value_zeroing": "value zeroing"}[self.kind]
        where = "" if self.layer is None else f"layer {self.layer}"
        if self.head is not None:
            where += f" head {self.head}"
        elif self.layer is not None and self.kind in ("attention", "norm"):
            where += " (all heads)"
        return f"{what} · {where}".strip(" ·")

    def top(self, i: int, k: int = 2) -> list[tuple[str, float]]:
        """The k columns row i puts most on, with their values."""
        order = np.argsort(-self.values[i], kind="stable")[:k]
        return [(self.cols[j], float(self.values[i, j])) for j in order]

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "layer": self.layer, "head": self.head,
                "level": self.level, "title": self.title, "rows": list(self.rows), "cols": list(self.cols),
                "values": np.round(self.values.astype(float), 6).tolist(),
                "hidden_share": None if self.hidden_share is None
                else np.round(self.hidden_share.astype(float), 6).tolist()}


@dataclass(frozen=True)
class NeuronView(ShowsHtml):
    """How one query token's weights come about in one head (bertviz's neuron view, as data)."""

    layer: int
    head: int
    query: int
    tokens: tuple[str, ...]
    q: np.ndarray  # [d] the query token's q vector
    k: np.ndarray  # [n, d] every key's k vector
    qk: np.ndarray  # [n, d] element-wise q × k_j
    scores: np.ndarray  # [n] q·k_j
    scaled: np.ndarray  # [n] q·k_j / √d
    weights: np.ndarray  # [n] softmax

    def to_dict(self) -> dict:
        r = lambda a: np.round(np.asarray(a, dtype=float), 6).tolist()  # noqa: E731
        return {"name": f"layers.{self.layer}.attn.q/k", "layer": self.layer, "head": self.head,
                "query": self.query, "query_token": self.tokens[self.query], "tokens": list(self.tokens),
                "q": r(self.q), "k": r(self.k), "qk": r(self.qk), "scores": r(self.scores),
                "scaled_scores": r(self.scaled), "weights": r(self.weights)}


@dataclass
class AttentionMaps:
    """One text's attention in every layer and head, with what is needed to weigh it.

    Arrays are per text without padding: inputs [layers, n, H] (X entering each layer), q/k/v
    [layers, heads, n, d], weights [layers, heads, n, n].
    """

    text: str
    model: str
    seq: Tokens
    inputs: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    weights: np.ndarray
    _enc: object = field(repr=False, default=None)
    _cache: dict = field(repr=False, default_factory=dict)

    # ---------------------------------------------------------------- shape and labels
    @property
    def num_layers(self) -> int:
        return self.weights.shape[0]

    @property
    def num_heads(self) -> int:
        return self.weights.shape[1]

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.seq.tokens

    @property
    def special(self) -> np.ndarray:
        return np.asarray(self.seq.special, dtype=bool)

    @property
    def words(self) -> list[Word]:
        return self.seq.words(segment=True)  # Chinese runs cut into words as search segments them

    # ---------------------------------------------------------------- derived matrices
    def norm_weights(self) -> np.ndarray:
        """‖α^h_ij f_h(x_j)‖ per head, [layers, heads, n, n] (Kobayashi et al. 2020)."""
        if "norm_heads" not in self._cache:
            self._cache["norm_heads"] = np.stack([_norms.head_norms(self._enc, l, self.weights[l], self.v[l])
                                                  for l in range(self.num_layers)])
        return self._cache["norm_heads"]

    def norm_layers(self) -> np.ndarray:
        """‖Σ_h α^h_ij f_h(x_j)‖, heads combined, [layers, n, n]."""
        if "norm_layers" not in self._cache:
            self._cache["norm_layers"] = np.stack([_norms.layer_norms(self._enc, l, self.weights[l], self.v[l])
                                                   for l in range(self.num_layers)])
        return self._cache["norm_layers"]

    def rollout(self) -> np.ndarray:
        """Attention rollout after each layer, [layers, n, n], rows sum to 1."""
        if "rollout" not in self._cache:
            self._cache["rollout"] = _rollout.rollout(self.weights)
        return self._cache["rollout"]

    def value_zeroing_layer(self, layer: int) -> np.ndarray:
        """Value-zeroing context-mixing map of one layer, [n, n] (see ``attribution``); cached."""
        key = ("value_zeroing", layer)
        if key not in self._cache:
            from qkv.explain.attribution import value_zeroing_layer
            from qkv.model.threads import blas_threads

            with blas_threads(getattr(self._enc, "threads", None)):
                self._cache[key] = value_zeroing_layer(self._enc, layer, self.inputs[layer])
        return self._cache[key]

    def value_zeroing(self) -> np.ndarray:
        """Value-zeroing maps of every layer, [layers, n, n]."""
        return np.stack([self.value_zeroing_layer(l) for l in range(self.num_layers)])

    # ---------------------------------------------------------------- heatmaps
    def _check(self, layer, head=None):
        layer = check_layer(self._enc, layer, self.num_layers - 1)
        if head is not None:
            head = check_head(self._enc, head, 0)
        return layer, head

    def matrix(self, kind: str = "attention", layer: int = 0, head: int | None = None) -> tuple[np.ndarray, str]:
        """The raw [n, n] matrix of ``kind`` and its trace-style name."""
        if kind == "attention":
            m = self.weights[layer].mean(axis=0) if head is None else self.weights[layer, head]
            return m, f"layers.{layer}.attn.weights"
        if kind == "norm":
            m = self.norm_layers()[layer] if head is None else self.norm_weights()[layer, head]
            return _norms.row_share(m), f"layers.{layer}.attn.weighted_norms"
        if kind == "rollout":
            return self.rollout()[layer], f"rollout.{layer}"
        if kind == "value_zeroing":
            return self.value_zeroing_layer(layer), f"layers.{layer}.value_zeroing"
        raise ValueError(f"unknown map kind {kind!r}; one of {', '.join(KINDS)}")

    def heatmap(self, layer: int | None = None, head: int | None = None, *, kind: str = "attention",
                hide_special: bool = False, level: str = "token") -> HeatMap:
        """One heatmap. ``head=None`` combines the heads (mean of weights; for norms, the norm of the
        heads' sum). ``hide_special`` drops [CLS]/[SEP] rows and columns and records the share each
        row gave them; ``level="word"`` merges word pieces (sum over key pieces, mean over query pieces)."""
        if kind in ("rollout", "value_zeroing") and head is not None:
            head = None  # these are per layer, heads combined
        layer, head = self._check(layer, head)
        m, name = self.matrix(kind, layer, head)
        m = np.asarray(m, dtype=np.float64)
        labels = list(self.tokens)
        special = self.special
        if level == "word":
            words = self.words
            m = merge_attention(m, words)
            labels = [w.text for w in words]
            special = np.array([w.special for w in words])
        elif level != "token":
            raise ValueError("level must be 'token' or 'word'")
        hidden = None
        if hide_special and special.any() and (~special).any():
            keep = ~special
            hidden = m[keep][:, special].sum(axis=1)
            m = m[keep][:, keep]
            labels = [t for t, s in zip(labels, special) if not s]
        return HeatMap(name, kind, tuple(labels), tuple(labels), m, layer, head, level, hidden)

    def grid(self, layer: int | None = None, **kw) -> list[HeatMap]:
        """Every head of one layer (bertviz's model view, one row)."""
        layer, _ = self._check(layer)
        return [self.heatmap(layer, h, **kw) for h in range(self.num_heads)]

    def all_layers(self, **kw) -> list[list[HeatMap]]:
        """[layer][head] heatmaps for the whole model."""
        return [self.grid(l, **kw) for l in range(self.num_layers)]

    def neuron(self, layer: int | None = None, head: int | None = None, query: int | str = 1) -> NeuronView:
        """The neuron view for one query token (position, or the first token with that text)."""
        layer, head = self._check(layer, 0 if head is None else head)
        if isinstance(query, str):
            if query not in self.tokens:
                from qkv.errors import InputError

                raise InputError(f"token {query!r} is not in this text; its tokens are {list(self.tokens)}")
            query = self.tokens.index(query)
        n = len(self.tokens)
        if not -n <= query < n:
            from qkv.errors import InputError

            raise InputError(f"query token {query} is out of range: the text has {n} tokens (0..{n - 1})")
        query %= n
        q = self.q[layer, head, query]
        k = self.k[layer, head]
        qk = q[None, :] * k
        s = qk.sum(axis=1)
        scaled = s / np.sqrt(q.shape[-1])
        return NeuronView(layer, head, query, self.tokens, q, k, qk, s, scaled, self.weights[layer, head, query])

    # ---------------------------------------------------------------- output
    def to_dict(self, kinds=("attention",), level: str = "token") -> dict:
        """Plain data keyed by trace names: per layer the weights [heads, n, n] and derived maps."""
        out = {"text": self.text, "model": self.model, "tokens": list(self.tokens),
               "special": [bool(s) for s in self.special],
               "words": [{"text": w.text, "start": w.start, "end": w.end, "tokens": list(w.tokens),
                          "special": w.special} for w in self.words],
               "num_layers": self.num_layers, "num_heads": self.num_heads, "maps": {}}
        r = lambda a: np.round(np.asarray(a, dtype=float), 6).tolist()  # noqa: E731
        for l in range(self.num_layers):
            if "attention" in kinds:
                out["maps"][f"layers.{l}.attn.weights"] = r(self.weights[l])
            if "norm" in kinds:
                out["maps"][f"layers.{l}.attn.weighted_norms"] = r(self.norm_weights()[l])
                out["maps"][f"layers.{l}.attn.weighted_norms.all_heads"] = r(self.norm_layers()[l])
            if "value_zeroing" in kinds:
                out["maps"][f"layers.{l}.value_zeroing"] = r(self.value_zeroing()[l])
            if "rollout" in kinds:
                out["maps"][f"rollout.{l}"] = r(self.rollout()[l])
        return out


def attention_maps(enc, text: str, *, truncate: bool = False) -> AttentionMaps:
    """Trace ``text`` once and keep what every map needs (layer inputs, Q, K, V, weights)."""
    seq = tokenize_one(enc, text, truncate)
    nl = enc.config.num_layers
    keep = ["embeddings", "layers.*.out", "layers.*.attn.q", "layers.*.attn.k", "layers.*.attn.v",
            "layers.*.attn.weights"]
    with warnings.catch_warnings():  # tokenize_one has already warned about a cut text
        warnings.simplefilter("ignore")
        tr = enc.trace([seq.text], keep=keep, truncate=truncate)
    inputs = np.stack([tr.get("embeddings", 0)] + [tr.get(f"layers.{l}.out", 0) for l in range(nl - 1)])
    return AttentionMaps(text=text, model=enc.name, seq=tr.seqs[0], inputs=inputs, q=tr.stack("attn.q"),
                         k=tr.stack("attn.k"), v=tr.stack("attn.v"), weights=tr.stack("attn.weights"), _enc=enc)
