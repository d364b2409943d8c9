"""/api/attributes with a small model trained on the sample catalog."""

from __future__ import annotations

import pytest

TITLES = ["Northpeak Women's Waterproof Hiking Boots with Ankle Support - Black, US 8",
          "Velora 男士透气网面跑鞋 轻便运动鞋 橄榄绿 US 9",
          "a plain sentence without any product in it"]


def test_attributes_are_the_models_and_spans_point_into_the_title(client, sample_attributes, encoder):
    assert sample_attributes is not None, "qkv.attributes cannot be imported: the attributes view has no model"
    from qkv.attributes import AttributeModel

    r = client.post("/api/attributes", json={"titles": TITLES})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body["attributes"]) == {"brand", "colour", "size", "material"}
    assert body["demo"]["titles"] == 40  # the fixture's demo model: the page says it is one
    want = AttributeModel.load(sample_attributes, encoder=encoder).extract(TITLES)
    assert len(body["results"]) == 3
    for res, w, title in zip(body["results"], want, TITLES):
        assert res["title"] == title
        assert [(a["attr"], a["value"], a["start"], a["end"]) for a in res["attributes"]] == \
               [(a.attr, a.value, a.start, a.end) for a in w]
        for a in res["attributes"]:
            assert title[a["start"]:a["end"]] == a["value"]
        assert [a["confidence"] for a in res["attributes"]] == [round(a.confidence, 4) for a in w]
    first = {a["attr"]: a["value"] for a in body["results"][0]["attributes"]}
    assert first.get("brand") == "Northpeak" and first.get("size") == "US 8"


@pytest.mark.parametrize("payload, status, words", [
    ({"titles": []}, 422, "titles"),
    ({"titles": ["", "  "]}, 422, "empty"),
    ({"titles": "one title"}, 422, "titles"),
    ({"titles": [1, 2]}, 422, "titles"),
    ({"titles": ["x"], "min_confidence": 2}, 422, "min_confidence"),
    ({"titles": ["x"], "categories": ["a", "b"]}, 422, "categories"),
    ({"titles": ["x"] * 201}, 413, "200 items"),
    ({"titles": ["x" * 501]}, 413, "500 characters"),
])
def test_attributes_refuse_bad_input(client, payload, status, words):
    r = client.post("/api/attributes", json=payload)
    assert r.status_code == status, r.text
    assert words in r.json()["error"]


def test_without_a_model_the_view_says_how_to_get_one(encoder):
    from fastapi.testclient import TestClient

    from qkv.web import create_app

    with TestClient(create_app(encoder=encoder)) as c:
        assert c.get("/api/health").json()["features"]["attributes"] is False
        r = c.post("/api/attributes", json={"titles": ["Nike shoes"]})
        assert r.status_code == 503 and "--attributes" in r.json()["error"]


def test_a_file_that_is_not_a_model_is_a_clear_503(encoder, tmp_path):
    from fastapi.testclient import TestClient

    from qkv.web import create_app

    bad = tmp_path / "bad.qkvattr"
    bad.write_bytes(b"not a model")
    with TestClient(create_app(encoder=encoder, attributes_model=bad)) as c:
        r = c.post("/api/attributes", json={"titles": ["Nike shoes"]})
        assert r.status_code == 503 and "not a qkv attribute model" in r.json()["error"]
