"""/api/summarize and /api/summarize/upload."""

from __future__ import annotations

import json

import pytest

REVIEWS = ["These shoes are very comfortable and light. I wear them all day at work.",
           "The sizing runs small, order half a size up. Otherwise great shoes.",
           "Comfortable from day one, and the cushioning is excellent for running.",
           "Color faded after a few washes, which was disappointing."]


def test_summary_is_the_apis_summary(client, encoder):
    from qkv.summarize import summarize

    r = client.post("/api/summarize", json={"reviews": REVIEWS, "budget": 25})
    assert r.status_code == 200, r.text
    body = r.json()
    want = summarize(REVIEWS, budget=25, encoder=encoder)
    assert body["text"] == want.text
    assert body["tokens_after"] == want.tokens_after <= 25
    assert body["tokens_saved"] == want.tokens_before - want.tokens_after > 0
    assert [s["text"] for s in body["sentences"]] == [s.text for s in want.sentences]
    for s in body["sentences"]:
        assert REVIEWS[s["review"]][s["start"]:s["end"]] == s["text"]


def test_upload_csv_with_ratings(client):
    csv = "review,rating\n" + "\n".join(f'"{r}",{5 - i}' for i, r in enumerate(REVIEWS)) + "\n"
    r = client.post("/api/summarize/upload", files={"file": ("reviews.csv", csv.encode(), "text/csv")},
                    data={"budget": "30"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["reviews"] == REVIEWS and body["n_reviews"] == 4
    assert body["tokens_after"] <= 30
    assert all(s["rating"] is not None for s in body["sentences"])


def test_upload_plain_text_one_review_per_line(client):
    r = client.post("/api/summarize/upload", files={"file": ("r.txt", "\n".join(REVIEWS).encode())},
                    data={"budget": "20", "order": "score"})
    assert r.status_code == 200 and r.json()["n_reviews"] == 4 and r.json()["order"] == "score"


@pytest.mark.parametrize("payload, status, words", [
    ({"reviews": []}, 422, "reviews"),
    ({"reviews": ["", " "]}, 422, "empty"),
    ({"reviews": REVIEWS, "budget": 0}, 422, "budget"),
    ({"reviews": REVIEWS, "budget": 2001}, 422, "budget"),
    ({"reviews": REVIEWS, "tokenizer": "gpt2"}, 422, "tokenizer"),
    ({"reviews": REVIEWS, "ratings": [5]}, 422, "one per review"),
    ({"reviews": "one string"}, 422, "reviews"),
    ({"reviews": ["x"] * 501}, 413, "500 items"),
    ({"reviews": ["x" * 5001]}, 413, "5000 characters"),
])
def test_summarize_refuses_bad_input(client, payload, status, words):
    r = client.post("/api/summarize", json=payload)
    assert r.status_code == status, r.text
    assert words in r.json()["error"]


@pytest.mark.parametrize("name, data, status, words", [
    ("r.txt", b"\x00\x01\x02binary", 422, "binary"),
    ("r.txt", b"a" * 600_000, 413, "upload limit"),
    ("r.txt", b"\n\n  \n", 422, "no reviews"),
    ("r.jsonl", b"{broken", 422, "JSON"),
])
def test_upload_refuses_bad_files(client, name, data, status, words):
    r = client.post("/api/summarize/upload", files={"file": (name, data)}, data={"budget": "20"})
    assert r.status_code == status, r.text
    assert words in r.json()["error"]


def test_upload_a_chinese_shops_gbk_csv(client):
    """What Excel on Chinese Windows saves: GBK, with 评论内容/评分 as the column names."""
    csv = "用户名,评论内容,评分\n张三,这双鞋穿着很舒服，尺码标准。,5\n李四,颜色和图片不一样，有点失望。,2\n"
    r = client.post("/api/summarize/upload", files={"file": ("评论.csv", csv.encode("gbk"), "text/csv")},
                    data={"budget": "40"})
    assert r.status_code == 200, r.text
    assert r.json()["reviews"] == ["这双鞋穿着很舒服，尺码标准。", "颜色和图片不一样，有点失望。"]
    assert [s["rating"] for s in r.json()["sentences"]] and all(s["rating"] in (5, 2) for s in r.json()["sentences"])


def test_upload_with_an_unknown_review_column_offers_the_columns(client):
    csv = "sku,备注,价格\nA1,很好用，推荐。,3\nA2,太小了。,4\n".encode()
    r = client.post("/api/summarize/upload", files={"file": ("r.csv", csv)}, data={"budget": "20"})
    assert r.status_code == 422 and r.json()["columns"] == ["sku", "备注", "价格"]
    assert "choose which column" in r.json()["error"] and "--column" not in r.json()["error"]
    r = client.post("/api/summarize/upload", files={"file": ("r.csv", csv)}, data={"budget": "20", "column": "备注"})
    assert r.status_code == 200, r.text
    assert r.json()["reviews"] == ["很好用，推荐。", "太小了。"]


def test_upload_needs_a_file_and_never_takes_a_path(client):
    r = client.post("/api/summarize/upload", data={"budget": "20", "file": "/etc/passwd"})
    assert r.status_code == 422
    assert "root:" not in r.text


@pytest.mark.parametrize("name, data, words", [
    ("deep.json", b"[" * 200_000, "nested too deeply"),
    ("deep.jsonl", b'{"review": ' + b"[" * 100_000 + b"}\n", "nested too deeply"),
    ("huge.jsonl", b'{"review": "fine shoe", "rating": ' + b"9" * 5_000 + b"}\n", "rating"),
    ("nan.jsonl", b'{"review": "fine shoe", "rating": NaN}\n', "rating"),
    ("far.csv", b"review,rating\nfine shoe,1e308\nbad shoe,1\n", "rating"),
    ("fewsum.jsonl", b'{"rev1": 5, "summ1": "s"}\n', "rev1"),
])
def test_bad_upload_files_are_4xx_with_a_message(client, name, data, words):
    r = client.post("/api/summarize/upload", files={"file": (name, data)}, data={"budget": "20"})
    assert r.status_code == 422, r.text
    assert words in r.json()["error"]
    assert client.get("/api/health").status_code == 200


@pytest.mark.parametrize("ratings", [["NaN", 1], ["Infinity", 1], [1e308, 1], [-1e308, 1], [101, 1]])
def test_pasted_ratings_must_be_finite_and_on_a_scale(client, ratings):
    body = json.dumps({"reviews": REVIEWS[:2], "ratings": ratings}).replace('"NaN"', "NaN").replace(
        '"Infinity"', "Infinity")
    r = client.post("/api/summarize", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert "ratings" in r.json()["error"]


def test_the_web_rating_limit_is_the_readers():
    from qkv.summarize.readers import MAX_RATING
    from qkv.web.limits import Limits

    assert Limits().max_rating == MAX_RATING


def test_errors_name_the_api_fields_not_the_cli_options(client):
    r = client.post("/api/summarize/upload", files={"file": ("r.csv", b"id,words\n1,light shoe\n")}, data={"budget": "20"})
    assert r.status_code == 422 and '"column"' in r.json()["error"] and "--column" not in r.json()["error"]
    r = client.post("/api/summarize/upload", files={"file": ("r.csv", b"id,words\n1,light shoe\n")},
                    data={"budget": "20", "column": "words"})
    assert r.status_code == 200 and r.json()["reviews"] == ["light shoe"]
    long = ["This remarkably comfortable and lightweight running shoe fits perfectly every single day."]
    r = client.post("/api/summarize", json={"reviews": long, "budget": 3})
    assert r.status_code == 422 and "allow_cut" in r.json()["error"] and "--allow-cut" not in r.json()["error"]
    r = client.post("/api/summarize", json={"reviews": long, "budget": 3, "allow_cut": True})
    assert r.status_code == 200 and 0 < r.json()["tokens_after"] <= 3


def test_an_upload_is_parsed_in_the_summary_pool_not_on_the_event_loop(client, monkeypatch):
    """Decoding and reading a file (csv.Sniffer took 0.43 s on an 8 KB header line) happen in the
    summary pool's thread, behind its queue limit, never in the event loop's."""
    import threading

    import qkv.summarize.readers as readers

    seen = []
    real = readers.parse_table

    def recording(*a, **k):
        seen.append(threading.current_thread().name)
        return real(*a, **k)

    monkeypatch.setattr(readers, "parse_table", recording)
    r = client.post("/api/summarize/upload", files={"file": ("r.csv", "review\n" + "\n".join(REVIEWS))},
                    data={"budget": "20"})
    assert r.status_code == 200, r.text
    assert seen and all(name.startswith("qkv-summary") for name in seen)


def test_the_csv_sniffer_reads_at_most_a_bounded_first_line(monkeypatch):
    import csv

    from qkv.summarize.readers import SNIFF_CHARS, parse_table

    sniffed = []
    real = csv.Sniffer.sniff

    def recording(self, sample, delimiters=None):
        sniffed.append(len(sample))
        return real(self, sample, delimiters)

    monkeypatch.setattr(csv.Sniffer, "sniff", recording)
    header = "review," + ",".join(f"c{i}" for i in range(2000))  # a header line of ~10 KB
    (p,) = parse_table(header + "\n" + "good shoe" + "," * 2000 + "\n")
    assert p.texts == ["good shoe"]
    assert sniffed and max(sniffed) <= SNIFF_CHARS + 1


def test_summary_response_counts_what_several_reviewers_say(client, encoder):
    from qkv.summarize import summarize

    reviews = ["Very comfortable shoes.", "Very comfortable shoes.", "Comfortable shoes, very light.",
               "The sole came off after a week.", "Nice colour."]
    ratings = [5, 5, 5, 1, 4]
    r = client.post("/api/summarize", json={"reviews": reviews, "ratings": ratings, "budget": 30})
    assert r.status_code == 200, r.text
    points = r.json()["points"]
    want = summarize(reviews, budget=30, encoder=encoder, ratings=ratings, points=True)
    assert points == {side: [p.to_dict() for p in ps] for side, ps in want.points.items()}
    assert set(points) == {"praise", "complaints"} and points["complaints"] == []  # one review only
    top = points["praise"][0]
    assert top["count"] == len(top["reviews"]) >= 2 and {0, 1} <= set(top["reviews"])
