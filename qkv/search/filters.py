"""Filters on product fields: parsed into a small tree, then rendered as parameterised SQL (or any
other backend's syntax by walking the tree). User text is never spliced into a query.

Grammar (case-insensitive keywords)::

    expr    := or
    or      := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | "(" expr ")" | compare
    compare := FIELD OP value | FIELD "in" "(" value ("," value)* ")" | FIELD "contains" value
    OP      := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    value   := number | 'quoted' | "quoted" | bare-word

Examples: ``price < 50``, ``brand = 'Nike' and colour in (red, blue)``, ``not category = shoes``,
``title contains waterproof``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Callable, Union

from qkv.errors import InputError


class FilterError(InputError):
    """A --where expression that is not valid."""


@dataclass(frozen=True)
class Compare:
    field: str
    op: str  # one of = != < <= > >= in contains
    value: object  # str | float, or a tuple of them for "in"


@dataclass(frozen=True)
class And:
    items: tuple


@dataclass(frozen=True)
class Or:
    items: tuple


@dataclass(frozen=True)
class Not:
    item: object


Node = Union[Compare, And, Or, Not]

_TOKEN = re.compile(r"""\s*(?:(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![\w.])|
                        (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|
                        (?P<op><=|>=|==|!=|<>|[=<>(),])|
                        (?P<word>[^\s=<>!(),'"]+))""", re.X)
_KEYWORDS = {"and", "or", "not", "in", "contains"}


def _lex(text: str) -> list[tuple[str, object]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise FilterError(f"cannot read the filter at {text[pos:pos + 20]!r} (position {pos})")
        pos = m.end()
        if m.group("num") is not None:
            out.append(("num", _finite(float(m.group("num")), m.group("num"))))
        elif m.group("str") is not None:
            s = m.group("str")[1:-1]
            out.append(("str", re.sub(r"\\(.)", r"\1", s)))
        elif m.group("op") is not None:
            out.append(("op", m.group("op")))
        else:
            w = m.group("word")
            out.append(("kw", w.lower()) if w.lower() in _KEYWORDS else ("word", w))
    return out


@dataclass(frozen=True)
class Filter:
    """A parsed filter: ``root`` is the tree, ``text`` what the user wrote."""

    root: Node
    text: str

    def comparisons(self):
        """Every comparison in the expression, depth first."""
        stack = [self.root]
        while stack:
            n = stack.pop()
            if isinstance(n, Compare):
                yield n
            elif isinstance(n, (And, Or)):
                stack.extend(reversed(n.items))
            elif isinstance(n, Not):
                stack.append(n.item)

    def fields(self) -> set[str]:
        return {c.field for c in self.comparisons()}

    def check(self, kinds: dict[str, str]) -> "Filter":
        """Refuse unknown fields, values of number fields that are no finite number, and order
        comparisons of text with numbers (kinds: field → kind). Returns the filter with the values
        of number fields as numbers: ``price = "48.99"`` means the number (compared as text it
        would match nothing, and ``!=`` everything)."""
        for name in sorted(self.fields()):
            if name not in kinds:
                raise FilterError(f"filter {self.text!r} uses field {name!r}, which this index does not have; "
                                  f"fields: {', '.join(sorted(kinds)) or '(none)'}")

        def typed(n):
            if isinstance(n, Compare):
                if kinds[n.field] != "number" or n.op == "contains":
                    return n
                if isinstance(n.value, tuple):
                    return replace(n, value=tuple(self._number(n.field, v) for v in n.value))
                return replace(n, value=self._number(n.field, n.value))
            if isinstance(n, (And, Or)):
                return type(n)(tuple(typed(i) for i in n.items))
            return Not(typed(n.item))

        return Filter(typed(self.root), self.text)

    def _number(self, field: str, v) -> float:
        if isinstance(v, str):
            try:
                f = float(v.strip())
            except ValueError:
                raise FilterError(f"field {field!r} holds numbers; {v!r} is not a number (in {self.text!r})") from None
            return _finite(f, v)
        return _finite(float(v), v)

    def to_sql(self, column: Callable[[str], str], kinds: dict[str, str] | None = None) -> tuple[str, list]:
        """A SQL boolean expression with ``?`` placeholders and its parameters. ``column(field)``
        returns the quoted column for a (checked) field name."""
        params: list = []

        def val(v, field):
            if kinds and kinds.get(field) == "text" and isinstance(v, float):
                v = _num_text(v)
            params.append(v)
            return "?"

        def walk(n) -> str:
            if isinstance(n, Compare):
                col = column(n.field)
                text = kinds is not None and kinds.get(n.field) == "text"
                nocase = " COLLATE NOCASE" if text else ""  # text equality ignores case, as matches() does
                if n.op == "in":
                    return f"{col}{nocase} IN ({', '.join(val(v, n.field) for v in n.value)})"
                if n.op == "contains":
                    v = n.value if not isinstance(n.value, float) else _num_text(n.value)
                    params.append(f"%{_like_escape(str(v))}%")
                    return f"{col} LIKE ? ESCAPE '\\'"
                return f"{col}{nocase if n.op in ('=', '!=') else ''} {n.op} {val(n.value, n.field)}"
            if isinstance(n, And):
                return "(" + " AND ".join(walk(i) for i in n.items) + ")"
            if isinstance(n, Or):
                return "(" + " OR ".join(walk(i) for i in n.items) + ")"
            return f"(NOT COALESCE({walk(n.item)}, 0))"

        return walk(self.root), params

    def matches(self, row: dict) -> bool:
        """Evaluate on one row in Python (for backends without a query language, and tests)."""

        def cmp(a, op, b):
            if a is None:
                return False
            if isinstance(b, float) and not isinstance(a, (int, float)):
                try:
                    a = float(a)
                except (TypeError, ValueError):
                    b = _num_text(b)
            if isinstance(a, str) and isinstance(b, str):
                a, b = a.lower(), b.lower()
            return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]

        def walk(n) -> bool:
            if isinstance(n, Compare):
                a = row.get(n.field)
                if n.op == "in":
                    return any(cmp(a, "=", v) for v in n.value)
                if n.op == "contains":
                    return a is not None and str(n.value if not isinstance(n.value, float)
                                                 else _num_text(n.value)).lower() in str(a).lower()
                return cmp(a, n.op, n.value)
            if isinstance(n, And):
                return all(walk(i) for i in n.items)
            if isinstance(n, Or):
                return any(walk(i) for i in n.items)
            return not walk(n.item)

        return walk(self.root)


def _finite(f: float, written) -> float:
    """NaN compares false with everything and ±infinity is no price: refused, never searched."""
    if not math.isfinite(f):
        raise FilterError(f"filter value {written!r} is not a finite number; use a number such as 49.99")
    return f


def _num_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def parse_filter(text: str | None) -> Filter | None:
    """Parse a --where expression; ``None``/blank → no filter. Raises FilterError when invalid."""
    if text is None or not str(text).strip():
        return None
    toks = _lex(str(text))
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else (None, None)

    def take():
        nonlocal pos
        t = peek()
        if t[0] is None:
            raise FilterError(f"filter {text!r} ends too early; example: price < 50 and brand = 'Acme'")
        pos += 1
        return t

    def value():
        kind, v = take()
        if kind in ("num", "str", "word"):
            return v
        raise FilterError(f"filter {text!r}: expected a value, found {v!r}")

    def compare():
        kind, name = take()
        if kind != "word":
            raise FilterError(f"filter {text!r}: expected a field name, found {name!r}")
        kind, op = take()
        if kind == "op" and op in ("=", "==", "!=", "<>", "<", "<=", ">", ">="):
            op = {"==": "=", "<>": "!="}.get(op, op)
            return Compare(name, op, value())
        if kind == "kw" and op == "in":
            k, v = take()
            if (k, v) != ("op", "("):
                raise FilterError(f"filter {text!r}: 'in' needs a list in brackets, e.g. colour in (red, blue)")
            vals = [value()]
            while peek() == ("op", ","):
                take()
                vals.append(value())
            if take() != ("op", ")"):
                raise FilterError(f"filter {text!r}: missing ')' after the 'in' list")
            return Compare(name, "in", tuple(vals))
        if kind == "kw" and op == "contains":
            return Compare(name, "contains", value())
        raise FilterError(f"filter {text!r}: expected a comparison (= != < <= > >= in contains) after "
                          f"{name!r}, found {op!r}")

    def unary():
        if peek() == ("kw", "not"):
            take()
            return Not(unary())
        if peek() == ("op", "("):
            take()
            node = disj()
            if take() != ("op", ")"):
                raise FilterError(f"filter {text!r}: missing ')'")
            return node
        return compare()

    def conj():
        items = [unary()]
        while peek() == ("kw", "and"):
            take()
            items.append(unary())
        return items[0] if len(items) == 1 else And(tuple(items))

    def disj():
        items = [conj()]
        while peek() == ("kw", "or"):
            take()
            items.append(conj())
        return items[0] if len(items) == 1 else Or(tuple(items))

    root = disj()
    if pos != len(toks):
        raise FilterError(f"filter {text!r}: unexpected {toks[pos][1]!r}; join conditions with and/or")
    return Filter(root, str(text))
