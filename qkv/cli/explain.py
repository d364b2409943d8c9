"""``qkv tour`` and ``qkv explain``: see attention on your own titles (faces over ``qkv.explain``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from qkv.cli._common import console, load_encoder, print_json

MODEL_OPT = typer.Option("--model", "-m", help="Short name (minilm, multilingual-e5-small; see `qkv models`), "
                         "model directory or hub id (default: all-MiniLM-L6-v2 for English text, multilingual-e5-small "
                         "for Chinese or mixed text; qkv.model.default_model).")
LAYER_OPT = typer.Option("--layer", "-l", help="Layer (default: the tour's instructive one; negative counts from the end).")
HEAD_OPT = typer.Option("--head", help="Head within the layer (default: the tour's instructive one).")
TOP = 25  # rows of word tables printed (everything is in --json)
THREADS_OPT = typer.Option(help="Encoder threads (default QKV_THREADS or 1).")
TRUNC_OPT = typer.Option(help="Explain only the first 512 tokens of a longer text instead of refusing it.")


def _slug(text: str, n: int) -> str:
    s = re.sub(r"[^\w]+", "-", text.lower(), flags=re.UNICODE).strip("-")[:40]
    return f"{n:03d}-{s or 'title'}"


def _print_explanation(ex, hide_special: bool, level: str) -> None:
    import numpy as np
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from qkv.explain.maps import CAVEAT

    m = ex.maps
    console.print(f"[bold]{escape(ex.text)}[/]  [dim]{m.model} · {len(m.tokens)} tokens · layer {ex.layer} head {ex.head}[/]")
    sp = ex.selling_points
    t = Table(title=f"Selling points (ranked by {sp.method})", title_justify="left")
    for c, j in (("#", "right"), ("word", "left"), ("score", "right"), ("", "left"), ("rollout", "right"),
                 ("occlusion", "right"), ("value zeroing", "right")):
        t.add_column(c, justify=j)
    # the same word in the three methods is found by its first character in the text
    occ = None if ex.occlusion is None else dict(zip(ex.occlusion.starts, ex.occlusion.scores))
    vz = None if ex.value_zeroing is None else dict(zip(ex.value_zeroing.starts, ex.value_zeroing.scores))
    sc = sp.score
    lo = min(0.0, float(sc.min())) if len(sc) else 0.0
    top = max([float(sc.max()) - lo if len(sc) else 0.0, 1e-12])
    for r, i in enumerate(np.argsort(-sc, kind="stable")[:TOP], 1):
        s = float(sc[i])
        t.add_row(str(r), Text(sp.words[i]), f"{s:.3f}", "█" * max(1, round(12 * (s - lo) / top)),
                  f"{float(sp.salience[i]):.3f}",
                  "—" if occ is None else f"{occ[sp.starts[i]]:.4f}", "—" if vz is None else f"{vz[sp.starts[i]]:.4f}")
    from qkv.explain.salience import METHODS

    t.caption = ((f"top {TOP} of {len(sp.words)} words; " if len(sp.words) > TOP else "")
                 + f"score = {METHODS[sp.method]}; rollout = salience, mean over output tokens of last-layer rollout, "
                 f"summed per word, rescaled over content words ([CLS]/[SEP], bare ▁ and punctuation took "
                 f"{sp.special_share:.0%}); occlusion = 1 − cos(title, title without word); "
                 "value zeroing = 1 − cos(title, title with the word's values zeroed)")
    console.print(t)

    raw = m.heatmap(ex.layer, ex.head, hide_special=hide_special, level=level)
    nw = m.heatmap(ex.layer, ex.head, kind="norm", hide_special=hide_special, level=level)
    t = Table(title=f"Who attends to whom · layer {ex.layer} head {ex.head} · {level}s", title_justify="left")
    t.add_column("query")
    t.add_column("attention weights (top 2)")
    t.add_column("norm-weighted ‖α·f(x)‖ share (top 2)")
    for i, row in enumerate(raw.rows):
        t.add_row(Text(row), Text(", ".join(f"{c} {v:.2f}" for c, v in raw.top(i))),
                  Text(", ".join(f"{c} {v:.2f}" for c, v in nw.top(i))))
    if raw.hidden_share is not None:
        t.caption = f"[CLS]/[SEP] hidden: they took {raw.hidden_share.mean():.0%} of the raw weight, " \
                    f"{nw.hidden_share.mean():.0%} of the norm-weighted share"
    console.print(t)
    if ex.pair is not None:
        for pa in (ex.pair, ex.pair_value_zeroing):
            t = Table(title=f"Query “{pa.query}” · similarity {pa.similarity:.3f} · {pa.method}", title_justify="left")
            t.add_column("side")
            t.add_column("word")
            t.add_column("similarity drop without it", justify="right")
            for side, ws in (("query", pa.query_words), ("title", pa.title_words)):
                for w, s in ws.ranked():
                    t.add_row(side, Text(w), Text(f"{s:+.4f}", style="green" if s > 0 else "red"))
            console.print(t)
    if ex.note:
        console.print(Text(ex.note, style="yellow"))
    console.print(Text("Caveat: " + CAVEAT["en"], style="yellow"))


def _match(enc, query: str, title: str):
    """The query × title grid as search explains a result: embedded with the model's own prefixes
    (E5: "query: " / "passage: ") as an index of this model embeds them."""
    from qkv.search.explain import explain_titles

    c = enc.config
    return explain_titles(enc, query, [title], query_prefix=c.query_prefix, passage_prefix=c.passage_prefix)[0]


def _print_match(e) -> None:
    """Word × word parts of the cosine, the interaction that says who met whom, and what the prefix
    and special tokens took."""
    import numpy as np
    from rich import box
    from rich.table import Table
    from rich.text import Text

    c = e.context()
    wg, ct = e.word_grid(), e.contrast()
    rows = [w.text for w in e.query_words if w.kind == "word"]
    cols = [w.text for w in e.title_words if w.kind == "word"]
    pre = (f" Embedded as “{c['query_prefix']}…” / “{c['passage_prefix']}…”, as the index embeds them."
           if c["query_prefix"] or c["passage_prefix"] else "")
    t = Table(title=f"Match grid (as search explains it) · cos {e.cosine:.4f} = Σ parts {e.parts_sum:.4f}",
              title_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("query word \\ title word")
    for w in cols:
        t.add_column(Text(w), justify="right")
    top = np.abs(ct).max() or 1.0
    for i, r in enumerate(rows):
        cells = []
        for j in range(len(cols)):
            best = ct[i, j] == ct[:, j].max()  # the query word this title word answers
            cells.append(Text(f"{wg[i, j]:.4f} {ct[i, j] / top:+.2f}", style="bold green" if best and ct[i, j] > 0 else ""))
        t.add_row(Text(r), *cells)
    t.caption = (f"each cell: the word pair's exact part of the cosine, then its interaction (who met whom, "
                 f"scaled to ±1; bold: the query word the title word answers). Word pairs {c['words']:.4f} + "
                 f"prefix tokens {c['prefix']:.4f} + special tokens {c['special']:.4f} = {e.parts_sum:.4f}.{pre}")
    console.print(t)


def _write(ex, out: Path, fmt: str, hide_special: bool, level: str, stem: str | None = None) -> list[Path]:
    """The report of one explanation: an HTML page, or a folder of pictures."""
    if fmt == "html":
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{stem or 'report'}.html"
        path.write_text(ex.to_html(), encoding="utf-8")
        return [path]
    from qkv.explain.figures import write_all

    return write_all(ex, out / stem if stem else out, fmt, hide_special=hide_special, level=level)


def _points_options(enc, catalog: Path | None, method: str | None, terms: Path | None) -> dict:
    """How ``qkv explain`` ranks selling points: the catalog, method and term-weight head chosen."""
    from qkv.errors import InputError
    from qkv.explain.salience import METHODS

    if method is not None and method not in METHODS:
        raise InputError(f"--method {method!r} is not available; use one of {', '.join(METHODS)}")
    out: dict = {"method": method}
    if catalog is not None:
        from qkv.cli._common import progress_bars
        from qkv.explain.points import load_catalog

        with progress_bars({"encode": "embedding the catalog"}, transient=True) as progress:
            out["catalog"] = load_catalog(catalog, enc, progress=progress)
    if terms is not None:
        from qkv.explain.terms import TermHead

        out["term_head"] = TermHead.load(terms, enc)
    return out


def register(app: typer.Typer) -> None:
    @app.command()
    def tour(
        text: Annotated[str, typer.Argument(help="A product title or sentence, e.g. \"Nike Air Max 270 Men's Running Shoes\".")],
        layer: Annotated[Optional[int], LAYER_OPT] = None,
        head: Annotated[Optional[int], HEAD_OPT] = None,
        lang: Annotated[str, typer.Option("--lang", help="Language of the explanations: en or zh.")] = "en",
        model: Annotated[Optional[str], MODEL_OPT] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the tour's arrays and steps as JSON.")] = False,
        truncate: Annotated[bool, TRUNC_OPT] = False,
        threads: Annotated[Optional[int], THREADS_OPT] = None,
        ask: Annotated[Optional[tuple[str, str]], typer.Option(
            "--ask", help="Two words A B of the text: how much does A attend to B? (default: the first two words)")] = None,
    ):
        """Walk the five steps of attention on the real model, by hand, and check them against the engine."""
        from qkv.errors import InputError
        from qkv.explain.tour import tour as run_tour

        if lang not in ("en", "zh"):
            raise InputError(f"--lang {lang!r} is not available; use en or zh")
        enc = load_encoder(model, threads, [text])
        t = run_tour(enc, text, layer, head, truncate=truncate, ask=ask)
        if as_json:
            print_json(t.to_dict(lang))
            return
        from qkv.cli.tour_view import render

        for r in render(t, lang, console.width):
            console.print(r)
        if not t.ok:
            raise typer.Exit(1)

    @app.command()
    def explain(
        text: Annotated[Optional[str], typer.Argument(help="The title to explain (or use --file).")] = None,
        layer: Annotated[Optional[int], LAYER_OPT] = None,
        head: Annotated[Optional[int], HEAD_OPT] = None,
        query: Annotated[Optional[str], typer.Option("--query", "-q", help="Also explain this query's similarity to the title.")] = None,
        out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Directory for pictures / pages (default ./qkv-explain when --format or --file is given).")] = None,
        fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="png, svg or html.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print everything as JSON, keyed by the engine's trace names.")] = False,
        file: Annotated[Optional[Path], typer.Option("--file", help="A text file with one title per line: one report each and an index page.")] = None,
        hide_special: Annotated[bool, typer.Option("--hide-special/--show-special", help="Hide [CLS]/[SEP] in maps (they soak up weight).")] = False,
        level: Annotated[str, typer.Option(help="token or word (sub-word pieces merged).")] = "token",
        model: Annotated[Optional[str], MODEL_OPT] = None,
        truncate: Annotated[bool, TRUNC_OPT] = False,
        threads: Annotated[Optional[int], THREADS_OPT] = None,
        catalog: Annotated[Optional[Path], typer.Option(help="Catalog (CSV or JSON lines, as `qkv index` reads it): rank "
                                                        "selling points by what the title shares with its nearest products.")] = None,
        method: Annotated[Optional[str], typer.Option(help="Rank selling points by: title (default), catalog (with "
                                                      "--catalog, its default), learned (with --terms), query (with --catalog: the query side of attention), rollout.")] = None,
        terms: Annotated[Optional[Path], typer.Option(help="A term-weight head from `qkv terms train`: rank selling "
                                                      "points by how likely shoppers search each word.")] = None,
    ):
        """Attention maps, rollout, norm-weighted maps, value zeroing, occlusion and selling points for a title."""
        from qkv.errors import InputError
        from qkv.explain.report import explain as run_explain

        if fmt is not None and fmt not in ("png", "svg", "html"):
            raise InputError(f"--format {fmt!r} is not available; use png, svg or html")
        if level not in ("token", "word"):
            raise InputError(f"--level {level!r} is not available; use token or word")
        if (text is None) == (file is None):
            raise InputError("give one TEXT to explain, or --file with one title per line (not both)")
        titles = None
        if file is not None:
            if not file.is_file():
                raise InputError(f"--file {file} does not exist or is not a file")
            titles = [(no, ln.strip()) for no, ln in enumerate(file.read_text(encoding="utf-8").splitlines(), 1)
                      if ln.strip()]
            if not titles:
                raise InputError(f"--file {file} has no titles (one per line expected)")
        if model is None and terms is not None:  # a stored model wins: the term head's own
            from qkv.explain.terms import TermHead

            model = TermHead.load(terms).model
        enc = load_encoder(model, threads, [text] if titles is None else [t for _, t in titles])
        points = _points_options(enc, catalog, method, terms)

        if titles is None:
            ex = run_explain(enc, text, layer, head, query=query, truncate=truncate, **points)
            match = _match(enc, query, text) if query else None
            if as_json:
                print_json({**ex.to_dict(), **({"match": match.to_json()} if match else {})})
                return
            if fmt is None and out is None:
                _print_explanation(ex, hide_special, level)
                if match:
                    _print_match(match)
                return
            files = _write(ex, out or Path("qkv-explain"), fmt or "png", hide_special, level)
            if match and (fmt or "png") != "html":
                from qkv.explain.figures import match_figure, save

                files.append(save(match_figure(match), (out or Path("qkv-explain")) / "match", fmt or "png"))
            _print_explanation(ex, hide_special, level)
            if match:
                _print_match(match)
            console.print(f"wrote {len(files)} file(s) to {files[0].parent}: " + ", ".join(f.name for f in files))
            return

        # batch: one report per title, an index page, a progress bar
        import json

        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from qkv.errors import QkvError
        from qkv.explain.html import index_page

        out = out or Path("qkv-explain")
        fmt = fmt or "html"
        out.mkdir(parents=True, exist_ok=True)
        entries, failed = [], []
        with Progress(TextColumn("explaining"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console) as prog:
            task = prog.add_task("titles", total=len(titles))
            for n, (line_no, title) in enumerate(titles, 1):
                stem = _slug(title, n)
                try:
                    ex = run_explain(enc, title, layer, head, query=query, truncate=truncate, **points)
                except QkvError as e:  # one bad line must not stop the batch
                    failed.append((line_no, title, str(e)))
                    prog.advance(task)
                    continue
                if as_json:
                    (out / f"{stem}.json").write_text(json.dumps(ex.to_dict(), ensure_ascii=False), encoding="utf-8")
                files = _write(ex, out, fmt, hide_special, level, stem)
                href = files[0].name if fmt == "html" else f"{stem}/{[f for f in files if f.stem.startswith('compare')][0].name}"
                entries.append({"n": n, "text": title, "href": href, "tokens": len(ex.maps.tokens),
                                "top": [w for w, _ in ex.selling_points.ranked()[:3]]})
                prog.advance(task)
        (out / "index.html").write_text(index_page(entries, enc.name), encoding="utf-8")
        console.print(f"wrote {len(entries)} report(s) and {out / 'index.html'}")
        for n, title, msg in failed:
            console.print(f"[red]skipped line {n}[/] ({title[:40]}…): {msg}")
