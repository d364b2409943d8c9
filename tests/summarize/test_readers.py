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
    with pytest.raises(InputError, match="not valid ascii text .*--encoding"):
        read_reviews(u, encoding="ascii")
    assert read_reviews(u, encoding="latin-1")[0].texts == ["Très bien, très confortable."]
    assert read_reviews(u)[0].texts == ["Très bien, très confortable."]  # not UTF-8: its encoding found
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


@pytest.mark.parametrize("name, data, words", [
    ("deep.json", "[" * 200_000, "nested"),
    ("deep.jsonl", '{"review": ' + "[" * 100_000 + "}\n", "nested"),
    ("huge.jsonl", '{"review": "fine", "rating": ' + "9" * 5_000 + "}\n", "rating"),
    ("big.jsonl", '{"review": "fine", "rating": ' + "9" * 400 + "}\n", "rating"),
    ("nan.jsonl", '{"review": "fine", "rating": NaN}\n', "rating"),
    ("inf.csv", "review,rating\nfine," + "9" * 400 + "\n", "rating"),
    ("infinity.csv", "review,rating\nfine,-Infinity\n", "rating"),
    ("far.csv", "review,rating\nfine,1e308\nbad,1\n", "rating"),
    ("fewsum.jsonl", '{"rev1": 5, "summ1": "s"}\n', "rev1"),
    ("fewsum.tsv", "rev1\tsumm1\trating1\ngood\ts\tNaN\n", "rating"),
])
def test_bad_values_are_input_errors_not_crashes(tmp_path, name, data, words):
    """Whatever a file holds, reading it either works or raises InputError saying what is wrong."""
    f = tmp_path / name
    f.write_text(data, encoding="utf-8")
    with pytest.raises(InputError, match=words):
        read_reviews(f)


def test_ratings_on_common_scales_are_read(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("review,rating\ngood,100\nbad,-1\nok,7.5\n", encoding="utf-8")
    assert read_reviews(f)[0].ratings == [100.0, -1.0, 7.5]


ZH_REVIEWS = "用户名,评论内容,评分\n张三,这双鞋穿着很舒服，尺码标准。,5\n李四,颜色和图片不一样，有点失望。,2\n"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "gbk", "gb18030"])
def test_a_chinese_shops_csv_in_the_encoding_excel_saves(tmp_path, encoding):
    """评论内容 and 评分 are recognised as the review and rating columns; a GBK/GB18030 file (Excel
    on Chinese Windows) is read in its own encoding, found by charset-normalizer and the GB rule."""
    f = tmp_path / "评论.csv"
    f.write_bytes(ZH_REVIEWS.encode(encoding))
    (p,) = read_reviews(f)
    assert p.texts == ["这双鞋穿着很舒服，尺码标准。", "颜色和图片不一样，有点失望。"] and p.ratings == [5, 2]


@pytest.mark.parametrize("text, encoding", [
    ("评论,星级\n很好,5\n", "gbk"),  # two short rows: the detector ranks Korean and Japanese level with GB18030
    ("評論,星級\n這雙鞋穿起來很舒服，尺碼標準。,5\n顏色和圖片不一樣，有點失望。,2\n", "big5"),
    ("review,rating\nTrès bien, café crème,5\n", "cp1252"),  # read as GB18030 it would be "Tr鑣"
    ("отзыв,оценка\nОчень удобные кроссовки, рекомендую.,5\n", "cp1251"),
])
def test_the_encoding_of_a_short_file_is_told_right(text, encoding):
    from qkv.summarize.readers import decode

    assert decode(text.encode(encoding)) == text


@pytest.mark.parametrize("header, review, rating", [
    ("评论,星级", "评论", "星级"), ("内容,打分", "内容", "打分"), ("Review Text,Stars", "Review Text", "Stars"),
    ("comments,star_rating", "comments", "star_rating"), ("评价内容,分数", "评价内容", "分数"),
])
def test_common_review_and_rating_column_names(header, review, rating):
    from qkv.summarize.readers import parse_table

    (p,) = parse_table(f"id,{header}\n1,好用,4\n")
    assert p.texts == ["好用"] and p.ratings == [4]


def test_a_file_without_a_review_column_names_its_columns():
    from qkv.summarize.readers import MissingColumn, parse_table

    with pytest.raises(MissingColumn) as e:
        parse_table("sku,备注,价格\nA1,很好,3\n")
    assert e.value.columns == ["sku", "备注", "价格"]
    assert parse_table("sku,备注,价格\nA1,很好,3\n", column="备注")[0].texts == ["很好"]


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
