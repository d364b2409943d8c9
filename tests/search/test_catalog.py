import json

import pytest

from qkv.search.catalog import CatalogError, read_catalog


def test_csv_detects_columns_and_numbers(sample_catalog):
    cat = read_catalog(sample_catalog)
    assert (cat.id_column, cat.title_column) == ("id", "title")
    assert cat.fields["price"] == "number" and cat.fields["brand"] == "text"
    assert len(cat.rows) == cat.read > 200
    assert isinstance(cat.rows[0]["price"], float)
    assert any(r["language"] == "zh" for r in cat.rows)


def test_tsv_jsonl_parquet_read_the_same(tmp_path):
    rows = [{"sku": "a1", "name": "Red mug", "price": "3.5"}, {"sku": "a2", "name": "Blue mug", "price": "4"}]
    (tmp_path / "c.tsv").write_text("sku\tname\tprice\n" + "".join(f"{r['sku']}\t{r['name']}\t{r['price']}\n" for r in rows))
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "c.parquet")
    for name in ("c.tsv", "c.jsonl", "c.parquet"):
        cat = read_catalog(tmp_path / name)
        assert [(r["id"], r["title"], r["price"]) for r in cat.rows] == [("a1", "Red mug", 3.5), ("a2", "Blue mug", 4.0)], name


def test_beir_corpus_is_read_as_is(tmp_path):
    p = tmp_path / "corpus.jsonl"
    p.write_text('{"_id": "d1", "title": "Angle bracket", "text": ""}\n{"_id": "d2", "title": "Hole saw", "text": "x"}\n')
    cat = read_catalog(p)
    assert (cat.id_column, cat.title_column) == ("_id", "title")
    assert [r["id"] for r in cat.rows] == ["d1", "d2"] and cat.rows[1]["text"] == "x"


def test_missing_title_column_lists_columns(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("id,label,cost\n1,Mug,3\n")
    with pytest.raises(CatalogError, match="columns found: id, label, cost"):
        read_catalog(p)
    assert read_catalog(p, title_column="label").rows[0]["title"] == "Mug"


def test_ambiguous_id_column_lists_candidates(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("id,sku,title\n1,s1,Mug\n")
    with pytest.raises(CatalogError, match="ambiguous id column: id, sku"):
        read_catalog(p)
    with pytest.raises(CatalogError, match="no column 'nope'"):
        read_catalog(p, id_column="nope")


def test_duplicates_last_wins_and_empty_titles_skipped(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("id,title,price\n1,Old mug,3\n2,,4\n3,Plate,5\n1,New mug,6\n,No id,1\n")
    cat = read_catalog(p)
    assert cat.duplicates == 1 and cat.empty_titles == 1 and cat.missing_ids == 1
    assert {r["id"]: r["title"] for r in cat.rows} == {"1": "New mug", "3": "Plate"}


def test_undecodable_bytes_are_replaced_and_counted(tmp_path):
    p = tmp_path / "c.csv"
    p.write_bytes(b"id,title\n1,Caf\xe9 mug\n2,Plain \xff\xfe plate\n3,\xe7\x83\xad tea\n")
    cat = read_catalog(p)
    assert cat.replaced_bytes == 3
    assert cat.rows[0]["title"] == "Caf\ufffd mug" and cat.rows[2]["title"] == "热 tea"


def test_unknown_extension_and_bad_json(tmp_path):
    (tmp_path / "c.xlsx").write_text("x")
    with pytest.raises(CatalogError, match="--format"):
        read_catalog(tmp_path / "c.xlsx")
    (tmp_path / "b.jsonl").write_text('{"id": 1, "title": "a"}\nnot json\n')
    with pytest.raises(CatalogError, match="b.jsonl:2"):
        read_catalog(tmp_path / "b.jsonl")


@pytest.mark.parametrize("text, line", [
    ('id,title\n1,"unterminated\n2,ok\n', 2),  # never closes: the user had two products, not one
    ('id,title\n1,Mug\n2,"Plate\n3,Bowl\n4,"Cup",x\n', 3),  # closes inside a later row
])
def test_a_quoted_field_running_into_the_rows_after_it_is_a_bad_row(tmp_path, text, line):
    p = tmp_path / "c.csv"
    p.write_text(text)
    with pytest.raises(CatalogError, match=rf"c.csv:{line}: a quoted field .*does not close"):
        read_catalog(p)


def test_quoted_fields_with_line_breaks_and_loose_quotes_still_read(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text('id,title,notes\n1,"Mug, large","two\nlines"\n2,5" plate,\n\n3,"Say ""hi""",x\n')
    cat = read_catalog(p)
    assert [(r["id"], r["title"]) for r in cat.rows] == [("1", "Mug, large"), ("2", '5" plate'), ("3", 'Say "hi"')]
    assert cat.rows[0]["notes"] == "two\nlines" and cat.read == 3
