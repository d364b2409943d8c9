"""Selling points follow the documented formula."""

import numpy as np

from qkv.explain import selling_points


def test_formula(nike_maps):
    sp = selling_points(nike_maps)
    r = nike_maps.rollout()[-1]
    s = r.mean(axis=0)  # share of the mean-pooled vector drawn from each input token
    words = nike_maps.words
    per_word = np.array([s[list(w.tokens)].sum() for w in words])
    content = np.array([not w.special for w in words])
    np.testing.assert_allclose(sp.special_share, per_word[~content].sum())
    np.testing.assert_allclose(sp.salience, per_word[content] / per_word[content].sum())
    assert sp.salience.sum() == np.float64(1.0) or abs(sp.salience.sum() - 1) < 1e-12
    ranked = sp.ranked()
    assert [v for _, v in ranked] == sorted([v for _, v in ranked], reverse=True)
    assert {w for w, _ in ranked} == set(sp.words) and len(ranked) == 9
    for w, s0, e in zip(sp.words, sp.starts, sp.ends):
        assert nike_maps.text[s0:e] == w


def test_value_zeroing_source(nike_maps):
    """The value-zeroing source follows the same formula over value zeroing's rollout (no residual
    added: value zeroing measures it already), and gives other saliences than attention rollout."""
    from qkv.explain.rollout import rollout

    sp = selling_points(nike_maps, source="value_zeroing")
    assert sp.source == "value_zeroing"
    s = rollout(nike_maps.value_zeroing(), residual=False)[-1].mean(axis=0)  # MiniLM pools by the mean
    per_word = np.array([s[list(w.tokens)].sum() for w in nike_maps.words])
    content = np.array([not w.special for w in nike_maps.words])
    np.testing.assert_allclose(sp.salience, per_word[content] / per_word[content].sum(), rtol=1e-6)
    assert not np.allclose(sp.salience, selling_points(nike_maps).salience, atol=1e-3)


def test_punctuation_is_no_selling_point(encoder):
    from qkv.explain import attention_maps

    m = attention_maps(encoder, "Red shoes, blue shoes (size 42)")
    sp = selling_points(m)
    assert sp.words == ("Red", "shoes", "blue", "shoes", "size", "42")
    assert abs(sp.salience.sum() - 1) < 1e-12 and 0 < sp.special_share < 1
