"""Static pictures with matplotlib (Agg backend: no display needed): heatmaps of one head, a
layer's heads, the whole model, the neuron view, the raw/norm/rollout/value-zeroing comparison with
the caveat beside it, selling points and pair attributions. Each function returns a Figure;
``save`` writes PNG or SVG."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from qkv.errors import InputError
from qkv.explain.maps import CAVEAT

FORMATS = ("png", "svg")
CMAP = "Blues"


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _font_for(labels) -> list[str]:
    """Fonts with CJK glyphs when a label needs them (else matplotlib draws empty boxes)."""
    if any(any(ord(c) > 0x2E7F for c in str(s)) for s in labels):
        from matplotlib import font_manager

        names = ("Noto Sans CJK SC", "Noto Sans CJK JP", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
                 "AR PL UMing CN", "Droid Sans Fallback", "SimHei")
        have = {f.name for f in font_manager.fontManager.ttflist}
        if not have & set(names):  # matplotlib's font cache predates the CJK font: add the files once
            for path in font_manager.findSystemFonts():
                if any(k in path.lower() for k in ("wqy", "notosanscjk", "noto-cjk", "droidsansfallback", "uming")):
                    try:
                        font_manager.fontManager.addfont(path)
                    except (OSError, RuntimeError, ValueError):
                        continue
            have = {f.name for f in font_manager.fontManager.ttflist}
        for name in names:
            if name in have:
                return [name, "DejaVu Sans"]
    return ["DejaVu Sans"]


def _draw(ax, hm, labels: bool = True, vmax: float | None = None):
    im = ax.imshow(hm.values, cmap=CMAP, vmin=0.0, vmax=vmax if vmax is not None else max(float(hm.values.max()), 1e-9),
                   aspect="equal", interpolation="nearest")
    if labels:
        fam = _font_for(hm.rows)
        fs = max(5, min(10, int(220 / max(len(hm.cols), 1))))
        ax.set_xticks(range(len(hm.cols)), hm.cols, rotation=60, ha="right", fontsize=fs, fontfamily=fam)
        ax.set_yticks(range(len(hm.rows)), hm.rows, fontsize=fs, fontfamily=fam)
        ax.set_xlabel("attended to (key)", fontsize=8)
        ax.set_ylabel("attending (query)", fontsize=8)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    return im


def heatmap_figure(hm, caveat: bool = True):
    """One map with labelled axes and a colour bar."""
    plt = _plt()
    n = max(len(hm.rows), len(hm.cols))
    size = min(14.0, 2.5 + 0.38 * n)
    fig, ax = plt.subplots(figsize=(size + 1.2, size + (0.9 if caveat else 0.3)), layout="constrained")
    im = _draw(ax, hm)
    fig.colorbar(im, ax=ax, shrink=0.7)
    title = f"{hm.title}\n{hm.name}"
    if hm.hidden_share is not None:
        title += f"   ([CLS]/[SEP] hidden: {float(np.mean(hm.hidden_share)):.0%} of each row went to them)"
    ax.set_title(title, fontsize=9)
    if caveat:
        fig.get_layout_engine().set(rect=(0, 0.08, 1, 0.90))  # room below for the caveat
        fig.text(0.01, 0.005, textwrap.fill(CAVEAT["en"], int(fig.get_figwidth() * 21)), fontsize=6,
                 color="#6b5800", va="bottom")
    return fig


def grid_figure(maps: list, title: str = ""):
    """Small multiples: one row per layer (list of lists) or one layer's heads (list), like bertviz's model view."""
    plt = _plt()
    rows = maps if maps and isinstance(maps[0], list) else [maps]
    nr, nc = len(rows), max(len(r) for r in rows)
    if nr == 1 and nc > 6:  # one layer: 2 rows of heads read better than one long strip
        per = (nc + 1) // 2
        rows = [rows[0][:per], rows[0][per:]]
        nr, nc = 2, per
    fig, axes = plt.subplots(nr, nc, figsize=(1.6 * nc + 0.6, 1.7 * nr + 0.8), squeeze=False, layout="constrained")
    for r, row in enumerate(rows):
        for c in range(nc):
            ax = axes[r][c]
            if c >= len(row):
                ax.axis("off")
                continue
            hm = row[c]
            _draw(ax, hm, labels=False)
            ax.set_title(f"L{hm.layer} H{hm.head}" if hm.head is not None else f"L{hm.layer}", fontsize=7)
    fig.suptitle(title or rows[0][0].title, fontsize=10)
    return fig


def neuron_figure(nv):
    """The neuron view as a static figure: q, each k, q×k, then scores, scaled scores and softmax."""
    plt = _plt()
    n, d = nv.k.shape
    fig, all_axes = plt.subplots(2, 4, figsize=(13, 1.7 + 0.32 * n), layout="constrained",
                                 gridspec_kw={"width_ratios": [d / 8, d / 8, 1.2, 1.6], "height_ratios": [1, n]})
    for ax in all_axes[0, 1:]:
        ax.axis("off")
    fam = _font_for(nv.tokens)
    mqv = float(np.abs(nv.q).max())
    all_axes[0, 0].imshow(nv.q[None], cmap="RdBu_r", vmin=-mqv, vmax=mqv, aspect="auto", interpolation="nearest")
    all_axes[0, 0].set_yticks([0], [f"q “{nv.tokens[nv.query]}”"], fontsize=7, fontfamily=fam)
    all_axes[0, 0].set_xticks([])
    axes = all_axes[1]
    m = float(np.abs(nv.k).max())
    axes[0].imshow(nv.k, cmap="RdBu_r", vmin=-m, vmax=m, aspect="auto", interpolation="nearest")
    axes[0].set_title(f"k vectors ({d} dims)", fontsize=8)
    mq = float(np.abs(nv.qk).max())
    axes[1].imshow(nv.qk, cmap="RdBu_r", vmin=-mq, vmax=mq, aspect="auto", interpolation="nearest")
    axes[1].set_title(f"q × k (element-wise), q = “{nv.tokens[nv.query]}”", fontsize=8)
    for ax in axes[:2]:
        ax.set_yticks(range(n), nv.tokens, fontsize=7, fontfamily=fam)
        ax.set_xticks([])
    axes[2].barh(range(n), nv.scaled, color=["#2a6fb0" if s >= 0 else "#c8553d" for s in nv.scaled])
    axes[2].set_title("q·k / √d", fontsize=8)
    axes[3].barh(range(n), nv.weights, color="#2a6fb0")
    axes[3].set_title("softmax", fontsize=8)
    for ax in axes[2:]:
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_yticks([])
        ax.tick_params(labelsize=7)
    for j, w in enumerate(nv.weights):
        axes[3].text(w, j, f" {w:.2f}", va="center", fontsize=6)
    fig.suptitle(f"neuron view · layer {nv.layer} head {nv.head} · query token “{nv.tokens[nv.query]}”", fontsize=10)
    return fig


def compare_figure(maps, layer: int, head: int | None = None, hide_special: bool = False, level: str = "word"):
    """Raw attention, norm-weighted, value zeroing and rollout of one layer side by side, caveat below."""
    plt = _plt()
    kinds = [("attention", head), ("norm", head), ("value_zeroing", None), ("rollout", None)]
    hms = [maps.heatmap(layer, h, kind=k, hide_special=hide_special, level=level) for k, h in kinds]
    n = len(hms[0].rows)
    s = min(5.0, 1.6 + 0.22 * n)
    fig, axes = plt.subplots(1, 4, figsize=(4 * s + 1, s + 1.6), layout="constrained")
    for ax, hm in zip(axes, hms):
        _draw(ax, hm)
        t = hm.title
        if hm.hidden_share is not None:
            t += f"\n(hidden specials took {float(np.mean(hm.hidden_share)):.0%})"
        ax.set_title(t, fontsize=8)
        ax.set_xlabel("")
        ax.set_ylabel("")
    fig.suptitle(f"“{maps.text}” — layer {layer}: what the weights say vs. what moves", fontsize=10,
                 fontfamily=_font_for([maps.text]))
    fig.get_layout_engine().set(rect=(0, 0.08, 1, 0.90))
    fig.text(0.01, 0.005, textwrap.fill(CAVEAT["en"], int(fig.get_figwidth() * 18)), fontsize=7, color="#6b5800",
             va="bottom")
    return fig


def bars_figure(pairs, title: str, xlabel: str, signed: bool = False):
    plt = _plt()
    words = [w for w, _ in pairs]
    vals = np.array([v for _, v in pairs])
    fig, ax = plt.subplots(figsize=(6.5, 0.9 + 0.3 * len(words)), layout="constrained")
    ax.barh(range(len(words)), vals, color=["#c8553d" if (signed and v < 0) else "#2a6fb0" for v in vals])
    ax.set_yticks(range(len(words)), words, fontfamily=_font_for(words), fontsize=8)
    ax.set_ylim(len(words) - 0.5, -0.5)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_title(title, fontsize=9, fontfamily=_font_for([title]))
    if signed:
        ax.axvline(0, color="#444", lw=0.6)
    return fig


def selling_points_figure(sp):
    label = ("salience: share of the pooled vector drawn from the word (last-layer rollout)" if sp.method == "rollout"
             else f"score by the {sp.method} method (rollout salience in the page and --json)")
    return bars_figure(sp.ranked(), f"selling points · “{sp.text}”", label, signed=sp.method != "rollout")


def pair_figure(pa):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.2 + 0.3 * max(len(pa.query_words.words), len(pa.title_words.words))),
                             layout="constrained")
    for ax, ws, name in ((axes[0], pa.query_words, "query"), (axes[1], pa.title_words, "title")):
        v = ws.scores
        ax.barh(range(len(v)), v, color=["#c8553d" if x < 0 else "#2a6fb0" for x in v])
        ax.set_yticks(range(len(v)), ws.words, fontfamily=_font_for(ws.words), fontsize=8)
        ax.set_ylim(len(v) - 0.5, -0.5)
        ax.axvline(0, color="#444", lw=0.6)
        ax.set_title(f"{name}: “{ws.text}”", fontsize=9, fontfamily=_font_for([ws.text]))
        ax.set_xlabel("similarity drop without the word (" + pa.method + ")", fontsize=8)
    fig.suptitle(f"cosine similarity {pa.similarity:.3f}: blue words raised it, red lowered it", fontsize=10)
    return fig


def match_figure(e):
    """A search match explanation (``qkv.search.explain.MatchExplanation``) at word level: left,
    each query-word × title-word pair's exact part of the cosine; right, the interaction
    (``contrast``: who met whom, the grid's row and column pulls removed)."""
    plt = _plt()
    rows = [w.text for w in e.query_words if w.kind == "word"]
    cols = [w.text for w in e.title_words if w.kind == "word"]
    wg, ct = e.word_grid(), e.contrast()
    c = e.context()
    fam = _font_for(rows + cols)
    w = min(9.0, 1.6 + 0.9 * len(cols))
    fig, axes = plt.subplots(1, 2, figsize=(2 * w, 1.9 + 0.5 * len(rows)), layout="constrained")
    lim = float(np.abs(ct).max()) or 1e-12
    for ax, m, cmap, vmin, vmax, name, fmt in (
            (axes[0], wg, CMAP, 0.0, float(wg.max()) or 1e-12, "exact parts of the cosine", ".4f"),
            (axes[1], ct / lim, "RdBu", -1.0, 1.0, "interaction (who met whom, scaled to ±1)", "+.2f")):
        ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right", fontfamily=fam, fontsize=9)
        ax.set_yticks(range(len(rows)), rows, fontfamily=fam, fontsize=9)
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(j, i, format(m[i, j], fmt), ha="center", va="center", fontsize=8,
                        color="white" if abs(m[i, j]) > 0.6 * max(abs(vmin), vmax) else "black")
        ax.set_title(name, fontsize=9)
    pre = (f"; embedded as “{c['query_prefix']}…” / “{c['passage_prefix']}…”"
           if c["query_prefix"] or c["passage_prefix"] else "")
    fig.suptitle(f"cos {e.cosine:.4f} = word pairs {c['words']:.4f} + prefix tokens {c['prefix']:.4f} + "
                 f"special tokens {c['special']:.4f}{pre}", fontsize=9)
    return fig


def save(fig, path: str | Path, fmt: str | None = None) -> Path:
    path = Path(path)
    fmt = fmt or path.suffix.lstrip(".") or "png"
    if fmt not in FORMATS:
        raise InputError(f"unknown picture format {fmt!r}; use one of {', '.join(FORMATS)} (or html)")
    path = path.with_suffix("." + fmt)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=fmt, dpi=130)
    _plt().close(fig)
    return path


