"""The term-weight head (terms.py): targets by hand, training, files, reports, advice, Chinese."""

import json

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.explain import attention_maps, selling_points
from qkv.explain import terms as T
from qkv.explain.points import PointsCatalog

CATALOG = ["Everbilt 8-Gauge Angle Bracket", "Hillman Steel Angle Bracket", "Simpson Strong-Tie Corner Bracket",
           "Everbilt Zinc Shelf Bracket", "Delta Chrome Shower Faucet", "Moen Bathroom Faucet in Brushed Nickel",
           "Glacier Bay Kitchen Faucet", "Glacier Bay Pull-Down Kitchen Faucet"]
EXAMPLES = [T.Example(t, q) for t, q in [
    ("Everbilt 8-Gauge Angle Bracket", (("angle bracket", 3.0), ("everbilt brackets", 1.0))),
    ("Hillman Steel Angle Bracket", (("steel bracket", 2.0),)),
    ("Delta Chrome Shower Faucet", (("shower faucet", 5.0), ("delta faucet", 1.0))),
    ("Glacier Bay Kitchen Faucet", (("kitchen faucet", 4.0),)),
    ("Moen Bathroom Faucet in Brushed Nickel", (("bathroom faucet", 2.0), ("faucet nickel", 1.0))),
]]


def test_targets_are_weighted_query_term_recall():
    words = ["Everbilt", "8-Gauge", "Angle", "Brackets", "in"]
    y = T.targets(words, [("angle bracket", 3.0), ("everbilt brackets", 1.0), ("gauge", 0.0)])
    # Everbilt 1 of 4 clicks, 8-Gauge none (a 0-click row counts nothing), Angle 3/4, Brackets 4/4, a stop word 0
    assert y.tolist() == pytest.approx([0.25, 0.0, 0.75, 1.0, 0.0])


def test_train_fits_the_closed_form_and_round_trips(encoder, tmp_path):
    head = T.train(encoder, EXAMPLES, ridge=0.5, title_features=False)
    # the closed form by hand: stack every word's vector with a 1, solve (XᵀX + λI')θ = Xᵀy
    xs, ys = [], []
    for ex, (seq, vec) in zip(EXAMPLES, encoder.token_vectors([e.title for e in EXAMPLES])):
        words = T._content_words(seq)
        xs.append(np.hstack([T.word_vectors(seq, vec, words), np.ones((len(words), 1))]))
        ys.append(T.targets([w.text for w in words], ex.queries))
    x, y = np.vstack(xs).astype(np.float64), np.concatenate(ys)
    reg = 0.5 * np.eye(x.shape[1])
    reg[-1, -1] = 0
    sol = np.linalg.solve(x.T @ x + reg, x.T @ y)
    np.testing.assert_allclose(head.theta, sol[:-1], rtol=1e-3, atol=1e-4)
    assert head.bias == pytest.approx(sol[-1], abs=1e-4) and head.info["titles"] == 5
    path = head.save(tmp_path / "mine" / "head.npz")
    back = T.TermHead.load(path, encoder)
    np.testing.assert_array_equal(back.theta, head.theta)
    # fitted words score as trained: on a training title, the searched words above the unsearched
    words, s = head.title_scores(encoder, ["Delta Chrome Shower Faucet"])[0]
    assert s[words.index("Faucet")] > s[words.index("Chrome")]
    m = attention_maps(encoder, "Delta Chrome Shower Faucet")
    sp = selling_points(m, head=back)
    assert sp.method == "learned" and sp.ranked()[0][0] == "Faucet"
    # with the title features the input has their columns, and they are read the same way on scoring
    both = T.train(encoder, EXAMPLES, ridge=0.5)
    assert both.theta.shape == (encoder.dim + len(T.TITLE_FEATURES),) and both.title_features
    assert both.features == T.TITLE_FEATURES and not both.needs_catalog
    back = T.TermHead.load(both.save(tmp_path / "both.npz"), encoder)
    np.testing.assert_allclose(back.title_scores(encoder, [EXAMPLES[0].title])[0][1],
                               both.title_scores(encoder, [EXAMPLES[0].title])[0][1], rtol=1e-5)


