"""Chinese titles with the multilingual encoder: a character-BIO sample written here (brands, product
types and sizes invented for the test, nothing from ../shared) trains, and extraction returns spans
exact to the characters."""

import random

import numpy as np
import pytest

from qkv.attributes import AttributeModel, read_bio, span_scores
from qkv.attributes.features import token_vectors, tokenize_titles

BRANDS = ["途骏", "卡维诺", "森洛", "迈步特", "雅可思", "凯瑞安"]
TYPES = ["跑步鞋", "双肩包", "保温杯", "冲锋衣", "瑜伽垫", "登山杖"]
FILL = ["新款", "男士", "女士", "轻便", "透气", "防水", "户外", "正品", "包邮", "2024"]
SIZES = ["42码", "500ml", "35L", "1.8米", "XL"]


def _titles(n: int, seed: int) -> list[list[tuple[str, str | None]]]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        parts = [(rnd.choice(BRANDS), "HPPX")] + [(rnd.choice(FILL), None) for _ in range(rnd.randint(1, 3))]
        parts.append((rnd.choice(TYPES), "HCCX"))
        if rnd.random() < 0.6:
            parts.append((rnd.choice(SIZES), "SIZE"))
        head, tail = parts[:1], parts[1:]
        rnd.shuffle(tail)
        if rnd.random() < 0.3:  # brand not always first
            head, tail = tail[:1], head + tail[1:]
        out.append(head + tail)
    return out


def _write_bio(path, titles) -> None:
    lines = []
    for parts in titles:
        for text, tag in parts:
            for k, ch in enumerate(text):
                lines.append(f"{ch} {'O' if tag is None else ('B-' if k == 0 else 'I-') + tag}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def e5():
    import qkv

    return qkv.load("multilingual-e5-small")


@pytest.fixture(scope="module")
def zh_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("zh_bio")
    _write_bio(d / "train.txt", _titles(90, 1))
    _write_bio(d / "dev.txt", _titles(30, 2))
    return read_bio(d / "train.txt"), read_bio(d / "dev.txt")


def test_token_vectors_line_up_with_the_titles_tokens(e5):
    # A SentencePiece model puts a bare "▁" of no width before Chinese text: the vectors must
    # drop it exactly as tokenize_titles does, or training fails on any Chinese title.
    titles = ["途骏新款跑步鞋42码", "Brisko 双肩包 35L", "卡维诺保温杯500ml男士"]
    tts = tokenize_titles(e5, titles)
    vecs = token_vectors(e5, titles, (3,))
    assert any(len(c.ids) != len(t) for c, t in zip(e5.tokenizer.content(titles), tts))  # the case is real
    for t, v in zip(tts, vecs):
        assert v.shape == (len(t), e5.config.hidden_size)
        assert all(t.title[s:e].strip() for s, e in t.offsets)


def test_chinese_bio_trains_and_extracts_exact_spans(e5, zh_data):
    train, dev = zh_data
    model, report = AttributeModel.train(train, e5, layers=(5, 11), max_iter=40)
    assert model.encoder_name == e5.name
    assert report.alignment.not_in_title == 0
    preds = model.extract([ex.title for ex in dev], all_spans=True)
    for ex, found in zip(dev, preds):
        for a in found:
            assert ex.title[a.start:a.end] == a.value  # spans exact to the characters
    s = span_scores(dev, preds)
    assert s.micro.f1 > 0.9, s.as_dict()
    # a title written here, with a brand and a type the model has seen in other positions
    (got,) = model.extract(["透气迈步特登山杖女士"])
    assert {(a.attr, a.value, a.start, a.end) for a in got} >= {("HPPX", "迈步特", 2, 5), ("HCCX", "登山杖", 5, 8)}


def test_saved_chinese_model_round_trips(e5, zh_data, tmp_path):
    train, dev = zh_data
    model, _ = AttributeModel.train(train[:40], e5, layers=(5,), max_iter=20)
    path = model.save(tmp_path / "zh.qkvattr")
    again = AttributeModel.load(path, encoder=e5)
    titles = [ex.title for ex in dev[:10]]
    a, b = model.extract(titles, all_spans=True), again.extract(titles, all_spans=True)
    assert [[(x.attr, x.start, x.end) for x in r] for r in a] == [[(x.attr, x.start, x.end) for x in r] for r in b]
    assert np.allclose([x.confidence for r in a for x in r], [x.confidence for r in b for x in r], atol=1e-3)


def test_chinese_runs_are_cut_into_words(e5):
    (plain,) = tokenize_titles(e5, ["卡维诺双肩包男士防水"])
    (cut,) = tokenize_titles(e5, ["卡维诺双肩包男士防水"], han_words=True)
    assert [plain.title[s:e] for s, e in plain.words] == ["卡维诺双肩包男士防水"]  # one run, one word
    words = [cut.title[s:e] for s, e in cut.words]
    assert "".join(words) == cut.title and len(words) >= 3 and "双肩包" in words
    for (s, e), w in zip(cut.offsets, cut.word_of):  # each token sits in the word its first character is in
        ws, we = cut.words[w]
        assert ws <= s < we
    (mixed,) = tokenize_titles(e5, ["Brisko 双肩包 35L"], han_words=True)
    assert [mixed.title[s:e] for s, e in mixed.words] == ["Brisko", "双肩包", "35L"]  # other words unchanged


def test_character_features_are_the_same_as_strings_and_as_ids(e5, zh_data):
    from qkv.attributes.features import Gazetteer, sparse_features

    train, dev = zh_data
    gaz = Gazetteer.build(train)
    tts = tokenize_titles(e5, [ex.title for ex in train[:20]], han_words=True)
    strings = [sparse_features(t, None, gaz, chars=True) for t in tts]
    vocab = {f: k for k, f in enumerate(sorted({f for fs in strings for row in fs for f in row}))}
    for t, fs in zip(tts, strings):
        ids = sparse_features(t, None, gaz, vocab=vocab, chars=True)
        assert [sorted(set(vocab[f] for f in row)) for row in fs] == [sorted(set(r)) for r in ids]
        first = t.title[t.offsets[0][0]:t.offsets[0][1]].lower()
        assert {"bp=^" + first[0], "c0=" + first[0], "c9=" + first[-1]} <= set(fs[0])
    model, _ = AttributeModel.train(train, e5, layers=(5,), max_iter=40, char_features=True)
    assert model.settings["char_features"] and model.settings["han_words"]
    preds = model.extract([ex.title for ex in dev], all_spans=True)
    assert span_scores(dev, preds).micro.f1 > 0.9
