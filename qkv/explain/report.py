"""Everything ``qkv explain`` shows for one text, gathered as plain data."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qkv.explain.attribution import PairAttribution, WordScores, occlusion, pair_occlusion, pair_value_zeroing, \
    title_value_zeroing
from qkv.explain.maps import CAVEAT, AttentionMaps, attention_maps
from qkv.explain.salience import SellingPoints, selling_points
from qkv.explain.tour import default_layer_head
from qkv.explain._inputs import check_head, check_layer

HTML_FULL_LIMIT = 96  # above this many tokens the page carries the chosen layer only (size)


@dataclass
class Explanation:
    maps: AttentionMaps
    layer: int
    head: int
    selling_points: SellingPoints
    occlusion: WordScores
    value_zeroing: WordScores
    pair: PairAttribution | None = None
    pair_value_zeroing: PairAttribution | None = None

    @property
    def text(self) -> str:
        return self.maps.text

    def to_dict(self, maps: bool = True) -> dict:
        out = {"text": self.text, "model": self.maps.model, "layer": self.layer, "head": self.head,
               "caveat": CAVEAT["en"],
               "selling_points": self.selling_points.to_dict(),
               "occlusion": self.occlusion.to_dict(), "value_zeroing": self.value_zeroing.to_dict(),
               "heatmap": self.maps.heatmap(self.layer, self.head).to_dict(),
               "neuron": self.maps.neuron(self.layer, self.head, 1 if len(self.maps.tokens) > 2 else 0).to_dict()}
        if self.pair is not None:
            out["pair"] = {"occlusion": self.pair.to_dict(),
                           "value_zeroing": self.pair_value_zeroing.to_dict()}
        if maps:
            out.update(self.maps.to_dict(kinds=("attention", "norm", "rollout", "value_zeroing")))
        return out

    def page_data(self) -> dict:
        """What the HTML page embeds: every layer for short texts, the chosen layer for long ones."""
        m = self.maps
        n = len(m.tokens)
        layers = list(range(m.num_layers)) if n <= HTML_FULL_LIMIT else [self.layer]
        r = lambda a: np.round(np.asarray(a, dtype=float), 3).tolist()  # noqa: E731  (3 decimals: page size)
        from qkv.explain.norms import row_share

        return {
            "text": m.text, "model": m.model, "tokens": list(m.tokens), "special": [bool(s) for s in m.special],
            "words": [{"text": w.text, "tokens": list(w.tokens), "special": w.special} for w in m.words],
            "layers": layers, "num_heads": m.num_heads, "layer": self.layer, "head": self.head,
            "d_k": int(m.q.shape[-1]),
            "attention": {l: r(m.weights[l]) for l in layers},
            "norm": {l: r(row_share(m.norm_weights()[l])) for l in layers},
            "norm_all": {l: r(row_share(m.norm_layers()[l])) for l in layers},
            "rollout": {l: r(m.rollout()[l]) for l in layers},
            "value_zeroing": {l: r(m.value_zeroing()[l]) for l in layers},
            "q": {l: r(m.q[l]) for l in layers}, "k": {l: r(m.k[l]) for l in layers},
            "selling_points": self.selling_points.to_dict(),
            "occlusion": self.occlusion.to_dict(), "value_zeroing_words": self.value_zeroing.to_dict(),
            "pair": None if self.pair is None else {"occlusion": self.pair.to_dict(),
                                                    "value_zeroing": self.pair_value_zeroing.to_dict()},
            "caveat": CAVEAT["en"], "note_layers": None if len(layers) == m.num_layers else
            f"{n} tokens: only layer {self.layer} is embedded in this page (use --json for all layers)",
        }

    def to_html(self) -> str:
        from qkv.explain.html import report_page

        return report_page(self)

    def _repr_html_(self) -> str:
        from qkv.explain.html import report_fragment

        return report_fragment(self)


def explain(enc, text: str, layer: int | None = None, head: int | None = None, *, query: str | None = None,
            truncate: bool = False) -> Explanation:
    """Maps, selling points, occlusion and value zeroing for ``text`` (and, with ``query``, which
    words made the query/text similarity high or low)."""
    dl, dh = default_layer_head(enc)
    layer = check_layer(enc, layer, dl)
    head = check_head(enc, head, dh)
    m = attention_maps(enc, text, truncate=truncate)
    m.value_zeroing()  # computed once here so every view shares it
    pair = pvz = None
    if query is not None:
        pair = pair_occlusion(enc, query, text, truncate=truncate)
        pvz = pair_value_zeroing(enc, query, text, truncate=truncate)
    return Explanation(m, layer, head, selling_points(m), occlusion(enc, text, truncate=truncate),
                       title_value_zeroing(enc, text, truncate=truncate), pair, pvz)