def test_bad_head_files(encoder, e5, tmp_path):
    head = T.train(encoder, EXAMPLES[:2])
    with pytest.raises(InputError, match=".npz"):
        head.save(tmp_path / "head.bin")
    with pytest.raises(InputError, match="no term head"):
        T.TermHead.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a term head"):
        T.TermHead.load(tmp_path / "junk.npz")
    p = head.save(tmp_path / "h.npz")
    with pytest.raises(InputError, match="trained on"):
        T.TermHead.load(p, e5)
    with pytest.raises(InputError, match="no training example"):
        T.train(encoder, [T.Example("A title", ())])
    # a head saved by the previous format: a clear error saying to train again
    old = tmp_path / "old.npz"
    np.savez(old, theta=head.theta, meta=np.array(json.dumps({"format": "qkv-term-head/1", "model": head.model,
                                                                "fingerprint": "", "bias": 0.0})))
    with pytest.raises(InputError, match="older qkv .*train it again"):
        T.TermHead.load(old)


def test_catalog_features_read_the_catalog(encoder, tmp_path):
    cat = PointsCatalog.build(CATALOG, encoder)
    seen = []
    head = T.train(encoder, EXAMPLES, catalog=cat, progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert seen == [("titles", 5, 5), ("fit", 1, 1)]  # what the CLI's progress bars are fed
    assert head.needs_catalog and head.features == T.TITLE_FEATURES + T.CATALOG_FEATURES
    assert head.theta.shape == (encoder.dim + len(head.features),)
    back = T.TermHead.load(head.save(tmp_path / "c.npz"), encoder)
    assert back.features == head.features
    with pytest.raises(InputError, match="reads the catalog"):
        back.title_scores(encoder, ["Hillman Steel Angle Bracket"])
    # by hand: the word's vector, then the features points.py reads with the title's neighbours
    from qkv.explain.points import features

    title = "Hillman Steel Angle Bracket"
    words, y = back.scored_words(encoder, [title], cat)[0]
    seq, vec = encoder.token_vectors([title])[0]
    v = encoder.encode([title], normalize=True)[0]
    f = features(title, words, cat, v)
    x = np.hstack([T.word_vectors(seq, vec, words), np.stack([f[k] for k in head.features], axis=1)])
    np.testing.assert_allclose(y, x @ back.theta + back.bias, rtol=1e-4, atol=1e-5)
    assert f["share"].max() > 0  # the neighbours do hold some of its words
    # the public entry point answers the same words and weights
    w2, y2 = back.title_scores(encoder, [title], catalog=cat)[0]
    assert w2 == [w.text for w in words] and np.allclose(y2, y)


def test_report_reading(tmp_path):
    p = tmp_path / "report.csv"
    p.write_text("Customer Search Term,Product,Orders\nangle bracket,A1,3\nbrackets,A1,1\nfaucet,B2,2\nx,Z9,1\n",
                 encoding="utf-8")
    ex = T.examples_from_report(p, titles={"A1": "Angle Bracket", "B2": "Kitchen Faucet"})
    assert {e.title: e.queries for e in ex} == {"Angle Bracket": (("angle bracket", 3.0), ("brackets", 1.0)),
                                                "Kitchen Faucet": (("faucet", 2.0),)}
    t = tmp_path / "titles.tsv"
    t.write_text("query\ttitle\nangle bracket\tAngle Bracket\n", encoding="utf-8")
    assert T.examples_from_report(t)[0].queries == (("angle bracket", 1.0),)  # no weight column: 1 a row
    with pytest.raises(InputError, match="no query column"):
        (tmp_path / "bad.csv").write_text("a,b\n1,2\n", encoding="utf-8")
        T.examples_from_report(tmp_path / "bad.csv")
    (tmp_path / "n.csv").write_text("query,title,clicks\nq,T,many\n", encoding="utf-8")
    with pytest.raises(InputError, match="is not a number"):
        T.examples_from_report(tmp_path / "n.csv")


def test_advise_suggests_what_neighbours_are_searched_by(encoder):
    head = T.train(encoder, EXAMPLES)
    cat = PointsCatalog.build(CATALOG, encoder)
    adv = T.advise(head, encoder, "Glacier Bay Pull-Down Sprayer", cat, k=3)
    words = [a.word.lower() for a in adv]
    assert "faucet" in words and "glacier" not in words and "sprayer" not in words
    assert [a.weight for a in adv] == sorted((a.weight for a in adv), reverse=True)
    assert all(1 <= a.neighbours <= 3 for a in adv)


def test_multilingual_head_scores_a_chinese_title(e5):
    head = T.train(e5, EXAMPLES)
    title = "安踏 男士透气网面跑鞋 轻便运动鞋 黑色 42码"
    words, s = head.title_scores(e5, [title])[0]
    assert "跑鞋" in words and np.isfinite(s).all() and len(s) == len(words)
    sp = selling_points(attention_maps(e5, title), head=head)
    assert sp.method == "learned" and len(sp.ranked()) == len(sp.words) and np.isfinite(sp.score).all()
