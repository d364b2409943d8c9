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

# Column names compared without case, spaces, "_" or "-" ("Review Text" is reviewtext); the Chinese
# ones are what Chinese shops' review exports commonly call them.
REVIEW_COLUMNS = ("review", "text", "content", "body", "comment", "reviewtext", "reviewbody", "reviews", "comments",
                  "评论内容", "评价内容", "评论", "评价", "内容", "正文", "文本", "留言")
RATING_COLUMNS = ("rating", "stars", "score", "overall", "starrating", "star", "label",
                  "评分", "星级", "打分", "分数", "评级", "星数", "得分")


class MissingColumn(InputError):
    """No review column was named or recognised: ``columns`` are the file's, to choose from."""

    def __init__(self, message: str, columns: list[str]):
        super().__init__(message, columns)
        self.columns = list(columns)

    def __str__(self) -> str:
        return str(self.args[0])


# Ratings are stars, labels or scores (1-5, 0/1, 0-10, 0-100): one far outside would set the scale
# every other review is read on (rating_scale), so it is refused, as NaN and infinity are.
MAX_RATING = 100.0
SNIFF_CHARS = 1_000  # of the header line, to guess a CSV's delimiter from


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


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


def decode(data: bytes, where: str = "the file") -> str:
    """Bytes of a text file as text: UTF-8 (with or without a BOM), else the encoding
    charset-normalizer finds (GB2312/GBK read as their superset GB18030: what Excel on Chinese
    Windows saves). Refused, saying to save as UTF-8, when no encoding reads it cleanly."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        bad = e.start
    from charset_normalizer import from_bytes

    sample = data[:1 << 18]  # a quarter MiB tells the encoding; bounded time
    if _looks_gb(sample):
        name = "gb18030"
    else:
        # Short files read equally cleanly in many encodings (the detector ranks "Très bien" level
        # as Big5, cp932 and GB18030): a file whose every non-ASCII byte stands alone between ASCII
        # ones is in a one-byte encoding; among the detector's level best, the commonest.
        likely = _ONE_BYTE if _one_byte(sample) else _LIKELY
        found = [m for m in from_bytes(sample) if m.encoding in likely]
        level = [m.encoding for m in found if m.chaos <= found[0].chaos + 0.05] if found else []
        name = min(level, key=likely.index) if level else ("cp1252" if likely is _ONE_BYTE else None)
    if name is not None:
        try:
            return data.decode(name)
        except (UnicodeDecodeError, LookupError):
            pass
    raise InputError(f"{where} is not UTF-8 text (byte {bad}: {data[bad:bad + 4]!r}) and its encoding could not be "
                     "told; save it as UTF-8 (in Excel: Save As → CSV UTF-8) and try again")


# Encodings a review file not in UTF-8 is likely to be in, most likely first (Western Windows,
# Chinese traditional, Japanese, Korean, Central European, Cyrillic, UTF-16 with its BOM).
_LIKELY = ["cp1252", "latin_1", "iso8859_15", "big5", "cp932", "shift_jis", "euc_jp", "cp949", "euc_kr",
           "cp1250", "cp1251", "utf_16", "utf_32"]


_ONE_BYTE = ["cp1252", "latin_1", "iso8859_15", "cp1250", "cp1251"]


def _one_byte(data: bytes) -> bool:
    """Most non-ASCII bytes stand alone between ASCII bytes (accented letters in Latin text); in
    the two-byte Chinese, Japanese and Korean encodings they come in pairs and runs."""
    high = [i for i, b in enumerate(data) if b >= 0x80]
    alone = sum(1 for i in high if (i == 0 or data[i - 1] < 0x80) and (i + 1 == len(data) or data[i + 1] < 0x80))
    return bool(high) and alone >= 0.8 * len(high)


def _looks_gb(data: bytes) -> bool:
    """GB2312/GBK/GB18030 Chinese: it decodes as GB18030, and its two-byte characters are mostly in
    GB2312's common block (both bytes A1–FE). Latin-1 text also decodes as GB18030, but each accented
    letter pairs with the ASCII letter after it ("Très" → "Tr鑣"), which that rule refuses."""
    try:
        data.decode("gb18030")
    except UnicodeDecodeError:
        return False
    common = len(re.findall(rb"[\xa1-\xfe][\xa1-\xfe]", data))
    other = len(re.findall(rb"[\x81-\xfe][\x40-\x7e\x80]", data))
    return common > 0 and other <= 0.1 * common


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """A file's text, refusing binary files and naming the place where decoding fails. A file
    that is not UTF-8 when UTF-8 is asked for (the default) is read in the encoding ``decode`` finds."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path} is a folder; give a file of reviews")
    data = path.read_bytes()
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{path} looks binary (it has NUL bytes), not a text file of reviews")
    if encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
        return decode(data, str(path))
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise InputError(f"{path} is not valid {encoding} text (byte {e.start}: {data[e.start:e.start + 4]!r}); "
                         f"pass the right --encoding (e.g. gb18030, latin-1)") from None
    except LookupError:
        raise InputError(f"unknown encoding {encoding!r}") from None


def _pick(columns: list[str], wanted: str | None, choices: tuple[str, ...], what: str, path) -> str | None:
    keyed = {}
    for c in columns:
        keyed.setdefault(_key(c), c)
    if wanted is not None:
        if wanted in columns:
            return wanted
        if _key(wanted) in keyed:
            return keyed[_key(wanted)]
        raise MissingColumn(f"{path} has no {what} column {wanted!r}; its columns are: {', '.join(columns)}", columns)
    for c in choices:
        if c in keyed:
            return keyed[c]
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
        raise MissingColumn(f"{path} has no review column (looked for {', '.join(REVIEW_COLUMNS)}); "
                            f"its columns are: {', '.join(columns)}; name one with --column", columns)
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
    if column is None and all(isinstance(r.get("reviews"), list) for r in rows):
        return _grouped(rows, path)
    return _from_rows(rows, columns, path, column, rating_column, group_column)


def _json_int(digits: str):
    """A JSON integer; one too long for int() (over 4,300 digits: ValueError) stays its text, so
    the field it is in decides (a rating then says it is out of range)."""
    return int(digits) if len(digits) <= 100 else digits


def _grouped(rows: list[dict], path) -> list[Product]:
    """One product per object: ``{"id", "reviews": [...], "labels"|"ratings": [...], "references": [...]}``
    (the layout of ../shared/data/summaries/zh_reviews/dev.jsonl)."""
    out = []
    for i, row in enumerate(rows, start=1):
        texts = row["reviews"]
        rates = row.get("ratings", row.get("labels"))
        if rates is not None and (not isinstance(rates, list) or len(rates) != len(texts)):
            raise InputError(f"{path}: object {i} has {len(texts)} reviews but its ratings/labels are not a list "
                             "of the same length; give one per review (null if unknown)")
        rates = rates or [None] * len(texts)
        reviews = tuple(Review(t.strip(), _rating(r, path, i)) for t, r in zip(texts, rates)
                        if isinstance(t, str) and t.strip())
        refs = row.get("references") or []
        refs = tuple(r.strip() for r in ([refs] if isinstance(refs, str) else refs) if isinstance(r, str) and r.strip())
        out.append(Product(str(row.get("id", i - 1)), reviews, refs, str(row.get("category") or ""),
                           scale=rating_scale([r.rating for r in reviews])))
    return out


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
