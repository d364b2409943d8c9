"""Catalog readers: CSV, TSV, JSON lines (BEIR ``corpus.jsonl`` included) and Parquet → rows.

Every reader yields plain dicts; ``read_catalog`` then picks the id and title columns (by flag, or
detected when exactly one obvious candidate exists), keeps the other columns as product fields
(numbers where a whole column parses as numbers), and counts what it had to fix: duplicate ids
(the last one wins), empty titles (skipped) and undecodable bytes (replaced by U+FFFD).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from qkv.errors import InputError

ID_NAMES = ("id", "_id", "product_id", "productid", "product_uid", "sku", "asin", "item_id", "itemid", "uid")
TITLE_NAMES = ("title", "product_title", "product_name", "name", "item_name", "producttitle")


class CatalogError(InputError):
    """A catalog file that cannot be read as given."""


@dataclass
class Catalog:
    rows: list[dict]  # {"id": str, "title": str, field: str | float | None}
    id_column: str
    title_column: str
    fields: dict[str, str]  # extra field → "text" | "number"
    read: int = 0  # records in the file
    duplicates: int = 0  # records whose id came again later (the later one was kept)
    empty_titles: int = 0  # records skipped for an empty title
    replaced_bytes: int = 0  # undecodable byte sequences replaced by U+FFFD
    missing_ids: int = 0  # records skipped for an empty id
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"products": len(self.rows), "read": self.read, "duplicate_ids": self.duplicates,
                "empty_titles_skipped": self.empty_titles, "undecodable_bytes_replaced": self.replaced_bytes,
                "missing_ids_skipped": self.missing_ids,
                "id_column": self.id_column, "title_column": self.title_column, "fields": self.fields}


def _decode(data: bytes) -> tuple[str, int]:
    """UTF-8 (a BOM is dropped); undecodable bytes become U+FFFD and are counted."""
    bad = 0

    def handler(e: UnicodeDecodeError):
        nonlocal bad
        bad += 1
        return "\ufffd", e.end

    name = "qkv-count-replace"
    try:
        codecs.lookup_error(name)
    except LookupError:
        codecs.register_error(name, lambda e: _HANDLER[0](e))
    _HANDLER[0] = handler
    text = data.decode("utf-8-sig", errors=name)
    return text, bad


_HANDLER = [None]


def _sniff_format(path: Path, fmt: str | None) -> str:
    if fmt:
        fmt = fmt.lower()
        if fmt not in ("csv", "tsv", "jsonl", "parquet"):
            raise CatalogError(f"unknown catalog format {fmt!r}; use csv, tsv, jsonl or parquet")
        return fmt
    suf = "".join(path.suffixes[-2:]).lower() if path.suffix.lower() in (".gz",) else path.suffix.lower()
    return {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".txt": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
            ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}.get(suf) or _raise_fmt(path)


def _raise_fmt(path: Path):
    raise CatalogError(f"cannot tell the format of {path.name} from its extension; "
                       "pass --format csv|tsv|jsonl|parquet")


def _records(path: Path, fmt: str) -> tuple[list[str], list[dict], int]:
    if fmt == "parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise CatalogError("reading Parquet needs pyarrow: pip install 'qkv[parquet]'") from None
        try:
            table = pq.read_table(path)
        except Exception as e:  # pyarrow raises its own ArrowInvalid etc.
            raise CatalogError(f"cannot read {path} as Parquet: {e}") from None
        return list(table.column_names), table.to_pylist(), 0
    text, bad = _decode(path.read_bytes())
    if fmt == "jsonl":
        recs, cols = [], {}
        stripped = text.lstrip()
        if stripped.startswith("["):  # a JSON array of objects is accepted too
            try:
                data = json.loads(stripped)
            except json.JSONDecodeError as e:
                raise CatalogError(f"{path}: not valid JSON ({e})") from None
            lines = [(i + 1, d) for i, d in enumerate(data)]
        else:
            lines = []
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        lines.append((n, json.loads(line)))
                    except json.JSONDecodeError as e:
                        raise CatalogError(f"{path}:{n}: not a JSON object ({e.msg}); "
                                           "JSON lines need one object per line") from None
        for n, d in lines:
            if not isinstance(d, dict):
                raise CatalogError(f"{path}:{n}: expected a JSON object, found {type(d).__name__}")
            recs.append(d)
            for k in d:
                cols.setdefault(k, None)
        return list(cols), recs, bad
    cols, recs = _csv_records(path, text, "\t" if fmt == "tsv" else ",")
    return cols, recs, bad


def _csv_records(path: Path, text: str, delimiter: str) -> tuple[list[str], list[dict]]:
    """Header and records of a CSV/TSV text (as ``csv.DictReader``: blank lines skipped, missing
    values None, surplus values dropped). A record spanning several lines is a quoted field with line
    breaks — legal — unless its quoting is broken (a quote that never closes, or closes in the middle
    of a later row): then the field has swallowed the rows after it (``1,"unterminated`` then
    ``2,ok`` would become one product titled across both lines), and the row is refused with its line
    number, as a bad JSON line is. Single-line records are read as leniently as before."""
    lines = list(io.StringIO(text, newline=""))  # the lines csv.reader counts in line_num
    reader = csv.reader(iter(lines), delimiter=delimiter)
    cols: list[str] = []
    recs: list[dict] = []
    end = 0
    for row in reader:
        start, end = end + 1, reader.line_num
        if end > start:  # a field with line breaks: is its quoting sound?
            try:
                list(csv.reader(iter(lines[start - 1:end]), delimiter=delimiter, strict=True))
            except csv.Error:
                raise CatalogError(
                    f"{path}:{start}: a quoted field opened on this line does not close before the rows after it "
                    f"(it runs to line {end}); close the quote, or write a quote inside a quoted field as \"\"") from None
        if not cols:
            cols = row
            if not cols:
                break
            continue
        if not row:
            continue
        recs.append({c: (row[i] if i < len(row) else None) for i, c in enumerate(cols)})
    if not cols:
        raise CatalogError(f"{path} is empty or has no header row")
    return cols, recs


def _pick(cols: list[str], given: str | None, names: tuple[str, ...], what: str, flag: str) -> str:
    if given:
        if given in cols:
            return given
        raise CatalogError(f"no column {given!r} for the {what}; columns found: {', '.join(cols)}")
    lower = {c.lower().strip(): c for c in cols}
    cands = [lower[n] for n in names if n in lower]
    if len(cands) == 1:
        return cands[0]
    if not cands:
        raise CatalogError(f"cannot find the {what} column; columns found: {', '.join(cols) or '(none)'}; "
                           f"name it with {flag} COLUMN")
    raise CatalogError(f"ambiguous {what} column: {', '.join(cands)} all qualify; columns found: "
                       f"{', '.join(cols)}; choose one with {flag} COLUMN")


def _number(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(float(v)) else None
    if isinstance(v, str):
        s = v.strip().replace(",", "")
        for sym in ("$", "€", "£", "¥", "￥"):
            s = s.removeprefix(sym)
        try:
            f = float(s)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _plain(v):
    if v is None or isinstance(v, (str, int, float)) and not isinstance(v, bool):
        return v
    return json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else str(v)


def read_catalog(path, *, id_column: str | None = None, title_column: str | None = None,
                 fmt: str | None = None) -> Catalog:
    """Read a catalog file into rows (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise CatalogError(f"no catalog file at {path}")
    fmt = _sniff_format(path, fmt)
    cols, recs, bad = _records(path, fmt)
    idc = _pick(cols, id_column, ID_NAMES, "id", "--id-column")
    tc = _pick(cols, title_column, TITLE_NAMES, "title", "--title-column")
    if idc == tc:
        raise CatalogError(f"the id and title columns are the same ({idc!r}); choose them with --id-column/--title-column")
    extra = [c for c in cols if c not in (idc, tc)]
    # a field is numeric when every non-empty value parses as a number (prices, ratings …)
    kinds = {}
    for c in extra:
        vals = [r.get(c) for r in recs if r.get(c) not in (None, "")]
        kinds[c] = "number" if vals and all(_number(v) is not None for v in vals) else "text"
    by_id: dict[str, dict] = {}
    dup = empty = missing = 0
    for r in recs:
        pid = r.get(idc)
        pid = "" if pid is None else str(pid).strip()
        title = r.get(tc)
        title = "" if title is None else str(title).strip()
        if not pid:
            missing += 1
            continue
        if not title:
            empty += 1
            continue
        row = {"id": pid, "title": title}
        for c in extra:
            v = r.get(c)
            if v in (None, ""):
                row[c] = None
            elif kinds[c] == "number":
                row[c] = _number(v)
            else:
                row[c] = _plain(v)
        if pid in by_id:
            dup += 1
            del by_id[pid]  # last wins, at the position of the last occurrence
        by_id[pid] = row
    return Catalog(list(by_id.values()), idc, tc, kinds, read=len(recs), duplicates=dup,
                   empty_titles=empty, replaced_bytes=bad, missing_ids=missing)
