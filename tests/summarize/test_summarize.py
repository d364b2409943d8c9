import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qkv.errors import InputError
from qkv.summarize import Params, Review, get_counter, prepare, select, summarize

from .conftest import SHOE_RATINGS, SHOE_REVIEWS, ZH_REVIEWS


def test_summary_fields_and_budget(encoder):
    s = summarize(SHOE_REVIEWS, budget=40, encoder=encoder)
    c = get_counter("cl100k")
    assert c.count(s.text) == s.tokens_after <= 40
    assert s.tokens_before == c.count("\n".join(SHOE_REVIEWS))
    assert 0 < s.saving < 100 and s.n_reviews == 6
    for x in s.sentences:
        assert SHOE_REVIEWS[x.review][x.start:x.end] == x.text and x.text in s.text
        assert x.tokens == c.count(x.text) and x.score > 0
    # original order: by review, then position
    assert [(x.review, x.start) for x in s.sentences] == sorted((x.review, x.start) for x in s.sentences)
    d = s.to_dict()
    assert d["saving"] == round(s.saving, 2) and len(d["sentences"]) == len(s.sentences)


def test_score_order_and_tokenizers(encoder):
    s = summarize(SHOE_REVIEWS, budget=60, encoder=encoder, order="score")
    scores = [x.score for x in s.sentences]
    assert scores == sorted(scores, reverse=True)
    for tok in ("o200k", "model"):
        t = summarize(SHOE_REVIEWS, budget=25, encoder=encoder, tokenizer=tok)
        assert t.tokenizer == tok and get_counter(tok, encoder).count(t.text) <= 25


def test_deterministic(encoder):
    a = summarize(SHOE_REVIEWS, budget=50, encoder=encoder).to_dict()
    b = summarize(list(SHOE_REVIEWS), budget=50, encoder=encoder).to_dict()
    assert a == b


def test_redundancy_is_controlled(encoder):
    dup = ["The battery lasts two full days.", "The battery lasts two full days!",
           "Battery life is two full days.", "The screen is bright and sharp outdoors.",
           "The battery lasts for two full days."]
    doc = prepare(dup, encoder=encoder)
    sims = doc.vectors @ doc.vectors.T
    c = get_counter("cl100k")
    # Importance alone (no MMR, no duplicate check) spends the budget on near-copies...
    plain = select(doc, 20, c, Params(lam=1.0, duplicate=1.01, personal=1.0))
    idx = [doc.texts.index(x.text) for x in plain.sentences]
    assert len(idx) >= 2 and max(sims[i, j] for i in idx for j in idx if i != j) > 0.9
    # ...the default never puts two sentences closer than the duplicate threshold together.
    s = select(doc, 20, c, Params(personal=1.0))
    idx = [doc.texts.index(x.text) for x in s.sentences]
    assert len(idx) >= 2 and max(sims[i, j] for i in idx for j in idx if i != j) < Params().duplicate


def test_rating_balance(encoder):
    reviews = [Review(t, r) for t, r in zip(SHOE_REVIEWS, SHOE_RATINGS)]
    doc = prepare(reviews, encoder=encoder)
    c = get_counter("cl100k")
    on = select(doc, 30, c, Params(balance=True))
    assert {x.rating >= 4 for x in on.sentences} == {True, False}
    # Plain strings plus a ratings list mean the same.
    again = summarize(SHOE_REVIEWS, ratings=SHOE_RATINGS, budget=30, encoder=encoder)
    assert again.text == on.text


def test_chinese(encoder):
    s = summarize(ZH_REVIEWS, budget=30, encoder=encoder)
    assert get_counter("cl100k").count(s.text) <= 30 and s.sentences
    assert " " not in s.text  # Chinese sentences are joined without spaces


def test_clustering_path(encoder):
    many = [f"{a} {b}." for a in ("The kettle boils fast", "The handle gets hot", "It is very quiet",
                                  "The lid is hard to open", "Looks nice on the counter")
            for b in ("and I like it", "which is good", "overall", "every time", "as expected", "for sure")]
    s = summarize(many, budget=30, encoder=encoder, params=Params(full_limit=10, clusters=6))
    assert s.n_sentences == 30 and s.tokens_after <= 30
    assert any("clusters" in n for n in s.notes)
    assert len({x.text.split(" ")[1] for x in s.sentences}) == len(s.sentences)  # different topics
    t = summarize(many, budget=30, encoder=encoder, params=Params(full_limit=10, clusters=8, reduce="sample"))
    assert t.tokens_after <= 30 and any("random sample of 8" in n for n in t.notes)
    with pytest.raises(InputError, match="unknown reduce"):
        summarize(many, encoder=encoder, params=Params(full_limit=10, reduce="pca"))


