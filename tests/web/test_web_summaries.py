"""/api/summarize and /api/summarize/upload."""

from __future__ import annotations

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
    ("r.txt", "caf\xe9".encode("latin-1"), 422, "UTF-8"),
    ("r.txt", b"a" * 600_000, 413, "upload limit"),
    ("r.txt", b"\n\n  \n", 422, "no reviews"),
    ("r.jsonl", b"{broken", 422, "JSON"),
])
def test_upload_refuses_bad_files(client, name, data, status, words):
    r = client.post("/api/summarize/upload", files={"file": (name, data)}, data={"budget": "20"})
    assert r.status_code == status, r.text
    assert words in r.json()["error"]


def test_upload_needs_a_file_and_never_takes_a_path(client):
    r = client.post("/api/summarize/upload", data={"budget": "20", "file": "/etc/passwd"})
    assert r.status_code == 422
    assert "root:" not in r.text


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
