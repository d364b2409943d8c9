"""Labelled titles: the JSON-lines format of the attribute data sets and character-level BIO files.

JSON lines (AE-110K, OA-Mine, WDC-PAVE packaging), one offer a line::

    {"input": "<title>", "category": "Shoes", "target_scores": {"Brand": {"Ellie Shoes": 1}, "Size": {"n/a": 1}}}

``"n/a"`` means the attribute is judged absent from the title. BIO files (the Taobao set) hold one
character and its tag a line (``雄 B-HPPX``), titles separated by a blank line; their spans are
known exactly, so they carry ``spans`` as well as values.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from qkv.errors import InputError

NA = "n/a"


@dataclass(frozen=True)
class Span:
    """An attribute value found in a title: ``title[start:end] == value``."""

    attr: str
    start: int
    end: int
    value: str


@dataclass(frozen=True)
class Example:
    """One labelled title. ``values[attr]`` is the tuple of gold values; an empty tuple means the
    attribute was judged absent ("n/a"). ``spans`` is set when the data gives exact positions."""

    title: str
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    category: str | None = None
    spans: tuple[Span, ...] | None = None


def _parse_offer(obj, where: str) -> Example:
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    title = obj.get("input", obj.get("title"))
    if not isinstance(title, str):
        raise InputError(f"{where}: needs a string field \"input\" (the title)")
    category = obj.get("category")
    if category is not None and not isinstance(category, str):
        raise InputError(f"{where}: \"category\" must be a string")
    raw = obj.get("target_scores", {})
    if not isinstance(raw, dict):
        raise InputError(f"{where}: \"target_scores\" must be an object {{attribute: {{value: score}}}}")
    values: dict[str, tuple[str, ...]] = {}
    for attr, vals in raw.items():
        if isinstance(vals, str):  # tolerate {"Brand": "Nike"}
            vals = {vals: 1}
        if not isinstance(vals, dict):
            raise InputError(f"{where}: target_scores[{attr!r}] must be an object {{value: score}}")
        good = tuple(v for v, s in vals.items() if isinstance(v, str) and v != NA and (s is None or s > 0))
        values[str(attr)] = good
    return Example(title=title, values=values, category=category)


def iter_jsonl(path: Path):
    """(line number, object) for each non-blank line of a JSON-lines file; a malformed line raises
    InputError naming the file and line."""
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield no, json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{no}: not valid JSON ({e.msg} at column {e.colno}); "
                                 "each line must be one JSON object") from None


def read_jsonl(path: str | Path) -> list[Example]:
    """Read labelled offers; a malformed line raises InputError naming the file and line number."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such file: {path}")
    out = [_parse_offer(obj, f"{path}:{no}") for no, obj in iter_jsonl(path)]
    if not out:
        raise InputError(f"{path} holds no labelled offers")
    return out


def write_jsonl(examples, path: str | Path) -> None:
    """Write examples in the JSON-lines format (absent attributes as {"n/a": 1})."""
    with open(path, "w", encoding="utf-8") as f:
        for ex in examples:
            ts = {a: ({v: 1 for v in vs} if vs else {NA: 1}) for a, vs in ex.values.items()}
            obj = {"input": ex.title, "target_scores": ts}
            if ex.category is not None:
                obj["category"] = ex.category
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")


def bio_spans(chars: list[str], tags: list[str], where: str = "") -> list[Span]:
    """Spans of a character-level BIO sequence. An I- tag without a B- before it starts a span
    (the usual lenient reading)."""
    title = "".join(chars)
    pos, starts = 0, []
    for c in chars:
        starts.append(pos)
        pos += len(c)
    spans: list[Span] = []
    cur: tuple[str, int] | None = None
    end = 0
    for i, tag in enumerate(tags + ["O"]):
        if tag != "O" and not tag.startswith(("B-", "I-")):
            raise InputError(f"{where}: tag {tag!r} is not O, B-X or I-X")
        label = tag[2:] if tag != "O" else None
        if cur is not None and (tag == "O" or tag.startswith("B-") or label != cur[0]):
            spans.append(Span(cur[0], cur[1], end, title[cur[1]:end]))
            cur = None
        if label is not None and cur is None:
            cur = (label, starts[i])
        if i < len(chars):
            end = starts[i] + len(chars[i])
    return spans


def read_bio(path: str | Path) -> list[Example]:
    """Read a character-per-line BIO file (``char TAG``, blank line between titles)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such file: {path}")
    out: list[Example] = []
    chars: list[str] = []
    tags: list[str] = []
    first = 1

    def flush(no: int):
        if chars:
            spans = bio_spans(chars, tags, f"{path}:{first}-{no}")
            values: dict[str, list[str]] = {}
            for s in spans:
                values.setdefault(s.attr, []).append(s.value)
            out.append(Example("".join(chars), {a: tuple(v) for a, v in values.items()}, None, tuple(spans)))
        chars.clear()
        tags.clear()

    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                flush(no)
                first = no + 1
                continue
            # the character itself may be a space or an ideographic space: split on the last ASCII blank
            m = re.match(r"^(.+?)[ \t]+(\S+)$", line)
            if m is None:
                raise InputError(f"{path}:{no}: expected 'CHARACTER TAG', got {line!r}")
            ch, tag = m.group(1), m.group(2)
            if tag != "O" and not tag.startswith(("B-", "I-")):
                raise InputError(f"{path}:{no}: tag {tag!r} is not O, B-X or I-X")
            chars.append(ch)
            tags.append(tag)
        flush(no if out or chars else 0)
    if not out:
        raise InputError(f"{path} holds no titles")
    return out


def read_examples(path: str | Path) -> list[Example]:
    """JSON lines by default; ``.txt``/``.bio`` files as character BIO."""
    p = Path(path)
    return read_bio(p) if p.suffix in (".txt", ".bio", ".conll") else read_jsonl(p)


def is_dev(title: str, percent: int = 20, seed: str = "qkv") -> bool:
    """Seeded hash split: a title goes to dev when sha1(seed + title) mod 100 < percent.
    Duplicate titles land on the same side."""
    h = int.from_bytes(hashlib.sha1((seed + "\0" + title).encode("utf-8")).digest()[:8], "big")
    return h % 100 < percent


def split_dev(examples, percent: int = 20, seed: str = "qkv") -> tuple[list[Example], list[Example]]:
    """(train, dev) by ``is_dev``."""
    train, dev = [], []
    for ex in examples:
        (dev if is_dev(ex.title, percent, seed) else train).append(ex)
    return train, dev
