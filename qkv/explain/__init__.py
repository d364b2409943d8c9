"""Seeing attention: the guided tour, heatmaps, rollout, norm-weighted maps, value zeroing,
occlusion and the words a title leans on. Plain data first (dataclasses with ``to_dict()``),
rendered by ``figures`` (matplotlib), ``html`` (an offline page) and the ``qkv tour`` /
``qkv explain`` commands. Renderers import the data, never the reverse: result objects show
themselves in a notebook (``_repr_html_``) through the views ``html`` registers (``display``).

    >>> import qkv, qkv.explain as ex
    >>> enc = qkv.load()
    >>> t = ex.tour(enc, "Nike Air Max 270 Men's Running Shoes")       # five steps, checked
    >>> m = ex.attention_maps(enc, "Nike Air Max 270 Men's Running Shoes")
    >>> m.heatmap(5, 11, hide_special=True, level="word")                 # HeatMap (rows, cols, values)
    >>> ex.selling_points(m).ranked()
    >>> ex.explain(enc, "...", query="running shoes").to_html()          # everything, one page
"""

from qkv.explain.attribution import (PairAttribution, WordScores, occlusion, pair_occlusion,
                                     pair_value_zeroing, title_value_zeroing, value_zeroing)
from qkv.explain.heads import HeadProfile, head_profile
from qkv.explain.maps import CAVEAT, AttentionMaps, HeatMap, NeuronView, attention_maps
from qkv.explain.report import Explanation, explain
from qkv.explain.rollout import rollout
from qkv.explain.salience import SellingPoints, selling_points
from qkv.explain.tour import Tour, default_layer_head, tour

# The HTML views register themselves for the result classes above (see ``display``): imported
# here, after the data, so every result object can show itself in a notebook.
from qkv.explain import html as _html  # noqa: E402,F401  (isort: skip)

__all__ = ["CAVEAT", "AttentionMaps", "Explanation", "explain", "HeadProfile", "HeatMap", "NeuronView", "PairAttribution", "SellingPoints",
           "Tour", "WordScores", "attention_maps", "default_layer_head", "head_profile", "occlusion",
           "pair_occlusion", "pair_value_zeroing", "rollout", "selling_points", "title_value_zeroing", "tour",
           "value_zeroing"]
