"""Train a tiny model on titles written here, extract, evaluate: the numbers are checked."""

import numpy as np
import pytest

from qkv.attributes import AttributeModel, Example, score
from qkv.errors import InputError, ModelError


def test_training_report_counts(tiny_model, synthetic):
    model, report = tiny_model
    train, _ = synthetic
    n_values = sum(len(v) for ex in train for v in ex.values.values())
    assert report.titles == len(train)
    assert report.alignment.values == n_values
    assert report.alignment.labelled == n_values  # every synthetic value sits on token boundaries
    assert report.alignment.not_in_title == 0
    assert set(model.attrs) == {"Brand", "Type", "Size", "Color", "Gender"}


def test_extract_scores_well_on_held_out_titles(tiny_model, synthetic):
    model, _ = tiny_model
    _, test = synthetic
    preds = model.extract([ex.title for ex in test])
    s = score(test, preds)
    assert s.micro.f1 > 0.9, s.as_dict()
    assert s.per_attr["Brand"].f1 > 0.9
    # recount by hand: tp + fn + (wrong value where gold exists) = judged pairs with a gold value
    gold = sum(1 for ex in test for v in ex.values.values() if v)
    wrong = sum(1 for ex, p in zip(test, preds) for a in p if ex.values.get(a.attr) and a.value not in ex.values[a.attr])
    assert s.micro.tp + s.micro.fn + wrong == gold


def test_spans_index_the_title_exactly(tiny_model, synthetic):
    model, _ = tiny_model
    _, test = synthetic
    odd = ["  Zorvex   Men's  Red  Rain Jacket  12cm ", "ZORVEX naïve Café Running Shoes 9mm!!",
           "Kallipo\tBackpack\nGrey", "Brisko 🎒 Backpack Navy Blue 40cm"]
    titles = [ex.title for ex in test] + odd
    for t, found in zip(titles, model.extract(titles, all_spans=True)):
        for a in found:
            assert t[a.start:a.end] == a.value and a.value.strip() == a.value and a.value
            assert 0.0 < a.confidence <= 1.0 + 1e-9


def test_absent_attributes_are_absent(tiny_model):
    model, _ = tiny_model
    (found,) = model.extract(["Zorvex Lightweight Backpack"])
    attrs = {a.attr for a in found}
    assert "Size" not in attrs and "Color" not in attrs and "Gender" not in attrs
    assert {a.attr: a.value for a in found}.get("Brand") == "Zorvex"


def test_empty_one_character_and_long_titles(tiny_model):
    model, _ = tiny_model
    long_title = "Zorvex Men's Red Rain Jacket 12cm " + " ".join(["lightweight outdoor"] * 400) + " Navy Blue"
    assert model.encoder.tokenizer.count([long_title])[0] > model.encoder.config.max_tokens
    empty, blank, one, long_ = model.extract(["", "   ", "x", long_title])
    assert empty == [] and blank == []
    assert all(one_t.value == "x"[one_t.start:one_t.end] for one_t in one)
    assert {a.attr: a.value for a in long_}.get("Brand") == "Zorvex"
    for a in long_:
        assert long_title[a.start:a.end] == a.value


def test_bad_extract_input(tiny_model):
    model, _ = tiny_model
    with pytest.raises(InputError, match="list of titles"):
        model.extract("Zorvex Backpack")
    with pytest.raises(InputError, match="title 1 is int"):
        model.extract(["ok", 3])
    with pytest.raises(InputError, match="categories"):
        model.extract(["a", "b"], ["Outdoor"])


