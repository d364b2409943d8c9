"""Input checks shared by every explanation: one clear message per kind of bad input."""

from __future__ import annotations

from qkv.errors import InputError


def check_text(text, what: str = "text") -> str:
    if not isinstance(text, str):
        raise InputError(f"the {what} must be a string, got {type(text).__name__}")
    if not text.strip():
        raise InputError(f"the {what} is empty; give a product title or a sentence to explain, "
                         "e.g. \"Nike Air Max 270 Men's Running Shoes\"")
    return text


def check_layer(enc, layer: int | None, default: int) -> int:
    n = enc.config.num_layers
    if layer is None:
        return default
    if not -n <= layer < n:
        raise InputError(f"layer {layer} is out of range: {enc.name or 'this model'} has {n} layers, "
                         f"numbered 0..{n - 1} (negative numbers count from the end)")
    return layer % n


def check_head(enc, head: int | None, default: int) -> int:
    n = enc.config.num_heads
    if head is None:
        return default
    if not -n <= head < n:
        raise InputError(f"head {head} is out of range: each layer of {enc.name or 'this model'} has {n} heads, "
                         f"numbered 0..{n - 1}")
    return head % n


def tokenize_one(enc, text: str, truncate: bool = False):
    """The text's Tokens, refusing (or, with ``truncate``, cutting) texts over the model's limit."""
    check_text(text)
    n = enc.tokenizer.count([text])[0] + enc.tokenizer.n_special
    limit = enc.config.max_tokens
    if n > limit and not truncate:
        raise InputError(f"the text has {n} tokens, more than {enc.name or 'the model'}'s limit of {limit}; "
                         "attention maps cover one window of the model, so shorten the text or pass "
                         "--truncate (truncate=True) to explain its first "
                         f"{limit} tokens")
    seq = enc.tokenize([text], truncate=truncate)[0]
    if all(seq.special):
        raise InputError(f"the text {text!r} has no tokens the model can read (only invisible or control "
                         "characters); give a product title or a sentence")
    return seq
