"""Title advice (terms.advise): neighbours of the same product type, their naming words, by learned weight."""

from pathlib import Path

import numpy as np
import pytest

from qkv.explain import terms as T
from qkv.explain.points import PointsCatalog, load_catalog

ROOT = Path(__file__).resolve().parents[2]
BOOT_WORDS = {"boot", "boots", "chelsea", "leather", "hiking", "waterproof", "ankle", "support"}


def test_naming_part_and_product_type():
    assert T.naming_part("Velora Running Shoes, Red, US 9") == "Velora Running Shoes"
    assert T.naming_part("Velora Women's Hiking Boots with Ankle Support - Navy") == "Velora Women's Hiking Boots"
    assert T.naming_part("Northpeak Hiking Boots - Navy, US 6") == "Northpeak Hiking Boots"
    assert T.naming_part("Moen Faucet in Chrome") == "Moen Faucet"
    assert T.product_type("Velora Running Shoes, Red, US 9") == "shoe"
    assert T.product_type("Everbilt Angle Bracket 2 in.") == "bracket"  # number and unit skipped
    assert T.product_type("12 in.") == ""


def test_named_words_and_rank_advice_by_hand():
    """The ranking advise and the bench's bulk expansion share: naming-part words only (no number,
    stop word or brand), the cosine-weighted mean over the neighbours (0 where absent), words the
    title has left out, each word counted once a neighbour."""
    t = "Acme Trail Running Shoe 2 in. - Blue"
    words = [("Acme", 0, 0.9), ("Trail", 5, 0.6), ("Running", 11, 0.8), ("Shoe", 19, 0.7), ("2", 24, 0.5),
             ("Blue", 33, 0.9)]
    assert T.named_words(t, words, lambda f: f == "acme") == [("trail", "Trail", 0.6), ("running", "Running", 0.8),
                                                             ("shoe", "Shoe", 0.7)]
    named = [[("trail", "Trail", 0.6), ("running", "Running", 0.8), ("trail", "Trail", 0.9)],
             [("running", "Running", 0.4), ("mesh", "Mesh", -0.2)]]
    got = T.rank_advice([(0, 0.75), (1, 0.25)], named, have={"shoe", "trail"})
    assert [(a.word, a.neighbours) for a in got] == [("Running", 2)]  # trail: had; mesh: weight below 0
    assert got[0].weight == pytest.approx(0.75 * 0.8 + 0.25 * 0.4)


def test_advice_for_a_running_shoe_leaves_the_boots_out(e5):
    """The README's example: a report made from the sample catalog, e5's neighbours by brand
    include Chelsea and hiking boots; the advice must come from the running shoes."""
    from qkv.search.catalog import read_catalog

    cat_path = ROOT / "qkv/data/sample_catalog.csv"
    titles = {r["id"]: r["title"] for r in read_catalog(cat_path).rows}
    head = T.train(e5, T.examples_from_report(ROOT / "docs/examples/search_terms_report.csv", titles=titles))
    cat = load_catalog(cat_path, e5, cache_dir=None)
    title = "Velora Running Shoes, Red, US 9"
    near = T.advisers(e5, title, cat)
    assert near and all("Shoes" in cat.titles[i] for i, _ in near)
    # without the product-type rule, boots are among the neighbours read (the problem being fixed)
    loose = T.advisers(e5, title, cat, same_type=False, floor=0.0)
    assert any("Boots" in cat.titles[i] for i, _ in loose)
    adv = T.advise(head, e5, title, cat)
    words = {a.word.lower() for a in adv}
    assert adv and not words & BOOT_WORDS, words
    assert {"breathable", "mesh"} <= words
    # colours and sizes (after ", " / " - ") and other brands are no advice
    assert not words & {"green", "white", "blue", "northpeak", "stridewell"}
    assert [a.weight for a in adv] == sorted((a.weight for a in adv), reverse=True) and all(a.weight > 0 for a in adv)


def test_similarity_floor_and_weighting(encoder):
    titles = ["Everbilt Steel Angle Bracket", "Hillman Zinc Angle Bracket", "Delta Chrome Shower Faucet"]
    cat = PointsCatalog.build(titles, encoder)
    near = T.advisers(encoder, "Simpson Galvanized Angle Bracket", cat, k=3, same_type=False)
    sims = [s for _, s in near]
    assert sims == sorted(sims, reverse=True) and all(s >= T.FLOOR * sims[0] for s in sims)
    assert "Delta Chrome Shower Faucet" not in [cat.titles[i] for i, _ in near]  # below the floor
    # the weight is the similarity-weighted mean of the word's learned weight over the neighbours read
    head = T.train(encoder, [T.Example(t, (("angle bracket", 1.0), ("steel", 1.0))) for t in titles[:2]])
    adv = {a.word: a for a in T.advise(head, encoder, "Simpson Galvanized Angle Bracket", cat, k=3, same_type=False)}
    scored = dict(zip(*head.title_scores(encoder, [titles[0]])[0]))
    by = {cat.titles[i]: s for i, s in near}
    assert "Steel" in adv and adv["Steel"].neighbours == 1
    assert adv["Steel"].weight == pytest.approx(by[titles[0]] * scored["Steel"] / sum(by.values()), rel=1e-5)
    assert np.isfinite([a.weight for a in adv.values()]).all()
