import json

import pytest

from qkv.errors import InputError
from qkv.summarize.readers import read_reviews


def test_plain_lines_and_blocks(tmp_path):
    f = tmp_path / "r.txt"
    f.write_text("Great shoes.\nToo small for me.\n\n", encoding="utf-8")
    (p,) = read_reviews(f)
    assert p.texts == ["Great shoes.", "Too small for me."]
    f.write_text("Great shoes.\nVery light.\n\nToo small.\nReturned them.\n", encoding="utf-8")
    (p,) = read_reviews(f)
    assert p.texts == ["Great shoes.\nVery light.", "Too small.\nReturned them."]


def test_csv_columns_ratings_and_groups(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("sku,body,stars\nA1,\"Nice, light shoe.\",5\nA1,Fell apart.,1\nB2,Good kettle.,4\nB2,,3\n",
                 encoding="utf-8")
    (p,) = read_reviews(f)
    assert p.texts == ["Nice, light shoe.", "Fell apart.", "Good kettle."] and p.ratings == [5, 1, 4]
    groups = read_reviews(f, group_column="sku")
    assert [(g.id, len(g.reviews)) for g in groups] == [("A1", 2), ("B2", 1)]
    with pytest.raises(InputError, match="no review column 'review_text'; its columns are: sku, body, stars"):
        read_reviews(f, column="review_text")


def test_csv_without_any_review_column(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("sku,price\nA1,3\n", encoding="utf-8")
    with pytest.raises(InputError, match="no review column .* --column"):
        read_reviews(f)


def test_chinese_csv_with_label(tmp_path):
    f = tmp_path / "zh.csv"
    f.write_text("cat,label,review\n手机,1,质量很好。\n手机,0,电池太差了。\n", encoding="utf-8")
    (p,) = read_reviews(f)
    assert p.texts == ["质量很好。", "电池太差了。"] and p.ratings == [1, 0] and p.scale == (0.0, 1.0)


def test_json_lines(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text("\n".join(json.dumps({"text": t, "rating": r}) for t, r in [("Good.", 5), ("Bad.", 1)]),
                 encoding="utf-8")
    (p,) = read_reviews(f)
    assert p.texts == ["Good.", "Bad."] and p.ratings == [5, 1]
    f.write_text('{"text": "ok"}\n{not json\n', encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        read_reviews(f)


def test_fewsum_layout(tmp_path):
    f = tmp_path / "few.csv"
    head = ["cat", "group_id"] + [f"rev{i}" for i in range(1, 4)] + [f"summ{i}" for i in range(1, 3)] + \
        [f"rating{i}" for i in range(1, 4)]
    row = ["shoes", "P1", "Light shoe.", "Too narrow.", "Comfy.", "A light shoe.", "Light but narrow.", "5", "2", "4"]
    f.write_text("\t".join(head) + "\n" + "\t".join(row) + "\n", encoding="utf-8")
    (p,) = read_reviews(f)
    assert p.id == "P1" and p.category == "shoes" and p.references == ("A light shoe.", "Light but narrow.")
    assert p.texts == ["Light shoe.", "Too narrow.", "Comfy."] and p.ratings == [5, 2, 4]


def test_bad_files(tmp_path):
    b = tmp_path / "img.txt"
    b.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(InputError, match="looks binary"):
        read_reviews(b)
    u = tmp_path / "latin.txt"
    u.write_bytes("Très bien, très confortable.\n".encode("latin-1"))
    with pytest.raises(InputError, match="not valid utf-8 text .*--encoding"):
        read_reviews(u)
    assert read_reviews(u, encoding="latin-1")[0].texts == ["Très bien, très confortable."]
    e = tmp_path / "empty.txt"
    e.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no reviews"):
        read_reviews(e)
    with pytest.raises(InputError, match="no such file"):
        read_reviews(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="folder"):
        read_reviews(tmp_path)


def test_escaped_quotes_inside_a_quoted_field_are_kept(tmp_path):
    # The header has no quotes, so a sniffed dialect would guess doublequote=False and cut the
    # field at the first "" (as 75 hotel reviews of the Chinese shopping set were).
    p = tmp_path / "q.csv"
    p.write_text('cat,label,review\n酒店,1,"问司机这家酒店怎么样"",老酒店,人气旺."" 服务很好"\n'
                 '酒店,0,"He said ""great"", it was not. Room was dirty."\n', encoding="utf-8")
    (prod,) = read_reviews(p, rating_column="label", group_column="cat")
    assert [r.text for r in prod.reviews] == ['问司机这家酒店怎么样",老酒店,人气旺." 服务很好',
                                             'He said "great", it was not. Room was dirty.']
    assert [r.rating for r in prod.reviews] == [1.0, 0.0]


def test_grouped_json_with_references_and_labels(tmp_path):
    f = tmp_path / "dev.jsonl"
    rows = [{"id": "热水器-0", "category": "热水器", "reviews": ["加热很快。", "漏水了。"], "labels": [1, 0],
             "references": ["加热快，但有人说漏水。", "多数人满意。"]},
            {"id": "x", "reviews": ["好。"], "references": "一条。"}]
    f.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    a, b = read_reviews(f)
    assert a.id == "热水器-0" and a.texts == ["加热很快。", "漏水了。"] and a.ratings == [1, 0]
    assert a.references == ("加热快，但有人说漏水。", "多数人满意。") and a.category == "热水器"
    assert b.references == ("一条。",) and b.ratings == [None]
    f.write_text(json.dumps({"reviews": ["a", "b"], "labels": [1]}), encoding="utf-8")
    with pytest.raises(InputError, match="same length"):
        read_reviews(f)
