"""qkv.model.shared_encoder: the one way an encoder nobody handed over is loaded, once per process."""

import threading

import pytest

from qkv.model import DEFAULT_MODEL, shared_encoder


def test_one_encoder_per_model_and_thread_count():
    a = shared_encoder()
    assert a is shared_encoder() and a is shared_encoder("minilm")  # an alias names the same directory
    assert a.name == DEFAULT_MODEL
    two = shared_encoder(threads=2)
    assert two is not a and two.threads == 2 and two is shared_encoder(DEFAULT_MODEL, threads=2)


def test_the_default_thread_count_comes_from_the_threads_module(monkeypatch):
    monkeypatch.setenv("QKV_THREADS", "2")
    assert shared_encoder().threads == 2 and shared_encoder() is shared_encoder(threads=2)
    monkeypatch.setenv("QKV_THREADS", "1")
    assert shared_encoder().threads == 1


def test_threads_asking_at_once_get_one_encoder():
    from qkv.model.shared import forget_shared

    forget_shared()
    got = []
    ts = [threading.Thread(target=lambda: got.append(shared_encoder())) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(got) == 4 and all(g is got[0] for g in got)


def test_every_default_goes_through_it():
    from qkv.summarize.core import default_encoder

    assert default_encoder(["Light and comfy."]) is shared_encoder()  # English: MiniLM, the loader's default
    assert default_encoder(["很轻，很舒服。"]) is shared_encoder("multilingual-e5-small")


def test_an_unknown_model_is_a_clear_error(tmp_path):
    from qkv.errors import ModelError

    with pytest.raises(ModelError, match="cannot find model"):
        shared_encoder(str(tmp_path / "nowhere"))
