"""The query side of attention (query_side.py): a stand-in query from the catalog, its attention to the title."""

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.explain import attention_maps, selling_points
from qkv.explain.points import PointsCatalog
from qkv.explain.query_side import product_query, query_attention

CATALOG = ["Everbilt 8-Gauge Angle Bracket", "Hillman Steel Angle Bracket", "Simpson Strong-Tie Corner Bracket",
           "Everbilt Zinc Shelf Bracket", "Delta Chrome Shower Faucet", "Glacier Bay Kitchen Faucet"]


def test_product_query_is_the_neighbours_most_shared_words(encoder):
    cat = PointsCatalog.build(CATALOG, encoder)
    vec = encoder.encode(["Simpson 12-Gauge Angle"], normalize=True)[0]
    q = product_query(cat, vec, "Simpson 12-Gauge Angle", k=4, words=2)
    # the four nearest are the brackets: "bracket" is held by all four, then "angle" by two
    assert q.split() == ["bracket", "angle"]
    assert product_query(cat, vec, "x", k=0) == ""


def test_query_attention_by_hand(encoder):
    title, query = "Hillman Steel Angle Bracket", "angle bracket"
    words = [w for w in attention_maps(encoder, title).words if not w.special]
    got = query_attention(encoder, query, title, words)
    # by hand: the joint text's last-layer weights, heads averaged, query pieces' rows averaged
    m = attention_maps(encoder, query + " | " + title)
    a = m.weights[-1].mean(axis=0)
    rows = [t for t, (s, e) in enumerate(m.seq.offsets) if not m.seq.special[t] and e <= len(query) and e > s]
    col = a[rows].mean(axis=0)
    shift = len(query) + 3
    for w, g in zip(words, got):
        toks = [t for t, (s, e) in enumerate(m.seq.offsets)
                if not m.seq.special[t] and s < w.end + shift and e > w.start + shift]
        assert g == pytest.approx(col[toks].sum(), rel=1e-5)
    assert 0 < got.sum() < 1
    assert query_attention(encoder, "", title, words).tolist() == [0.0] * len(words)


def test_query_method_ranks_with_rollout_beside(encoder):
    cat = PointsCatalog.build(CATALOG, encoder)
    sp = selling_points(attention_maps(encoder, "Simpson Galvanized Angle Bracket"), method="query", catalog=cat)
    assert sp.method == "query" and np.isfinite(sp.score).all() and len(sp.salience) == len(sp.words)
    with pytest.raises(InputError, match="needs a catalog"):
        selling_points(attention_maps(encoder, "Angle Bracket"), method="query")
