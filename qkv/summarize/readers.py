"""Reading reviews from files: plain text, CSV/TSV, JSON lines, and the FewSum layout.

- plain text: one review per line, or, when the file has blank lines, one review per block of
  lines separated by blank lines;
- CSV/TSV (delimiter sniffed): a review column (``--column``, else the first of review, text,
  content, body, comment, reviewText), an optional rating column (rating, stars, score, overall,
  or a 0/1 ``label``) and an optional grouping column that makes one product per value;
- JSON lines (or one JSON array) of objects with the same columns;
- FewSum (Bražinskas et al. 2020): tab-separated, one product a row with ``rev1..rev8``,
  ``summ1..summ3`` (reference summaries) and ``rating1..rating8``.

Everything becomes a list of :class:`Product`; a plain review list is one product called "all".
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from qkv.errors import InputError

REVIEW_COLUMNS = ("review", "text", "content", "body", "comment", "reviewtext", "review_text", "review_body")
RATING_COLUMNS = ("rating", "stars", "score", "overall", "star_rating", "label")
# Ratings are stars, labels or scores (1-5, 0/1, 0-10, 0-100): one far outside would set the scale
# every other review is read on (rating_scale), so it is refused, as NaN and infinity are.
MAX_RATING = 100.0
SNIFF_CHARS = 1_000  # of the header line, to guess a CSV's delimiter from


@dataclass(frozen=True)
class Review:
    """One review; ``rating`` on the file's own scale (1-5 stars, or a 0/1 label) or None."""

    text: str
    rating: float | None = None


