"""Selling points from the title and the catalog (points.py): features and ranking by hand."""

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.explain import attention_maps, selling_points
from qkv.explain.points import PointsCatalog, features, load_catalog, score

BRACKET = "Simpson Strong-Tie 12-Gauge Angle Bracket in Galvanized 2 ft."


def test_features_by_hand(nike_maps):
    class W:
        def __init__(self, text, start):
            self.text, self.start = text, start

    words = [W("Acme", 0), W("Ceramic", 5), W("Tile", 13), W("in", 18), W("White", 21), W("12", 27), W("ft", 30)]
    f = features("Acme Ceramic Tile in White 12 ft", words)
    assert f["pos"].tolist() == pytest.approx([0, 5 / 30, 13 / 30, 18 / 30, 21 / 30, 27 / 30, 1])
    assert f["head"].tolist() == [1, 1, 1, 0, 0, 0, 0]  # " in " ends the head
    assert f["spec"].tolist() == [0, 0, 0, 1, 0, 1, 1]  # "in" is also a unit (inches)
    assert f["stop"].tolist() == [0, 0, 0, 1, 0, 0, 0]
    assert not f["share"].any() and not f["brand"].any()  # no catalog: title alone
    s = score(f)
    # by the formula: Tile 0.5·13/30 + 0.3 beats Ceramic 0.5·5/30 + 0.3; the number and the stop word rank last
    assert s[2] == pytest.approx(0.5 * 13 / 30 + 0.3) and s[5] == pytest.approx(0.5 * 27 / 30 - 1)
    # White (0.5·21/30 = 0.35, after " in ") still beats the brand Acme (0 + 0.3)
    assert np.argsort(-s)[:4].tolist() == [2, 1, 4, 0] and np.argmin(s) == 3


def test_title_method_is_the_default_and_keeps_rollout_beside(encoder):
    m = attention_maps(encoder, BRACKET)
    sp = selling_points(m)
    assert sp.method == "title"
    ranked = [w for w, _ in sp.ranked()]
    assert ranked[0] == "Bracket" and ranked.index("Angle") < ranked.index("12-Gauge")
    assert ranked[-1] == "in"
    rollout = selling_points(m, method="rollout")
    np.testing.assert_allclose(sp.salience, rollout.salience)  # the attention evidence is the same
    d = sp.to_dict()
    top = d["ranked"][0]
    assert d["method"] == "title" and top["word"] == "Bracket"
    assert top["salience"] == pytest.approx(float(sp.salience[sp.words.index("Bracket")]), abs=1e-6)


def test_catalog_method_prefers_words_neighbours_share(encoder, tmp_path):
    titles = ["Everbilt 8-Gauge Angle Bracket", "Hillman Steel Angle Bracket", "Simpson Strong-Tie Corner Bracket",
              "Everbilt Zinc Shelf Bracket", "Delta Chrome Shower Faucet", "Moen Bathroom Faucet in Brushed Nickel",
              "Glacier Bay Kitchen Faucet", BRACKET]
    cat = PointsCatalog.build(titles, encoder)
    m = attention_maps(encoder, BRACKET)
    sp = selling_points(m, catalog=cat)
    assert sp.method == "catalog"
    # the title method reads the title alone even when a catalog is at hand
    np.testing.assert_allclose(selling_points(m, method="title", catalog=cat).score, selling_points(m).score)
    assert not np.allclose(sp.score, selling_points(m).score)
    f = features(BRACKET, [w for w in m.words if not w.special and w.text not in ("-", ".")], cat,
                 encoder.encode([BRACKET])[0], k=4)
    words = [w.text for w in m.words if not w.special and w.text not in ("-", ".")]
    # the four nearest titles (itself left out) are the brackets: every one says "bracket"
    assert f["share"][words.index("Bracket")] == 1.0 and f["share"][words.index("Galvanized")] == 0.0
    # "Simpson" opens both catalog titles that hold it; "Bracket" opens none
    assert f["brand"][words.index("Simpson")] == 1.0 and f["brand"][words.index("Bracket")] == 0.0
    assert sp.ranked()[0][0] == "Bracket"
    # a catalog file: read as `qkv index` reads it, vectors cached
    p = tmp_path / "cat.csv"
    p.write_text("id,title\n" + "".join(f"{i},{t}\n" for i, t in enumerate(titles)), encoding="utf-8")
    c1 = load_catalog(p, encoder, cache_dir=str(tmp_path / "cache"))
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 1
    c2 = load_catalog(p, encoder, cache_dir=str(tmp_path / "cache"))
    np.testing.assert_array_equal(c1.vectors, c2.vectors)


def test_bad_method_and_mismatched_model(encoder, e5):
    m = attention_maps(encoder, BRACKET)
    with pytest.raises(InputError, match="not available"):
        selling_points(m, method="magic")
    with pytest.raises(InputError, match="needs a catalog"):
        selling_points(m, method="catalog")
    with pytest.raises(InputError, match="use one model"):
        selling_points(m, catalog=PointsCatalog.build(["Angle Bracket", "Faucet"], e5))
    with pytest.raises(InputError, match="no titles"):
        PointsCatalog.build([], encoder)


def test_order_features_by_hand():
    from qkv.explain.points import features
    from qkv.model.tokenizer import Word

    text = "Everbilt Angle Bracket in Zinc"
    ws, at = [], 0
    for t in text.split():
        i = text.index(t, at)
        ws.append(Word(t, i, i + len(t), ()))
        at = i + len(t)
    f = features(text, ws)
    # content words Everbilt Angle Bracket Zinc ("in" a stop word): counted from the end
    assert f["fromend"].tolist() == pytest.approx([1 / 4, 1 / 3, 1 / 2, 0.0, 1.0])
    assert f["fromend_head"].tolist() == pytest.approx([1 / 3, 1 / 2, 1.0, 0.0, 0.0])
    assert f["last_head"].tolist() == [0, 0, 1, 0, 0]
