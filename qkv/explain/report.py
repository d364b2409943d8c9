"""Everything ``qkv explain`` shows for one text, gathered as plain data."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qkv.explain.attribution import PairAttribution, WordScores, occlusion, pair_occlusion, pair_value_zeroing, \
    title_value_zeroing
from qkv.explain.display import ShowsHtml, render
from qkv.explain.maps import CAVEAT, AttentionMaps, attention_maps
from qkv.explain.salience import SellingPoints, selling_points
from qkv.explain.tour import default_layer_head
from qkv.explain._inputs import check_head, check_layer

HTML_FULL_LIMIT = 96  # above this many tokens the page carries the chosen layer only (size)
# Occlusion and value zeroing re-run the model once per word: above this many tokens explain()
# skips them (and says so) rather than taking minutes; maps, rollout and selling points remain.
ATTRIBUTION_LIMIT = 128


@dataclass
class Explanation(ShowsHtml):
    maps: AttentionMaps
    layer: int
    head: int
    selling_points: SellingPoints
    occlusion: WordScores | None
    value_zeroing: WordScores | None
    pair: PairAttribution | None = None
    pair_value_zeroing: PairAttribution | None = None
    note: str | None = None  # what was skipped, and why

    @property
    def text(self) -> str:
        return self.maps.text

    def to_dict(self, maps: bool = True) -> dict:
        out = {"text": self.text, "model": self.maps.model, "layer": self.layer, "head": self.head,
               "caveat": CAVEAT["en"],
               "selling_points": self.selling_points.to_dict(),
               "occlusion": None if self.occlusion is None else self.occlusion.to_dict(),
               "value_zeroing": None if self.value_zeroing is None else self.value_zeroing.to_dict(),
               "note": self.note,
               "heatmap": self.maps.heatmap(self.layer, self.head).to_dict(),
               "neuron": self.maps.neuron(self.layer, self.head, 1 if len(self.maps.tokens) > 2 else 0).to_dict()}
        if self.pair is not None:
            out["pair"] = {"occlusion": self.pair.to_dict(),
                           "value_zeroing": self.pair_value_zeroing.to_dict()}
        if maps:
            kinds = ("attention", "norm", "rollout") + (("value_zeroing",) if self.occlusion is not None else ())
            out.update(self.maps.to_dict(kinds=kinds))
        return out

    def page_data(self) -> dict:
        """What the HTML page embeds: every layer for short texts, the chosen layer for long ones."""
        m = self.maps
        n = len(m.tokens)
        layers = list(range(m.num_layers)) if n <= HTML_FULL_LIMIT else [self.layer]
        r = lambda a: np.round(np.asarray(a, dtype=float), 3).tolist()  # noqa: E731  (3 decimals: page size)
        from qkv.explain.norms import row_share

        heads = list(range(m.num_heads)) if n <= HTML_FULL_LIMIT else [self.head]
        nw, nl = m.norm_weights(), m.norm_layers()
        return {
            "text": m.text, "model": m.model, "tokens": list(m.tokens), "special": [bool(s) for s in m.special],
            "words": [{"text": w.text, "start": w.start, "end": w.end, "tokens": list(w.tokens), "special": w.special}
                      for w in m.words],
            "layers": layers, "heads": heads, "num_heads": m.num_heads, "layer": self.layer, "head": self.head,
            "d_k": int(m.q.shape[-1]),
            "attention": {l: {h: r(m.weights[l, h]) for h in heads} for l in layers},
            "attention_all": {l: r(m.weights[l].mean(axis=0)) for l in layers},
            "norm": {l: {h: r(row_share(nw[l, h])) for h in heads} for l in layers},
            "norm_all": {l: r(row_share(nl[l])) for l in layers},
            "rollout": {l: r(m.rollout()[l]) for l in layers},
            # value zeroing costs n re-runs of a layer: only when explain() computed it
            "value_zeroing": {l: r(m.value_zeroing_layer(l)) for l in layers} if self.occlusion is not None else {},
            "q": {l: {h: r(m.q[l, h]) for h in heads} for l in layers},
            "k": {l: {h: r(m.k[l, h]) for h in heads} for l in layers},
            "selling_points": self.selling_points.to_dict(),
            "occlusion": None if self.occlusion is None else self.occlusion.to_dict(),
            "value_zeroing_words": None if self.value_zeroing is None else self.value_zeroing.to_dict(),
            "pair": None if self.pair is None else {"occlusion": self.pair.to_dict(),
                                                    "value_zeroing": self.pair_value_zeroing.to_dict()},
            "caveat": CAVEAT["en"], "note_layers": " ".join(x for x in (
                None if len(layers) == m.num_layers else
                f"{n} tokens: only layer {self.layer}, head {self.head} is embedded in this page "
                "(use --json or --layer/--head for others).",
                self.note) if x) or None,
        }

    def to_html(self) -> str:
        """The whole offline page (drawn by the renderer registered for it: ``html.report_page``)."""
        return render(self, "page")


def explain(enc, text: str, layer: int | None = None, head: int | None = None, *, query: str | None = None,
            truncate: bool = False, catalog=None, method: str | None = None, term_head=None) -> Explanation:
    """Maps, selling points, occlusion and value zeroing for ``text`` (and, with ``query``, which
    words made the query/text similarity high or low). ``catalog`` (``PointsCatalog``),
    ``term_head`` (``TermHead``) and ``method``: how the selling points are ranked (``selling_points``)."""
    dl, dh = default_layer_head(enc)
    layer = check_layer(enc, layer, dl)
    head = check_head(enc, head, dh)
    m = attention_maps(enc, text, truncate=truncate)
    n = len(m.tokens)
    if n > ATTRIBUTION_LIMIT:
        note = (f"{n} tokens: occlusion and value zeroing (one model run per word) are skipped above "
                f"{ATTRIBUTION_LIMIT} tokens; maps, rollout and selling points are shown.")
        return Explanation(m, layer, head, selling_points(m, method=method, catalog=catalog, head=term_head), None, None, None, None, note)
    m.value_zeroing()  # computed once here so every view shares it
    pair = pvz = None
    if query is not None:
        pair = pair_occlusion(enc, query, text, truncate=truncate)
        pvz = pair_value_zeroing(enc, query, text, truncate=truncate)
    return Explanation(m, layer, head, selling_points(m, method=method, catalog=catalog, head=term_head), occlusion(enc, text, truncate=truncate),
                       title_value_zeroing(enc, text, truncate=truncate), pair, pvz)