@dataclass(frozen=True)
class Product:
    """The reviews of one product, with reference summaries when the data has them."""

    id: str
    reviews: tuple[Review, ...]
    references: tuple[str, ...] = ()
    category: str = ""
    scale: tuple[float, float] | None = field(default=None, compare=False)  # (worst, best) rating

    @property
    def texts(self) -> list[str]:
        return [r.text for r in self.reviews]

    @property
    def ratings(self) -> list[float | None]:
        return [r.rating for r in self.reviews]


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """A file's text, refusing binary files and naming the place where decoding fails."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path} is a folder; give a file of reviews")
    data = path.read_bytes()
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{path} looks binary (it has NUL bytes), not a text file of reviews")
    try:
        return data.decode("utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding)
    except UnicodeDecodeError as e:
        raise InputError(f"{path} is not valid {encoding} text (byte {e.start}: {data[e.start:e.start + 4]!r}); "
                         f"pass the right --encoding (e.g. gb18030, latin-1)") from None
    except LookupError:
        raise InputError(f"unknown encoding {encoding!r}") from None


def _pick(columns: list[str], wanted: str | None, choices: tuple[str, ...], what: str, path) -> str | None:
    lower = {c.lower().strip(): c for c in columns}
    if wanted is not None:
        if wanted in columns:
            return wanted
        if wanted.lower() in lower:
            return lower[wanted.lower()]
        raise InputError(f"{path} has no {what} column {wanted!r}; its columns are: {', '.join(columns)}")
    for c in choices:
        if c in lower:
            return lower[c]
    return None


def _rating(value, path, row: int) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        r = float(value)
    except OverflowError:  # an int beyond float's range
        r = math.inf
    except (TypeError, ValueError):
        raise InputError(f"{path}: row {row} has rating {_short(value)}, not a number") from None
    if not math.isfinite(r) or abs(r) > MAX_RATING:
        raise InputError(f"{path}: row {row} has rating {_short(value)}; a rating is a finite number "
                         f"from {-MAX_RATING:g} to {MAX_RATING:g} (stars, a 0/1 label, a score)")
    return r


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}… ({len(text):,} characters)"


def rating_scale(ratings: list[float | None]) -> tuple[float, float] | None:
    known = [r for r in ratings if r is not None]
    if not known:
        return None
    if set(known) <= {0.0, 1.0}:
        return (0.0, 1.0)
    return (1.0, 5.0) if min(known) >= 1 and max(known) <= 5 else (min(known), max(known))


def _from_rows(rows: list[dict], columns: list[str], path, column, rating_column, group_column) -> list[Product]:
    if {"rev1", "summ1"} <= set(columns):
        return _fewsum(rows, columns)
    col = _pick(columns, column, REVIEW_COLUMNS, "review", path)
    if col is None:
        raise InputError(f"{path} has no review column (looked for {', '.join(REVIEW_COLUMNS)}); "
                         f"its columns are: {', '.join(columns)}; name one with --column")
    rcol = _pick(columns, rating_column, RATING_COLUMNS, "rating", path) if rating_column != "" else None
    gcol = _pick(columns, group_column, (), "group", path) if group_column else None
    groups: dict[str, list[Review]] = {}
    for i, row in enumerate(rows, start=2):
        text = row.get(col)
        if not isinstance(text, str) or not text.strip():
            continue
        rating = _rating(row.get(rcol), path, i) if rcol else None
        key = str(row.get(gcol, "")) if gcol else "all"
        groups.setdefault(key, []).append(Review(text.strip(), rating))
    return [Product(k, tuple(v), scale=rating_scale([r.rating for r in v])) for k, v in groups.items()]


def _fewsum(rows: list[dict], columns: list[str]) -> list[Product]:
    revs = sorted((c for c in columns if re.fullmatch(r"rev\d+", c)), key=lambda c: int(c[3:]))
    summs = sorted((c for c in columns if re.fullmatch(r"summ\d+", c)), key=lambda c: int(c[4:]))
    out = []
    for i, row in enumerate(rows):
        reviews = []
        for c in revs:
            text = row.get(c) or ""
            if not isinstance(text, str):
                raise InputError(f"FewSum row {i + 2}: {c} is {_short(text)}, not review text")
            text = text.strip()
            if text:
                reviews.append(Review(text, _rating(row.get("rating" + c[3:]), "FewSum", i + 2)))
        refs = tuple(s for s in (str(row.get(c) or "").strip() for c in summs) if s)
        out.append(Product(str(row.get("group_id") or i), tuple(reviews), refs, str(row.get("cat") or ""),
                           scale=rating_scale([r.rating for r in reviews])))
    return out


def parse_table(text: str, path="input", column=None, rating_column=None, group_column=None) -> list[Product]:
    csv.field_size_limit(1 << 30)
    # the header line, bounded: csv.Sniffer's regular expressions took 0.43 s on an 8 KB line
    first = text[:SNIFF_CHARS].split("\n", 1)[0]
    try:
        delimiter = csv.Sniffer().sniff(first + "\n", delimiters=",\t;|").delimiter
    except csv.Error:
        delimiter = "\t" if "\t" in first else ","
    # Only the delimiter comes from the header line: sniffing a line without quotes also guesses
    # doublequote=False, which cut '"坐TAXI…怎么样"",老酒店…"' at the escaped quote (75 of the
    # 10,000 hotel reviews lost their ends). Quoting is the standard's ("" inside a quoted field).
    reader = csv.DictReader(io.StringIO(text, newline=""), dialect=csv.excel, delimiter=delimiter)
    columns = [c for c in (reader.fieldnames or []) if c is not None]
    if not columns:
        raise InputError(f"{path} is empty: no header row")
    try:
        rows = list(reader)
    except csv.Error as e:
        raise InputError(f"{path} is not readable as CSV: {e}") from None
    return _from_rows(rows, columns, path, column, rating_column, group_column)


def parse_json(text: str, path="input", column=None, rating_column=None, group_column=None) -> list[Product]:
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            rows = json.loads(stripped, parse_int=_json_int)
        else:
            rows = [json.loads(line, parse_int=_json_int) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise InputError(f"{path} is not valid JSON lines ({e})") from None
    except RecursionError:
        raise InputError(f"{path} is nested too deeply to be JSON lines of reviews "
                         "(each line an object such as {\"review\": \"...\", \"rating\": 5})") from None
    if not all(isinstance(r, dict) for r in rows):
        raise InputError(f"{path}: each JSON line must be an object with a review field")
    columns = list(dict.fromkeys(k for r in rows for k in r))
    if not rows:
        return []
    return _from_rows(rows, columns, path, column, rating_column, group_column)


def _json_int(digits: str):
    """A JSON integer; one too long for int() (over 4,300 digits: ValueError) stays its text, so
    the field it is in decides (a rating then says it is out of range)."""
    return int(digits) if len(digits) <= 100 else digits


def parse_plain(text: str) -> list[Product]:
    if re.search(r"\n[ \t]*\n", text.strip()):
        parts = re.split(r"\n[ \t]*\n", text)
    else:
        parts = text.splitlines()
    reviews = tuple(Review(p.strip()) for p in parts if p.strip())
    return [Product("all", reviews)]


def read_reviews(path: str | Path, *, column: str | None = None, rating_column: str | None = None,
                 group_column: str | None = None, encoding: str = "utf-8") -> list[Product]:
    """Products (each a list of reviews) from a file; the format comes from the extension, else
    from the content. Raises InputError when the file holds no reviews."""
    path = Path(path)
    text = read_text(path, encoding)
    ext = path.suffix.lower()
    first = text.lstrip()[:1]
    if ext in (".jsonl", ".ndjson", ".json") or (ext not in (".csv", ".tsv", ".txt") and first in "{["
                                                   and first):
        products = parse_json(text, path, column, rating_column, group_column)
    elif ext in (".csv", ".tsv"):
        products = parse_table(text, path, column, rating_column, group_column)
    else:
        if column or rating_column or group_column:
            raise InputError(f"{path} is plain text (one review per line); --column, --rating-column and "
                             "--group apply to CSV or JSON lines files")
        products = parse_plain(text)
    products = [p for p in products if p.reviews]
    if not products:
        raise InputError(f"{path} holds no reviews")
    return products
