"""The store contract and its registry: search names no store but its own; a backend registers
itself by name and URI scheme; the contract's defaults let a store with only the id-based methods
serve hybrid search; search's modules import nothing above them and form no cycle."""

import ast
import json
from pathlib import Path

import numpy as np
import pytest

import qkv
from qkv.search import store as store_mod
from qkv.search.store import Hit, IndexError_, Manifest, VectorStore, index_dir, open_store, register_store

PKG = Path(qkv.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every qkv module a file imports, at any depth (function-level imports included);
    ``from pkg import mod`` counts as importing ``pkg.mod`` (the package itself is only a namespace)."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("qkv"):
            for a in n.names:
                sub = f"{n.module}.{a.name}"
                is_mod = (PKG.parent / sub.replace(".", "/")).with_suffix(".py").is_file() or \
                    (PKG.parent / sub.replace(".", "/") / "__init__.py").is_file()
                out.add(sub if is_mod else n.module)
        elif isinstance(n, ast.Import):
            out.update(a.name for a in n.names if a.name.startswith("qkv"))
    return out


def _modules(*pkgs: str) -> dict[str, Path]:
    mods = {}
    for pkg in pkgs:
        for f in (PKG / pkg).rglob("*.py"):
            rel = f.relative_to(PKG.parent).with_suffix("")
            name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            mods[name] = f
    return mods


def test_search_names_no_store_above_it():
    """No module of qkv.search imports qkv.scale or a face, and the registry starts knowing only
    search's own store, which registers itself as Milvus does from qkv.scale (the contract module
    names no store at all)."""
    for name, f in _modules("search").items():
        assert not any(m.startswith(("qkv.scale", "qkv.cli", "qkv.web")) for m in _imports(f)), name
    tree = ast.parse((PKG / "search" / "store.py").read_text(encoding="utf-8"))
    initial = [n.value for n in ast.walk(tree) if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "_BACKENDS"]
    assert len(initial) == 1 and initial[0].values == []  # store.py names no store
    import qkv.search  # noqa: F401  (registers the embedded store)
    from qkv.search import store as store_mod

    assert store_mod._BACKENDS["embedded"].startswith("qkv.search.embedded")


def test_no_import_cycles_in_search_and_scale():
    mods = _modules("search", "scale")
    graph = {m: {d for d in _imports(f) if d in mods and d != m} for m, f in mods.items()}
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for d in graph[m]:
            assert state.get(d) != 1, " -> ".join(path + [d])
            if d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [m])


class _IdStore(VectorStore):
    """A store with only the id-based methods (the contract's defaults do the rest)."""

    def __init__(self, path, rows, vecs):
        self.path, self.rows, self.vecs = Path(path), rows, vecs

    @classmethod
    def open(cls, path):
        m = json.loads((Path(path) / "data.json").read_text())
        return cls(path, m["rows"], np.asarray(m["vecs"], np.float32))

    @classmethod
    def create(cls, path, manifest, **options):
        raise NotImplementedError

    @classmethod
    def locate(cls, uri):
        return Path(uri.partition("://")[2])

    @property
    def manifest(self):
        return Manifest(model="m", fingerprint="f", dim=self.vecs.shape[1], backend="ids-only",
                        extra={"generation": "1"})

    def count(self):
        return len(self.rows)

    def fields(self):
        return []

    def writer(self, reset=False):
        raise NotImplementedError

    def dense_search(self, vector, k, filter=None):
        s = self.vecs @ vector
        return [Hit(self.rows[i]["id"], float(s[i])) for i in np.argsort(-s)[:k]]

    def keyword_search(self, query, k, filter=None):
        words = set(query.lower().split())
        hits = [Hit(r["id"], float(len(words & set(r["title"].lower().split())))) for r in self.rows]
        return sorted((h for h in hits if h.score), key=lambda h: (-h.score, h.id))[:k]

    def get_rows(self, ids):
        by = {r["id"]: r for r in self.rows}
        return [by.get(i) for i in ids]

    def get_vectors(self, ids):
        pos = {r["id"]: i for i, r in enumerate(self.rows)}
        return self.vecs[[pos[i] for i in ids]]

    def all_ids(self):
        return [r["id"] for r in self.rows]


@pytest.fixture()
def ids_only(tmp_path, monkeypatch):
    """A registered test backend ("ids-only", scheme ids://) with five products."""
    monkeypatch.setattr(store_mod, "_BACKENDS", dict(store_mod._BACKENDS))
    monkeypatch.setattr(store_mod, "_SCHEMES", dict(store_mod._SCHEMES))
    register_store("ids-only", f"{__name__}:_IdStore", schemes=("ids",))
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(5, 4))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows = [{"id": f"p{i}", "title": t} for i, t in enumerate(["red mug", "blue mug", "red plate", "bowl", "cup"])]
    d = tmp_path / "idx"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps(_IdStore(d, rows, vecs).manifest.to_json()))
    (d / "data.json").write_text(json.dumps({"rows": rows, "vecs": vecs.tolist()}))
    return d, vecs


def test_a_registered_backend_opens_by_directory_and_by_uri(ids_only):
    d, _ = ids_only
    assert isinstance(open_store(d), _IdStore) and index_dir(f"ids://{d}") == d
    assert open_store(f"ids://{d}").count() == 5
    with pytest.raises(IndexError_, match="no store is registered for nope:// URIs"):
        open_store("nope://x")


def test_the_contract_defaults_serve_hybrid_search(ids_only):
    """A store with only the id-based methods gets slot-space hybrid fusion through the contract's
    defaults (ids as handles), ranked exactly as the generic fusion ranks its hit lists."""
    from qkv.search.index import Index

    d, vecs = ids_only
    idx = Index(open_store(d))
    for q in ("red mug", "mug", "plate bowl"):
        v = (vecs[0] * 0.6 + vecs[2] * 0.4).astype(np.float32)
        fast = idx.retrieve(q, 3, "hybrid", vector=v, candidates=5)
        slow = idx.fuse("hybrid", idx.store.dense_search(v, 5), idx.store.keyword_search(q, 5), 3, v, query=q)
        assert fast == slow and len(fast) == 3
    with pytest.raises(qkv.errors.InputError, match="no ef_search setting"):
        idx.store.ef_search = 10
    assert idx.store.ef_search is None and idx.store.reopen_if_changed() is None


def test_an_unknown_backend_names_the_known_ones(tmp_path):
    d = tmp_path / "x"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps(Manifest(model="m", fingerprint="f", dim=2, backend="nosuch").to_json()))
    with pytest.raises(IndexError_, match="backend 'nosuch' is unknown; known: .*embedded"):
        open_store(d)
