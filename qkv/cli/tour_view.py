"""The tour printed with rich: tables for each step, explanations beside them."""

from __future__ import annotations

import numpy as np
from rich import box
from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from qkv.explain.tour_text import notes




def _fit(s: str, width: int) -> str:
    """``s`` cut to ``width`` terminal columns (a Chinese character takes two)."""
    from rich.cells import cell_len

    while cell_len(s) > width:
        s = s[:-1]
    return s


def _vec(a, k: int = 4) -> str:
    return " ".join(f"{x:+.2f}" for x in a[:k]) + (" …" if len(a) > k else "")


def _heat(value: float, lo: float, hi: float) -> str:
    """A background shade for a matrix cell (darker = larger)."""
    f = 0.0 if hi <= lo else (value - lo) / (hi - lo)
    level = int(round(f * 5))
    return ["", "on grey19", "on grey27", "on grey35", "on dark_green", "on green4"][level]


def _matrix(t, m: np.ndarray, fmts, title: str, width: int, row_sums: bool = False, labels=None) -> Table:
    """An n×n table that fits ``width`` columns: columns are token numbers (see step 1) over the
    token's first letters, rows "number token"; the first format whose cells fit is used, and when
    even the last does not fit only the first tokens are shown (and the caption says so)."""
    labels = t.labels if labels is None else labels
    n = len(labels)
    from rich.cells import cell_len

    label_w = min(12, max(cell_len(f"{i} {lab}") for i, lab in enumerate(labels)))
    extra = 6 if row_sums else 0  # "Σ" column: 5 characters and the box's column gap
    for fmt, mult in fmts:
        cell = max(3, len(str(n - 1)), max(len(format(v * mult, fmt)) for v in m.ravel()))
        shown = max(1, min(n, (width - label_w - extra - 2) // (cell + 1)))  # each column: cell + 1 gap
        if shown == n:
            break
    tab = Table(title=title + ("" if mult == 1 else f"  (×{mult:g})"), box=box.SIMPLE_HEAD, pad_edge=False,
                show_edge=False, padding=0, title_justify="left")
    tab.add_column("", no_wrap=True, width=label_w)
    for j in range(shown):  # number (as in step 1) over the token's first letters
        short = _fit(labels[j].strip("[]#<>/") or labels[j], cell)
        tab.add_column(f"{j}\n{short}", justify="right", no_wrap=True, width=cell)
    if row_sums:
        tab.add_column("Σ", justify="right", style="bold cyan", no_wrap=True, width=5)
    lo, hi = float(m.min()), float(m.max())
    for i in range(n):
        cells = [Text(format(m[i, j] * mult, fmt), style=_heat(m[i, j], lo, hi)) for j in range(shown)]
        if row_sums:
            cells.append(Text(f"{m[i].sum():.3f}"))
        tab.add_row(Text(_fit(f"{i} {labels[i]}", label_w)), *cells)
    if shown < n:
        tab.caption = f"first {shown} of {n} columns shown at this width (all are in --json)"
    return tab


def render(t, lang: str = "en", width: int = 120) -> list:
    """Rich renderables for the whole tour, n×n tables fitted to ``width`` columns."""
    st = {s["id"]: s for s in t.steps(lang)}
    zh = lang == "zh"
    out: list = []
    head = (f"[bold]注意力导览[/] · {t.model} · 第 {t.layer} 层 · 第 {t.head} 个头\n“{t.text}”" if zh else
            f"[bold]Attention tour[/] · {t.model} · layer {t.layer} · head {t.head}\n“{t.text}”")
    out.append(Panel(head.replace("“" + t.text, "“" + escape(t.text)), box=box.ROUNDED, expand=False))
    for note in notes(t, lang):
        out.append(Text("⚠ " + note, style="yellow"))

    # 1
    s = st["tokens"]
    tab = Table(box=box.SIMPLE_HEAD, title=escape(f"X = {t.x_name}  [{t.x.shape[0]}×{t.x.shape[1]}]"), title_justify="left")
    for c, j in (("#", "right"), ("token", "left"), ("word", "left"), (escape("X[i, :6]"), "left")):
        tab.add_column(c, justify=j)
    word_of = {p: w.text for w in t.words for p in w.tokens}
    for i, lab in enumerate(t.labels):
        tab.add_row(str(i), Text(lab, style="magenta" if t.special[i] else ""), Text(word_of.get(i, "")), _vec(t.x[i], 6))
    out += [Text(s["title"], style="bold underline"), Text(s["text"]), tab]

    # 2
    s = st["project"]
    tab = Table(box=box.SIMPLE_HEAD, title_justify="left",
                title=f"Wq, Wk, Wv: {t.wq.shape[0]}×{t.wq.shape[1]} · Q, K, V: {t.q.shape[0]}×{t.q.shape[1]}")
    kv = 4 if width >= 100 else 3  # values shown per vector
    for c in ("token", f"q[:{kv}]", f"k[:{kv}]", f"v[:{kv}]"):
        tab.add_column(escape(c), no_wrap=True)
    for i, lab in enumerate(t.labels):
        tab.add_row(Text(lab), _vec(t.q[i], kv), _vec(t.k[i], kv), _vec(t.v[i], kv))
    out += [Text(s["title"], style="bold underline"), Text(s["text"]), tab]

    # 3
    s = st["scores"]
    out += [Text(s["title"], style="bold underline"), Text(s["text"]),
            _matrix(t, t.scores, ((".1f", 1), (".0f", 1)), width=width,
                    title="S = Q·Kᵀ (row i looks at column j; numbers as in step 1)" if not zh else
                    "S = Q·Kᵀ（第 i 行看第 j 列；编号见第 1 步）")]

    # 4
    s = st["scale"]
    sp = t.spread()
    tab = Table(box=box.SIMPLE_HEAD)
    for c in ("", "min", "max", "row std", "row range"):
        tab.add_column(c, justify="right")
    for name, key in (("Q·Kᵀ", "before"), ("Q·Kᵀ/√d_k", "after")):
        v = sp[key]
        tab.add_row(name, f"{v['min']:.2f}", f"{v['max']:.2f}", f"{v['std']:.2f}", f"{v['range']:.2f}")
    out += [Text(s["title"], style="bold underline"), Text(s["text"]), tab]

    # 5
    s = st["softmax"]
    out += [Text(s["title"], style="bold underline"), Text(s["text"]),
            _matrix(t, t.weights, ((".2f", 1), (".0f", 100)), width=width, row_sums=True,
                    title="softmax(Q·Kᵀ/√d_k), each row sums to 1" if not zh else "softmax(Q·Kᵀ/√d_k)，每行和为 1")]
    out.append(Text("\n".join("  " + a for a in s["attends"])))
    out.append(Text(s["special_note"], style="italic"))
    if len(t.words) < len(t.tokens):  # pieces merged: the same head at word level
        wl = [w.text for w in t.words]
        out.append(_matrix(t, t.word_weights[t.head], ((".2f", 1), (".0f", 100)), width=width, row_sums=True, labels=wl,
                           title=("word level (pieces: rows averaged, columns summed)" if not zh else
                                  "词级（词片：行取平均，列相加）")))
        out.append(Text("\n".join("  " + a for a in s["word_attends"])))
    if s.get("question"):
        a = s["answer"]
        out.append(Text(s["question"], style="bold"))
        tab = Table(box=box.SIMPLE_HEAD, title_justify="left",
                    title=(f"{a['from']} → {a['to']}, every head of layer {t.layer}" if not zh else
                           f"{a['from']} → {a['to']}，第 {t.layer} 层的每个头"))
        tab.add_column("head" if not zh else "头", justify="right")
        tab.add_column("weight" if not zh else "权重", justify="right")
        tab.add_column("")
        top = max(a["per_head"]) or 1.0
        for h, v in enumerate(a["per_head"]):
            bar = "█" * int(round(20 * v / top))
            tab.add_row(str(h), f"{v:.3f}", Text(bar, style="bold green" if h == t.head else "green"))
        out.append(tab)
    tab = Table(box=box.SIMPLE_HEAD, title_justify="left",
                title="output_i = Σ_j w_ij · v_j" if not zh else "输出_i = Σ_j w_ij · v_j")
    for c in ("token", "largest terms", "output[:4]"):
        tab.add_column(escape(c))
    for i, lab in enumerate(t.labels):
        terms = " + ".join(f"{w:.2f}·v[{t.labels[j][:8]}]" for j, w in t.attends(i, 2)) + " + …"
        tab.add_row(Text(lab), Text(terms), _vec(t.context[i]))
    out.append(tab)

    # heads
    s = st["heads"]
    out += [Text(s["title"], style="bold underline"), Text(s["text"])]
    out.append(Text(f"  concat({t.num_heads} × [{t.context.shape[0]}×{t.d_k}]) = [{t.context.shape[0]}×"
                    f"{t.num_heads * t.d_k}] · W_o [{t.w_o.shape[0]}×{t.w_o.shape[1]}] + b_o = attn.out "
                    f"[{t.attn_out.shape[0]}×{t.attn_out.shape[1]}];  attn.out[{t.labels[1] if len(t.labels) > 1 else t.labels[0]}, :4] = "
                    f"{_vec(t.attn_out[min(1, len(t.labels) - 1)])}"))

    # check
    s = st["check"]
    tab = Table(box=box.SIMPLE_HEAD)
    for c, j in (("engine trace name", "left"), ("shape", "left"), ("max |Δ|", "right"),
                 ("max |x|", "right"), ("", "left")):
        tab.add_column(c, justify=j, no_wrap=True)
    for c in t.checks:
        tab.add_row(c.name, "×".join(map(str, c.shape)), f"{c.max_abs_diff:.1e}", f"{c.scale:.3g}",
                    Text("✓ equal" if c.ok else "✗ differs", style="green" if c.ok else "bold red"))
    tab.caption = "Δ = by hand − engine; x = the engine's values"
    out += [Text(s["title"], style="bold underline"),
            Text(s["text"], style="bold green" if t.ok else "bold red"), tab]
    return out


def render_group(t, lang: str = "en", width: int = 120) -> Group:
    return Group(*render(t, lang, width))
