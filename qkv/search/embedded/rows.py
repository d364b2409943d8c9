"""Stored fields: the ``products`` table of a generation — rows by id, ids by slot, slots by id, and
the slots a filter allows (kept per open store: a generation never changes, and a shop's filters,
its facets, repeat)."""

from __future__ import annotations

import threading
from typing import Iterable, Sequence

import numpy as np

from qkv.search.embedded.generations import Generation
from qkv.search.store import Row

IN_CHUNK = 900  # values per ``IN (…)`` list: under SQLite's default limit of 999 bound parameters
FILTER_CACHE = 32  # filters whose allowed rows an open store keeps


def select_in(db, sql: str, values: Sequence) -> list[tuple]:
    """The rows of ``sql`` (which holds one ``{in}`` placeholder for an ``IN (…)`` list) for all of
    ``values``, asked in chunks of ``IN_CHUNK`` (a list, filled by SQLite's cursor in C: a search
    asks for a few hundred rows, and a Python generator per row showed in its profile)."""
    values = list(values)
    out: list[tuple] = []
    for i in range(0, len(values), IN_CHUNK):
        chunk = values[i:i + IN_CHUNK]
        out.extend(db.execute(sql.format(**{"in": ",".join("?" * len(chunk))}), chunk))
    return out


class Rows:
    """Row access on one generation."""

    def __init__(self, gen: Generation):
        self.gen = gen
        self.db = gen.db
        self._seen: dict[str, int] = {}  # id → slot of recently returned products
        self._filters: dict[tuple, list] = {}  # (SQL, params) -> [allowed slots, selector pair, mask]
        self._filters_lock = threading.Lock()  # searches may share an open store across threads

    # -- filters
    def column(self, name: str) -> str:
        if name in ("id", "title"):
            return f"p.{name}"
        return f"p.{self.gen.cols[name]}"

    def kinds(self) -> dict[str, str]:
        return {"id": "text", "title": "text", **{f.name: f.kind for f in self.gen.fields}}

    def where(self, flt) -> tuple[str, list]:
        """`` AND <sql>`` and its parameters for a parsed filter (or ``("", [])``)."""
        if flt is None:
            return "", []
        kinds = self.kinds()
        flt = flt.check(kinds)
        sql, params = flt.to_sql(self.column, kinds)
        return " AND " + sql, params

    def allowed(self, flt) -> list:
        """[sorted slots the filter allows, (selector, bits) or None, mask or None] — the last two
        made on first use by the dense and keyword sides — from SQL once per open store and filter.
        At 1M products the SQL alone reads every row."""
        where, params = self.where(flt)
        key = (where, tuple(params))
        with self._filters_lock:
            entry = self._filters.get(key)
            if entry is None:
                rows = self.db.execute(f"SELECT p.slot FROM products p WHERE 1{where}", params)
                slots = np.sort(np.fromiter((s for (s,) in rows), dtype=np.int64))
                if len(self._filters) >= FILTER_CACHE:
                    self._filters.pop(next(iter(self._filters)))  # the oldest
                entry = self._filters[key] = [slots, None, None]
            return entry

    def allowed_mask(self, flt) -> np.ndarray:
        """The filter's allowed slots as a boolean mask over all slots (kept with them)."""
        entry = self.allowed(flt)
        if entry[2] is None:
            mask = np.zeros(self.gen.slots, dtype=bool)
            mask[entry[0]] = True
            entry[2] = mask
        return entry[2]

    def live_slots(self) -> np.ndarray:
        return np.fromiter((s for (s,) in self.db.execute("SELECT slot FROM products")), dtype=np.int64)

    # -- ids and slots
    def ids_of(self, slots: Iterable[int]) -> dict[int, str]:
        """slot → product id for live slots (remembered: fusion and explain ask for them again)."""
        slots = [int(s) for s in slots]
        if not slots:
            return {}
        out = dict(select_in(self.db, "SELECT slot, id FROM products WHERE slot IN ({in})", slots))
        if len(self._seen) > 50_000:
            self._seen.clear()
        self._seen.update((pid, s) for s, pid in out.items())  # a generation never changes: keep them
        return out

    def slots_of(self, ids: Sequence[str]) -> list[int | None]:
        ids = list(ids)
        seen = self._seen
        if all(i in seen for i in ids):  # the ids the last searches returned (fusion, explain)
            return [seen[i] for i in ids]
        found = dict(select_in(self.db, "SELECT id, slot FROM products WHERE id IN ({in})", ids))
        return [found.get(i) for i in ids]

    def ktexts(self, slots: Sequence[int]) -> list[tuple[int, str]]:
        """(slot, normalised keyword text) of live ``slots``."""
        return select_in(self.db, "SELECT slot, ktext FROM products WHERE slot IN ({in})", slots)

    # -- rows
    def get(self, ids: Sequence[str]) -> list[Row | None]:
        ids = list(ids)
        names = [f.name for f in self.gen.fields]
        sel = ", ".join(["id", "title"] + [self.gen.cols[c] for c in names])
        found = {}
        for r in select_in(self.db, f"SELECT {sel} FROM products WHERE id IN ({{in}})", ids):
            row = {"id": r[0], "title": r[1]}
            row.update(zip(names, r[2:]))
            found[r[0]] = row
        return [found.get(i) for i in ids]

    def keyword_texts(self, ids: Sequence[str]) -> list[str | None]:
        """The keyword documents of ``ids`` as stored (a weighted index's are not the titles')."""
        found = dict(select_in(self.db, "SELECT id, ktext FROM products WHERE id IN ({in})", list(ids)))
        return [found.get(i) for i in ids]

    def all_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT id FROM products ORDER BY slot")]