def test_bad_input(encoder):
    with pytest.raises(InputError, match="empty"):
        summarize([], encoder=encoder)
    with pytest.raises(InputError, match="empty"):
        summarize(["", "  "], encoder=encoder)
    with pytest.raises(InputError, match="only whitespace or punctuation"):
        summarize(["...", "!!"], encoder=encoder)
    with pytest.raises(InputError, match="one string"):
        summarize("Great shoes.", encoder=encoder)
    with pytest.raises(InputError, match="budget"):
        summarize(SHOE_REVIEWS, budget=0, encoder=encoder)
    with pytest.raises(InputError, match="unknown tokenizer"):
        summarize(SHOE_REVIEWS, tokenizer="gpt2", encoder=encoder)
    with pytest.raises(InputError, match="unknown order"):
        summarize(SHOE_REVIEWS, order="random", encoder=encoder)
    with pytest.raises(InputError, match="2 ratings for 6 reviews"):
        summarize(SHOE_REVIEWS, ratings=[5, 1], encoder=encoder)


def test_one_sentence(encoder):
    s = summarize(["These shoes are comfortable and light."], budget=20, encoder=encoder)
    assert s.text == "These shoes are comfortable and light."
    assert any("single sentence" in n for n in s.notes)


def test_budget_smaller_than_every_sentence(encoder):
    with pytest.raises(InputError, match=r"budget of 3 tokens is smaller than every sentence .*shortest has \d+"):
        summarize(SHOE_REVIEWS, budget=3, encoder=encoder)
    s = summarize(SHOE_REVIEWS, budget=3, encoder=encoder, allow_cut=True)
    assert s.cut and 0 < get_counter("cl100k").count(s.text) <= 3
    assert any("cut" in n for n in s.notes)
    x = s.sentences[0]
    assert SHOE_REVIEWS[x.review][x.start:x.end] == s.text


_word = st.sampled_from(["great", "shoe", "fits", "small", "battery", "lasts", "price", "质量", "很好", "物流",
                         "快", "😍", "e.g.", "3.5", "I", "my", "not", "very", "comfortable", "broke", "Mr."])
_sentence = st.lists(_word, min_size=1, max_size=12).map(" ".join).flatmap(
    lambda s: st.sampled_from([".", "!", "?", "。", "！", "", "…"]).map(lambda p: s + p))
_review = st.lists(_sentence, min_size=1, max_size=5).map(" ".join)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reviews=st.lists(_review, min_size=1, max_size=6), budget=st.integers(1, 60),
       tok=st.sampled_from(["cl100k", "o200k", "model"]), order=st.sampled_from(["original", "score"]),
       ratings=st.none() | st.lists(st.integers(1, 5), min_size=6, max_size=6))
def test_budget_is_never_exceeded(hash_encoder, reviews, budget, tok, order, ratings):
    counter = get_counter(tok, hash_encoder)
    rs = [Review(t, None if ratings is None else ratings[i]) for i, t in enumerate(reviews)]
    try:
        s = summarize(rs, budget=budget, tokenizer=tok, encoder=hash_encoder, order=order, allow_cut=True)
    except InputError as e:  # only the "nothing to summarise" case may refuse
        assert "no sentences" in str(e) or "empty" in str(e)
        return
    assert counter.count(s.text) == s.tokens_after <= budget
    assert s.text.strip() or s.cut


def test_scores_are_attention_received(encoder):
    doc = prepare(SHOE_REVIEWS, encoder=encoder)
    from qkv.summarize.rank import attention_matrix, importance

    pi = importance(doc.vectors, Params().tau)
    p = attention_matrix(doc.vectors, Params().tau)
    assert np.allclose(pi @ p, pi, rtol=1e-4)
    s = select(doc, 75, get_counter("cl100k"), Params(personal=1.0))
    for x in s.sentences:
        i = doc.texts.index(x.text)
        assert x.score == pytest.approx(pi[i])