def test_save_load_round_trip(tiny_model, synthetic, tmp_path, encoder):
    model, _ = tiny_model
    _, test = synthetic
    path = model.save(tmp_path / "m.qkvattr")
    assert path.stat().st_size < 5_000_000
    again = AttributeModel.load(path, encoder)
    titles = [ex.title for ex in test[:8]]
    for x, y in zip(again.extract(titles), model.extract(titles)):  # sparse weights are stored as float16
        assert [(a.attr, a.start, a.end) for a in x] == [(a.attr, a.start, a.end) for a in y]
        assert np.allclose([a.confidence for a in x], [a.confidence for a in y], atol=1e-2)
    assert again.encoder_name == encoder.name and again.encoder_fingerprint == encoder.fingerprint()


def test_model_refused_with_another_encoder(tiny_model, tmp_path, encoder):
    model, _ = tiny_model
    real = model.encoder_fingerprint
    try:
        model.encoder_fingerprint = "0123456789abcdef"
        path = model.save(tmp_path / "other.qkvattr")
    finally:
        model.encoder_fingerprint = real
    with pytest.raises(ModelError, match="trained with encoder .* retrain"):
        AttributeModel.load(path, encoder)


def test_not_a_model_file(tmp_path):
    bad = tmp_path / "junk.qkvattr"
    bad.write_bytes(b"this is not a model")
    with pytest.raises(ModelError, match="not a qkv attribute model"):
        AttributeModel.load(bad)
    with pytest.raises(InputError, match="no attribute model"):
        AttributeModel.load(tmp_path / "missing.qkvattr")


def test_values_not_in_title_are_counted_and_skipped(encoder):
    exs = [Example("Zorvex Red Backpack", {"Brand": ("Zorvex",), "Color": ("Blue",)}),
           Example("Kallipo Black Backpack", {"Brand": ("Kallipo",), "Color": ("Black",)}),
           Example("", {"Brand": ("Nope",)})]
    model, report = AttributeModel.train(exs, encoder, max_iter=5)
    al = report.alignment
    assert (al.values, al.labelled, al.not_in_title, al.empty_titles) == (5, 3, 2, 1)
    assert ("Zorvex Red Backpack", "Color", "Blue") in al.examples_not_in_title


def test_training_needs_values(encoder):
    with pytest.raises(InputError, match="no attribute values"):
        AttributeModel.train([Example("a b", {"Brand": ()})], encoder)
    with pytest.raises(InputError, match="no training examples"):
        AttributeModel.train([], encoder)


def test_fast_emissions_equal_the_training_features(tiny_model, synthetic):
    """Extraction folds projection, scaling and the word mean into one matrix on the encoder
    vectors; the scores must equal those of the explicit training-time features."""
    from qkv.attributes.crf import Batch
    from qkv.attributes.features import sparse_features

    model, _ = tiny_model
    _, held = synthetic
    titles = [ex.title for ex in held] + ["Zorvex Zorvex-Pro Red/Black 12cm/22g", "x"]
    enc = model.encoder
    tts, nonempty, dense, sparse = model._featurize(enc, titles, None, model.gazetteer, model.settings["layers"], None)
    ref = model.crf.emissions(model._batch(nonempty, tts, dense, sparse))
    vecs = [dense[i][:, :dense[i].shape[1] // 2] for i in nonempty]  # the token half is the vectors
    ids = [sparse_features(tts[i], None, model.gazetteer, vocab=model.vocab) for i in nonempty]
    for i, title_ids in zip(nonempty, ids):  # each token's known features, each once
        for got, fs in zip(title_ids, sparse[i], strict=True):
            assert sorted(got) == sorted({model.vocab[f] for f in fs if f in model.vocab})
    fast = model._sparse_emissions(ids)
    fast += model._dense_emissions(vecs, [tts[i].word_of for i in nonempty])
    fast += model.crf.b
    assert fast.shape == ref.shape
    assert np.allclose(fast, ref, atol=1e-4 * np.abs(ref).max())
    lengths = np.asarray([len(tts[i]) for i in nonempty])
    for a, b in zip(model.crf.decode(Batch(None, None, lengths), fast)[0],
                    model.crf.decode(model._batch(nonempty, tts, dense, sparse))[0]):
        assert (a == b).all()
