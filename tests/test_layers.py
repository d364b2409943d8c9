"""qkv's modules form layers, and no two import each other in a circle.

Bottom up (README "Layout"):

    base          kernels (qkv.kernels: the library's loader, the builder, BLAS thread limits, one
                  room per precision) and the small modules every layer may use: qkv.errors,
                  qkv.jsonable, qkv.progress
    math          qkv.attention
    model         qkv.model (and the package root ``qkv``, which re-exports it); qkv.text beside it
                  (language handling any application may use: Chinese, the keyword tokenizer)
    translation   qkv.translate (a Chinese query into a catalog's English terms): search uses it,
                  it never uses search
    applications  qkv.explain, qkv.search, qkv.attributes, qkv.summarize; qkv.scale beside them
                  (and qkv.data, the sample catalog's generator)
    faces         qkv.cli, qkv.web

Inside qkv.kernels the rooms are ordered too (KERNEL_ROOMS): the loader, the builder and the BLAS
limits at the bottom (the builder and the loader import nothing of qkv), then float32, then the
precisions built on it (bfloat16, q4, int8); every module there must have a room.

A module may import from its own layer or any lower one, never a higher one. The scripts outside the
package (bench/, tests/) import each other by file name (``import _harness`` with their folder on
sys.path, ``from .conftest import …``, or loaded by path: ``spec_from_file_location(…, "search.py")``);
they may not form a circle either. Imports are read from
the source with ``ast`` — every ``import``/``from … import`` anywhere in a file (inside functions
too: a lazy import is still an import), ``importlib.import_module`` / ``require`` calls with a
literal name, and ``"qkv.module:attr"`` strings (a registry entry is an import by name) — so
nothing has to be imported to be checked.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "qkv"
SCRIPT_FOLDERS = ("bench", "tests")

LAYERS = [
    ("base", ("qkv.kernels", "qkv.errors", "qkv.jsonable", "qkv.progress")),
    ("math", ("qkv.attention",)),
    ("model", ("qkv.model", "qkv", "qkv.text")),  # qkv.text: language handling beside the model
    ("translation", ("qkv.translate",)),  # below search, which asks it for a query's English
    ("applications", ("qkv.explain", "qkv.search", "qkv.attributes", "qkv.summarize", "qkv.scale", "qkv.data")),
    ("faces", ("qkv.cli", "qkv.web")),
]


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package) for every .py file under ``root`` (a package dir)."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if pkg else parts)] = (p, pkg)
    return out


def _known(name: str, mods) -> str | None:
    """The longest prefix of ``name`` that is a module (``qkv.search.index.Index`` -> qkv.search.index)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in the file)."""
    mods = modules(root)
    top = root.name
    graph = {}
    for name, (path, pkg) in mods.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found |= {_known(a.name, mods) for a in node.names if a.name.split(".")[0] == top}
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the package holding this module
                    base = name.split(".") if pkg else name.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if mod.split(".")[0] != top:
                    continue
                for a in node.names:  # ``from qkv.explain import html`` imports the module qkv.explain.html
                    sub = f"{mod}.{a.name}"
                    found.add(sub if sub in mods else _known(mod, mods))
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str) and node.args[0].value.split(".")[0] == top:
                f = node.func
                fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if fname in ("import_module", "__import__", "require", "available"):
                    found.add(_known(node.args[0].value, mods))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(rf"{top}(\.\w+)+:\w+", node.value):  # "qkv.scale.milvus_store:MilvusStore"
                found.add(_known(node.value.partition(":")[0], mods))
        found.discard(None)
        found.discard(name)
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that reach each other (Tarjan's strongly connected components), each with
    one concrete loop through it, for the message."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(_loop(graph, set(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _loop(graph, comp: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start = min(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return [start] + path[::-1][1:] + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return sorted(comp)


def layer_of(module: str, layers=LAYERS) -> int | None:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(layers):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    return rank


def upward(graph, layers=LAYERS) -> list[str]:
    bad = []
    for m, targets in sorted(graph.items()):
        for t in sorted(targets):
            if layer_of(t, layers) > layer_of(m, layers):
                bad.append(f"{m} ({layers[layer_of(m, layers)][0]}) imports {t} ({layers[layer_of(t, layers)][0]})")
    return bad


# ---------------------------------------------------------------- qkv itself
GRAPH = imports(PACKAGE)


def test_every_module_has_a_layer():
    assert len(GRAPH) > 50 and "qkv.explain.maps" in GRAPH
    unplaced = [m for m in GRAPH if layer_of(m) is None]
    assert not unplaced, f"place these modules in a layer (tests/test_layers.py LAYERS): {unplaced}"


def test_no_import_cycles():
    found = cycles(GRAPH)
    assert not found, "modules that import each other in a circle:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_import_from_a_lower_layer_to_a_higher_one():
    bad = upward(GRAPH)
    assert not bad, "imports against the layers (lower layers never import higher ones):\n" + "\n".join(bad)


# ---------------------------------------------------------------- inside qkv.kernels
KERNEL_ROOMS = [
    ("loader", ("qkv.kernels.cpu", "qkv.kernels.build", "qkv.kernels.blas")),
    ("float32", ("qkv.kernels.float32",)),
    ("precisions", ("qkv.kernels.bfloat16", "qkv.kernels.q4", "qkv.kernels.int8")),
]
STANDALONE = ("qkv.kernels.build", "qkv.kernels.cpu")  # loaded before qkv is importable (build hook)


def kernel_problems(graph) -> list[str]:
    """Unplaced modules of qkv.kernels, imports against its rooms, and imports of qkv by the
    standalone modules."""
    mods = {m: t for m, t in graph.items() if m.startswith("qkv.kernels.")}
    bad = [f"{m} has no room in qkv.kernels (tests/test_layers.py KERNEL_ROOMS)"
           for m in sorted(mods) if layer_of(m, KERNEL_ROOMS) is None]
    for m, targets in sorted(mods.items()):
        for t in sorted(targets):
            if m in STANDALONE:
                bad.append(f"{m} imports {t}")
                continue
            rm, rt = layer_of(m, KERNEL_ROOMS), layer_of(t, KERNEL_ROOMS)
            if rm is not None and rt is not None and rt > rm:
                bad.append(f"{m} ({KERNEL_ROOMS[rm][0]}) imports {t} ({KERNEL_ROOMS[rt][0]})")
    return bad


def test_kernel_rooms_import_one_way():
    assert {"qkv.kernels.cpu", "qkv.kernels.float32", "qkv.kernels.bfloat16", "qkv.kernels.q4"} <= set(GRAPH)
    bad = kernel_problems(GRAPH)
    assert not bad, "qkv.kernels' rooms:\n" + "\n".join(bad)


def test_kernel_checker_finds_unplaced_upward_and_standalone_imports(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "", "kernels/__init__.py": "",
        "kernels/cpu.py": "", "kernels/build.py": "from qkv import errors\n", "errors.py": "",
        "kernels/float32/__init__.py": "from qkv.kernels import bfloat16\n",  # float32 -> a room above
        "kernels/bfloat16/__init__.py": "from qkv.kernels import cpu, float32\n",
        "kernels/int4/__init__.py": "from qkv.kernels import cpu\n",  # a new precision without a room
    })
    assert kernel_problems(imports(root)) == [
        "qkv.kernels.int4 has no room in qkv.kernels (tests/test_layers.py KERNEL_ROOMS)",
        "qkv.kernels.build imports qkv.errors",
        "qkv.kernels.float32 (float32) imports qkv.kernels.bfloat16 (precisions)"]


def script_imports(root: Path) -> dict[str, set[str]]:
    """Script -> the scripts under ``root`` it imports, each named by its path below ``root``
    without ".py": ``import x`` / ``from x import`` / ``from .x import`` of a script in the same
    folder (its folder is on sys.path when it runs), and a script loaded by path (a call
    ``spec_from_file_location`` whose arguments name "x.py" of this tree)."""
    files = {p.relative_to(root).with_suffix("").as_posix(): p for p in sorted(root.rglob("*.py"))}
    graph = {}
    for name, path in files.items():
        folder = name.rpartition("/")[0]

        def sibling(mod: str):
            target = f"{folder}/{mod}" if folder else mod
            return target if target in files else None

        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found |= {sibling(a.name.split(".")[0]) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level <= 1:
                found.add(sibling(node.module.split(".")[0]))
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) \
                    == "spec_from_file_location":
                for c in ast.walk(node):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.endswith(".py"):
                        stem = c.value[:-3]
                        found |= {n for n in files if n == stem or n.endswith("/" + stem)}
        found.discard(None)
        found.discard(name)
        graph[name] = found
    return graph


@pytest.mark.parametrize("folder", SCRIPT_FOLDERS)
def test_no_import_cycles_outside_the_package(folder):
    graph = script_imports(REPO / folder)
    assert len(graph) > 5
    found = cycles(graph)
    assert not found, f"scripts in {folder}/ that import each other in a circle:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_package_never_imports_the_scripts():
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not any(n.split(".")[0] in SCRIPT_FOLDERS for n in names), f"{path} imports {names}"


# ---------------------------------------------------------------- the checker catches what it should
def test_checker_finds_a_circle_among_scripts(tmp_path):
    for rel, src in {"engine.py": "import _multilingual\nimport _duel\n",
                     "_multilingual.py": "def f():\n    from engine import CACHE\n",  # the old circle
                     "_duel.py": "", "scale.py": "spec = spec_from_file_location('s', ROOT / 'bench' / 'search.py')\n",
                     "search.py": "import numpy\n", "sub/t.py": "from .conftest import X\n", "sub/conftest.py": ""}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(src, encoding="utf-8")
    g = script_imports(tmp_path)
    assert g["engine"] == {"_multilingual", "_duel"} and g["scale"] == {"search"} and g["sub/t"] == {"sub/conftest"}
    assert cycles(g) == [["_multilingual", "engine", "_multilingual"]]

def _tree(tmp_path, files: dict[str, str]) -> Path:
    root = tmp_path / "qkv"
    for rel, src in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(src, encoding="utf-8")
    return root


def test_checker_finds_lazy_and_indirect_cycles_and_upward_imports(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "kernels.py": "def f():\n    from qkv.cli import main\n",  # base -> faces, lazily
        "explain/__init__.py": "from qkv.explain.maps import M\n",
        "explain/maps.py": "from .attribution import A\n",  # relative
        "explain/attribution.py": "def g():\n    from qkv.explain import html\n",
        "explain/html.py": "import qkv.explain.maps\n",  # maps -> attribution -> html -> maps
        "cli/__init__.py": "import importlib\nimportlib.import_module('qkv.explain.html')\n",
        "search/__init__.py": "BACKENDS = {'milvus': 'qkv.cli:MilvusStore'}\n",  # named, not imported
    })
    g = imports(root)
    assert g["qkv.explain.maps"] == {"qkv.explain.attribution"}
    assert g["qkv.explain.attribution"] == {"qkv.explain.html"}
    assert g["qkv.cli"] == {"qkv.explain.html"}
    assert cycles(g) == [["qkv.explain.attribution", "qkv.explain.html", "qkv.explain.maps",
                          "qkv.explain.attribution"]]
    assert g["qkv.search"] == {"qkv.cli"}
    assert upward(g) == ["qkv.kernels (base) imports qkv.cli (faces)",
                         "qkv.search (applications) imports qkv.cli (faces)"]


def test_checker_passes_a_clean_tree(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "from qkv.model import load\n",
        "attention.py": "from qkv import kernels\n",
        "kernels.py": "",
        "model/__init__.py": "from qkv.attention import softmax\ndef load(): pass\n",
        "web/app.py": "from qkv.explain import maps\n",
        "explain/__init__.py": "", "explain/maps.py": "import numpy\n",
    })
    g = imports(root)
    assert g["qkv.attention"] == {"qkv.kernels"} and g["qkv.web.app"] == {"qkv.explain.maps"}
    assert cycles(g) == [] and upward(g) == []
