"""Small review texts written for these tests, and a fast stand-in encoder for property tests.
Nothing here reads ../shared."""

import hashlib

import numpy as np
import pytest

SHOE_REVIEWS = [
    "These running shoes are very comfortable and light. The sole is thick and soft. I wore them for a marathon.",
    "Comfortable shoes, true to size. The laces come undone often, which is annoying.",
    "Very light and comfortable for long runs! The colour faded after a month of use.",
    "Great value for the price. Comfortable from the first day and the fit is true to size.",
    "The shoes fell apart after two weeks. The sole came off and the stitching broke.",
    "Poor quality: the sole came off after a few runs. Would not buy again.",
]
SHOE_RATINGS = [5, 4, 4, 5, 1, 2]

ZH_REVIEWS = [
    "质量很好，穿着很舒服。物流也很快！包装完好。",
    "鞋子很轻，跑步很舒服。尺码标准，推荐购买。",
    "穿了两周鞋底就开胶了；质量太差。不会再买了……",
]


class HashEncoder:
    """Deterministic pseudo-embeddings from a hash of each word, so that texts sharing words are
    similar. Borrows the real encoder's tokenizer and weights for token counts and static vectors."""

    def __init__(self, real):
        self._real = real
        self.dim = 64
        self.tokenizer = real.tokenizer
        self.weights = real.weights
        self.name = "hash"

    def encode(self, texts, **kw):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                h = int(hashlib.md5(w.encode()).hexdigest()[:8], 16)
                out[i] += np.random.default_rng(h).standard_normal(self.dim).astype(np.float32)
        out += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="session")
def hash_encoder(encoder):
    return HashEncoder(encoder)
