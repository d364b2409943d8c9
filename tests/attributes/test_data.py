import json

import pytest

from qkv.attributes import read_bio, read_jsonl, split_dev
from qkv.attributes.data import bio_spans, write_jsonl
from qkv.errors import InputError


def test_read_jsonl_values_and_na(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text(json.dumps({"input": "Zorvex Red Shoes", "category": "Shoes",
                             "target_scores": {"Brand": {"Zorvex": 1}, "Size": {"n/a": 1}}}) + "\n\n", encoding="utf-8")
    (ex,) = read_jsonl(p)
    assert ex.title == "Zorvex Red Shoes" and ex.category == "Shoes"
    assert ex.values == {"Brand": ("Zorvex",), "Size": ()}


def test_malformed_json_names_the_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    good = json.dumps({"input": "a b", "target_scores": {}})
    p.write_text(good + "\n" + good + "\n{\"input\": \"broken\"\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl:3: not valid JSON"):
        read_jsonl(p)


def test_missing_title_field_names_the_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"target_scores": {}}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r":1: needs a string field \"input\""):
        read_jsonl(p)


def test_round_trip_jsonl(tmp_path, synthetic):
    train, _ = synthetic
    write_jsonl(train[:10], tmp_path / "x.jsonl")
    assert read_jsonl(tmp_path / "x.jsonl") == train[:10]


def test_read_bio_spans(tmp_path):
    p = tmp_path / "t.txt"
    rows = [("七", "B-HPPX"), ("雄", "I-HPPX"), ("点", "B-HCCX"), ("卡", "I-HCCX"), ("/", "O"), ("X", "I-XH")]
    p.write_text("\n".join(f"{c} {t}" for c, t in rows) + "\n\n简 O\n约 B-MISC\n", encoding="utf-8")
    a, b = read_bio(p)
    assert a.title == "七雄点卡/X"
    assert [(s.attr, s.start, s.end, s.value) for s in a.spans] == [
        ("HPPX", 0, 2, "七雄"), ("HCCX", 2, 4, "点卡"), ("XH", 5, 6, "X")]  # a stray I- starts a span
    assert b.values == {"MISC": ("约",)}
    for ex in (a, b):
        assert all(ex.title[s.start:s.end] == s.value for s in ex.spans)


def test_read_bio_bad_tag(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("七 B-HPPX\n雄 Q\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"t\.txt:2: tag 'Q'"):
        read_bio(p)


def test_bio_spans_adjacent_b():
    assert [(s.attr, s.value) for s in bio_spans(list("abc"), ["B-X", "B-X", "I-Y"])] == [
        ("X", "a"), ("X", "b"), ("Y", "c")]


def test_split_dev_is_seeded_and_by_title(synthetic):
    train, test = synthetic
    exs = train + test
    a1, d1 = split_dev(exs, 20)
    a2, d2 = split_dev(exs, 20)
    assert d1 == d2 and len(a1) + len(d1) == len(exs)
    assert 0 < len(d1) < len(exs) / 2
    dev_titles = {e.title for e in d1}
    assert not any(e.title in dev_titles for e in a1)  # duplicates of a title stay together


def test_read_bio_space_characters(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("七 B-HPPX\n\u3000 O\n雄 B-XH\n", encoding="utf-8")
    (ex,) = read_bio(p)
    assert ex.title == "七\u3000雄" and [s.value for s in ex.spans] == ["七", "雄"]
