"""The one writer of an embedded index: changes staged in a temporary generation (a copy of the
current SQLite file, the vectors appended), published by ``__exit__`` when the block raised nothing.

Replaced or deleted products leave their slot behind as a tombstone, excluded at search time by a
faiss ID selector; when tombstones pass a quarter of the slots, the next write compacts them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from dataclasses import replace
from typing import Iterable

import numpy as np

from qkv.errors import InputError
from qkv.text import keywords as textmod
from qkv.search.embedded import generations, postings, vectors
from qkv.search.embedded.rows import select_in
from qkv.search.store import KEYWORD_TEXT, StoreWriter, read_manifest, rebuilt_manifest
from qkv.search.writelock import WriterLock
from qkv.text import zh


class Writer(StoreWriter):
    def __init__(self, store, reset: bool, manifest=None):  # store: the EmbeddedStore written (it imports this module)
        self.store = store
        self.reset = reset
        self.rebuilt = manifest  # a rebuild's model, fingerprint, dim … (store.rebuilt_manifest)
        self.build_threads = vectors.build_threads()  # read now: a bad QKV_BUILD_THREADS fails before any work

    def __enter__(self):
        root = self.store.path
        self.lock = WriterLock(root).__enter__()
        try:
            current = read_manifest(root)  # re-read under the lock: another writer may have finished
            current = self.manifest = rebuilt_manifest(current, self.rebuilt)
            # the Chinese term scheme: a rebuild takes today's, an update keeps the index's own
            self.han = zh.SCHEME if self.reset else textmod.han_scheme(current.extra)
            self.base_gen = current.extra["generation"]
            self.gen_no = int(self.base_gen.split("-")[1]) + 1
            for p in root.iterdir():  # leftovers of killed writers
                if p.name.startswith((".tmp-gen-", ".manifest-")):
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            self.tmp = root / f".tmp-gen-{self.gen_no:06d}-{os.getpid()}"
            self.tmp.mkdir()
            if self.reset:
                self.con = sqlite3.connect(self.tmp / "catalog.sqlite")
                generations.init_schema(self.con)
                self.old_vectors = np.zeros((0, current.dim), dtype=current.dtype)
                self.ann_kind = None
            else:
                src = sqlite3.connect(f"file:{root / self.base_gen / 'catalog.sqlite'}?mode=ro", uri=True)
                self.con = sqlite3.connect(self.tmp / "catalog.sqlite")
                src.backup(self.con)
                src.close()
                self.old_vectors = np.load(root / self.base_gen / "vectors.npy", mmap_mode="r")
                self.ann_kind = current.extra.get("ann_kind")
            self.con.execute("PRAGMA journal_mode=OFF")
            self.con.execute("PRAGMA synchronous=OFF")  # the file is fsynced before it is published
            self.con.execute("BEGIN")
            self.cols = {n: (c, k) for n, c, k in self.con.execute("SELECT name, col, kind FROM fields")}
            self.next_slot = len(self.old_vectors)
            self.new_vectors: list[np.ndarray] = []
            self.tombstones = int(current.extra.get("slots", 0)) - current.count if not self.reset else 0
            self.changed = False
        except BaseException:
            self.lock.__exit__(None, None, None)
            raise
        return self

    # -- the StoreWriter interface
    def title_hashes(self, ids):
        return dict(select_in(self.con, "SELECT id, title_hash FROM products WHERE id IN ({in})", list(ids)))

    def _field_cols(self, rows) -> None:
        for row in rows:
            for name, v in row.items():
                if name in ("id", "title", KEYWORD_TEXT):
                    continue
                kind = "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else "text"
                if name not in self.cols:
                    col = f"f{len(self.cols)}"
                    self.con.execute(f"ALTER TABLE products ADD COLUMN {col}")
                    self.con.execute("INSERT INTO fields VALUES (?, ?, ?)", (name, col, kind if v is not None else "number"))
                    self.cols[name] = (col, kind if v is not None else "number")
                elif v is not None and kind == "text" and self.cols[name][1] == "number":
                    self.con.execute("UPDATE fields SET kind = 'text' WHERE name = ?", (name,))
                    self.cols[name] = (self.cols[name][0], "text")

    def _remove(self, ids) -> int:
        n = 0
        for pid in ids:
            r = self.con.execute("SELECT slot FROM products WHERE id = ?", (pid,)).fetchone()
            if r is not None:
                self.con.execute("DELETE FROM products WHERE slot = ?", r)
                self.con.execute("DELETE FROM fts WHERE rowid = ?", r)
                self.tombstones += 1
                n += 1
        return n

    def upsert(self, rows, vectors_, title_hashes) -> None:
        vectors_ = np.asarray(vectors_, dtype=np.float32)
        if len(rows) != len(vectors_) or len(rows) != len(title_hashes):
            raise InputError("upsert needs one vector and one title hash per row")
        if vectors_.ndim != 2 or (len(rows) and vectors_.shape[1] != self.manifest.dim):
            raise InputError(f"vectors must be [n, {self.manifest.dim}]")
        ids = [str(r["id"]) for r in rows]
        if len(set(ids)) != len(ids):
            raise InputError("upsert rows must have distinct ids")
        if not rows:
            return
        self._remove(ids)
        self._field_cols(rows)
        names = list(self.cols)
        colsql = ", ".join(["slot", "id", "title", "ktext", "title_hash"] + [self.cols[n][0] for n in names])
        ph = ",".join("?" * (5 + len(names)))
        data, fts = [], []
        for row, h in zip(rows, title_hashes):
            slot = self.next_slot
            self.next_slot += 1
            kt = row[KEYWORD_TEXT] if KEYWORD_TEXT in row else textmod.normalize(row["title"], self.han)
            data.append([slot, str(row["id"]), row["title"], kt, h] + [row.get(n) for n in names])
            fts.append((slot, kt))
        self.con.executemany(f"INSERT INTO products ({colsql}) VALUES ({ph})", data)
        self.con.executemany("INSERT INTO fts (rowid, ktext) VALUES (?, ?)", fts)
        self.new_vectors.append(vectors_)
        self.changed = True

    def update_fields(self, rows) -> None:
        self._field_cols(rows)
        for row in rows:
            names = [n for n in row if n not in ("id", KEYWORD_TEXT)]
            r = self.con.execute("SELECT slot, title FROM products WHERE id = ?", (str(row["id"]),)).fetchone()
            if r is None:
                raise InputError(f"update_fields: unknown id {row['id']!r}")
            r, old_title = r[:1], r[1]
            sets = []
            vals = []
            for n in names:
                sets.append("title = ?" if n == "title" else f"{self.cols[n][0]} = ?")
                vals.append(row[n])
            # the keyword document: the one given, else the new title's; an unchanged title keeps its
            # own (a term-weighted one stays weighted)
            if KEYWORD_TEXT in row or ("title" in row and row["title"] != old_title):
                kt = row[KEYWORD_TEXT] if KEYWORD_TEXT in row else textmod.normalize(row["title"], self.han)
                sets.append("ktext = ?")
                vals.append(kt)
                self.con.execute("DELETE FROM fts WHERE rowid = ?", r)
                self.con.execute("INSERT INTO fts (rowid, ktext) VALUES (?, ?)", (r[0], kt))
            if sets:
                self.con.execute(f"UPDATE products SET {', '.join(sets)} WHERE slot = ?", (*vals, r[0]))
        self.changed = self.changed or bool(rows)

    def delete(self, ids: Iterable[str]) -> int:
        n = self._remove([str(i) for i in ids])
        self.changed = self.changed or n > 0
        return n

    # -- publishing
    def __exit__(self, et, ev, tb):
        try:
            if et is None and (self.changed or self.reset):
                self._finish()
        finally:
            with contextlib.suppress(Exception):
                self.con.close()
            if self.tmp.exists():
                shutil.rmtree(self.tmp, ignore_errors=True)
            self.lock.__exit__(None, None, None)
        return False

    def _compact_vectors(self, vpath, count: int, new: np.ndarray) -> None:
        """Renumber live slots 0..count-1 (rows, FTS rowids) and write only their vectors."""
        m = self.manifest
        live = [s for (s,) in self.con.execute("SELECT slot FROM products ORDER BY slot")]
        out = np.lib.format.open_memmap(vpath, mode="w+", dtype=m.dtype, shape=(count, m.dim))
        n_old = len(self.old_vectors)
        for a in range(0, count, 65536):
            part = np.asarray(live[a:a + 65536])
            olds = part[part < n_old]
            news = part[part >= n_old] - n_old
            out[a:a + len(olds)] = self.old_vectors[olds]
            out[a + len(olds):a + len(part)] = new[news]
        out.flush()
        del out
        self.con.execute("CREATE TEMP TABLE remap AS SELECT slot AS old, row_number() OVER (ORDER BY slot) - 1 AS new FROM products")
        self.con.execute("CREATE INDEX temp.remap_old ON remap(old)")
        self.con.execute("UPDATE products SET slot = -1 - (SELECT new FROM remap WHERE old = products.slot)")
        self.con.execute("UPDATE products SET slot = -1 - slot")
        self.con.execute("DELETE FROM fts")
        self.con.execute("INSERT INTO fts (rowid, ktext) SELECT slot, ktext FROM products")

    def _append_vectors(self, vpath, slots: int, new: np.ndarray) -> None:
        m = self.manifest
        out = np.lib.format.open_memmap(vpath, mode="w+", dtype=m.dtype, shape=(slots, m.dim))
        n_old = len(self.old_vectors)
        for a in range(0, n_old, 65536):
            b = min(a + 65536, n_old)
            out[a:b] = self.old_vectors[a:b]
        out[n_old:] = new
        out.flush()
        del out

    def _finish(self) -> None:
        m = self.manifest
        count = self.con.execute("SELECT count(*) FROM products").fetchone()[0]
        new = np.concatenate(self.new_vectors) if self.new_vectors else np.zeros((0, m.dim), np.float32)
        slots = self.next_slot
        compact = slots > 0 and self.tombstones > max(1000, slots // 4) if not self.reset else False
        want = vectors.ann_kind(m.ann, count, m.extra)
        rebuild = compact or self.ann_kind != want or want == "ivfpq"
        vpath = self.tmp / "vectors.npy"
        if compact:
            self._compact_vectors(vpath, count, new)
            slots, self.tombstones = count, 0
        else:
            self._append_vectors(vpath, slots, new)
        postings.write_keyword_files(self.con, self.tmp, slots)
        self.con.commit()
        self.con.execute("VACUUM") if compact else None
        self.con.close()
        previous = None if rebuild else self.store.path / self.base_gen / "ann.faiss"
        vectors.write_ann(self.tmp, np.load(vpath, mmap_mode="r"), slots, want, m.dim, m.dtype, self.build_threads,
                          previous=previous, new=new)
        gen = f"gen-{self.gen_no:06d}"
        extra = {**m.extra, textmod.MANIFEST_KEY: self.han, "generation": gen, "slots": int(slots),
                 "ann_kind": want if slots else None,
                 "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        generations.publish(self.store.path, self.tmp, gen,
                            replace(m, count=int(count), version=generations.FORMAT_VERSION, extra=extra))
        generations.drop_old(self.store.path, keep=(gen, self.base_gen))