def write_all(ex, out_dir: str | Path, fmt: str = "png", hide_special: bool = False, level: str = "token") -> list[Path]:
    """Every picture of an ``Explanation`` into ``out_dir``: the chosen head, its layer's heads,
    the whole model, the neuron view, the comparison, selling points and (with a query) the pair."""
    out = Path(out_dir)
    m, L, H = ex.maps, ex.layer, ex.head
    q = 1 if len(m.tokens) > 2 else 0
    files = [
        save(heatmap_figure(m.heatmap(L, H, hide_special=hide_special, level=level)), out / f"head_L{L}_H{H}", fmt),
        save(grid_figure(m.grid(L, hide_special=hide_special, level=level),
                         f"layer {L}: every head (rows attend to columns)"), out / f"layer_L{L}", fmt),
        save(grid_figure(m.all_layers(hide_special=hide_special, level=level),
                         "all layers × heads (rows attend to columns)"), out / "model", fmt),
        save(neuron_figure(m.neuron(L, H, q)), out / f"neuron_L{L}_H{H}_q{q}", fmt),
        save(compare_figure(m, L, H, hide_special=hide_special, level="word"), out / f"compare_L{L}", fmt),
        save(heatmap_figure(m.heatmap(m.num_layers - 1, kind="rollout", hide_special=hide_special, level=level)),
             out / "rollout", fmt),
        save(selling_points_figure(ex.selling_points), out / "selling_points", fmt),
    ]
    if ex.occlusion is not None:
        files.append(save(bars_figure(ex.occlusion.ranked(), "leave-one-word-out occlusion", ex.occlusion.measure),
                          out / "occlusion", fmt))
    if ex.pair is not None:
        files.append(save(pair_figure(ex.pair), out / "pair_occlusion", fmt))
        files.append(save(pair_figure(ex.pair_value_zeroing), out / "pair_value_zeroing", fmt))
    return files
