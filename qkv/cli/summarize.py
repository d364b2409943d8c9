"""``qkv summarize`` and ``qkv eval summarize``: review summaries under a token budget."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from qkv.cli._common import console, load_encoder, print_json, progress_bars

MODEL_OPT = typer.Option("--model", "-m", help="Model directory, packaged name or hub id (default: all-MiniLM-L6-v2 for English "
                         "reviews, multilingual-e5-small for Chinese or mixed ones; qkv.model.default_model).")
TOKENIZER_HELP = "Tokenizer the budget is counted in: cl100k (GPT-4), o200k (GPT-4o) or model (the encoder's own)."


def _progress(labels: dict[str, str]):
    """Bars on stderr while a terminal watches, cleared when done (stdout stays clean for --json)."""
    return progress_bars(labels, transient=True, quiet_off_terminal=True)


def _budgets(text: str) -> list[int]:
    from qkv.errors import InputError

    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--budget {text!r}: give whole numbers separated by commas, e.g. 40,75,150") from None
    if not out or any(b < 1 for b in out):
        raise InputError(f"--budget {text!r}: budgets must be whole numbers ≥ 1")
    return out


def _show(summary, product_id: str, many: bool, model: str) -> None:
    from rich.panel import Panel
    from rich.table import Table

    title = f"summary of {product_id}" if many else "summary"
    console.print(Panel(summary.text or "(empty)", title=title, title_align="left", border_style="green"))
    table = Table(show_edge=False, pad_edge=False)
    for col, just in (("#", "right"), ("score", "right"), ("review", "right"), ("rating", "right"),
                      ("tokens", "right"), ("sentence", "left")):
        table.add_column(col, justify=just, overflow="fold")
    for s in summary.sentences:
        rating = "" if s.rating is None else f"{s.rating:g}"
        table.add_row(str(s.rank), f"{s.score:.4f}", str(s.review + 1), rating, str(s.tokens), s.shown or s.text)
    console.print(table)
    console.print(f"[bold]{summary.tokens_before:,}[/] → [bold]{summary.tokens_after}[/] {summary.tokenizer} tokens "
                  f"(budget {summary.budget}) · saving [bold green]{summary.saving:.1f}%[/] · "
                  f"{summary.n_reviews} reviews, {summary.n_sentences} sentences · {model}", highlight=False)
    for note in summary.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    if summary.points is not None:
        for side, title in (("praise", "praise"), ("complaints", "complaints")):
            console.print(f"[bold]{title}[/] (what several reviews say)", highlight=False)
            if not summary.points[side]:
                console.print("  (none made by two or more reviews)", highlight=False)
            for pt in summary.points[side]:
                console.print(f"  {pt.label} · {pt.count} reviews · “{pt.example}”", highlight=False)


def register(app: typer.Typer) -> None:
    from qkv.cli import eval_app

    @app.command()
    def summarize(
        file: Annotated[Path, typer.Argument(help="Reviews: text (one per line, or blank-line separated), "
                                                  "CSV/TSV or JSON lines with a review column, or FewSum layout.")],
        budget: Annotated[int, typer.Option("--budget", "-b", help="Hard limit on the summary's tokens.")] = 75,
        tokenizer: Annotated[str, typer.Option("--tokenizer", "-t", help=TOKENIZER_HELP)] = "cl100k",
        order: Annotated[str, typer.Option(help="Sentence order: original (as in the reviews) or score.")] = "original",
        as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
        allow_cut: Annotated[bool, typer.Option("--allow-cut", help="If every sentence is over the budget, "
                                                "cut the best one to fit instead of failing.")] = False,
        column: Annotated[Optional[str], typer.Option(help="Review column of a CSV/JSON file.")] = None,
        rating_column: Annotated[Optional[str], typer.Option(help="Rating column (default: rating, stars, "
                                                             "score, overall or label if present).")] = None,
        group: Annotated[Optional[str], typer.Option(help="Column naming the product: one summary per value.")] = None,
        product: Annotated[Optional[str], typer.Option(help="Summarise only this product (FewSum group_id or "
                                                       "--group value).")] = None,
        encoding: Annotated[str, typer.Option(help="Text encoding of FILE.")] = "utf-8",
        model: Annotated[Optional[str], MODEL_OPT] = None,
        threads: Annotated[Optional[int], typer.Option(help="Encoder threads (default QKV_THREADS or 1).")] = None,
        points: Annotated[bool, typer.Option("--points", help="Also list what several reviewers say, with how "
                                             "many reviews say it (praise and complaints).")] = False,
    ):
        """Pick the review sentences that best represent what reviewers say, within a hard token budget."""
        from qkv.errors import InputError
        from qkv.summarize import Params, get_counter, prepare, read_reviews, select

        products = read_reviews(file, column=column, rating_column=rating_column, group_column=group,
                                encoding=encoding)
        if product is not None:
            products = [p for p in products if p.id == product]
            if not products:
                raise InputError(f"{file} has no product {product!r}")
        if budget < 1:
            raise InputError(f"--budget must be at least 1, got {budget}")
        get_counter(tokenizer, encoder=object()) if tokenizer != "model" else None  # fail fast on a bad name
        if order not in ("original", "score"):
            raise InputError(f"--order must be original or score, got {order!r}")
        enc = load_encoder(model, threads, [r.text for p in products for r in p.reviews])
        counter = get_counter(tokenizer, enc)
        params = Params()
        results = []
        for p in products:
            with _progress({"encode": f"embedding sentences of {p.id}"}) as progress:
                doc = prepare(list(p.reviews), encoder=enc, params=params, progress=progress)
            results.append((p, select(doc, budget, counter, params, order=order, allow_cut=allow_cut, points=points)))
        if as_json:
            print_json({"model": enc.name, "file": str(file),
                        "summaries": [{"product": p.id, **s.to_dict()} for p, s in results]})
            return
        for p, s in results:
            _show(s, p.id, len(results) > 1, enc.name)

    @eval_app.command("summarize")
    def eval_summarize(
        data: Annotated[Path, typer.Option("--data", help="FewSum-layout file, or a folder of them "
                                                          "(e.g. ../shared/data/summaries/fewsum_amazon).")],
        budget: Annotated[str, typer.Option("--budget", "-b", help="Budgets, comma separated.")] = "40,75,150",
        tokenizer: Annotated[str, typer.Option("--tokenizer", "-t", help=TOKENIZER_HELP)] = "cl100k",
        rouge_tokenizer: Annotated[str, typer.Option(help="default (rouge-score's, a-z0-9 only) or unicode "
                                                          "(keeps Chinese and accented letters).")] = "default",
        systems: Annotated[str, typer.Option(help="Comma-separated systems.")] =
            "qkv,lead,random,lexrank,textrank,centroid,oracle",
        seeds: Annotated[int, typer.Option(help="Random baseline: mean over this many seeds.")] = 5,
        limit: Annotated[Optional[int], typer.Option(help="Only the first N products.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the table as JSON.")] = False,
        model: Annotated[Optional[str], MODEL_OPT] = None,
        threads: Annotated[Optional[int], typer.Option(help="Encoder threads (default QKV_THREADS or 1).")] = None,
    ):
        """ROUGE-1/2/L F1 of qkv and baselines (lead, random, LexRank, TextRank, TF-IDF centroid, oracle,
        oracle-clause) per budget."""
        from rich.table import Table

        from qkv.errors import InputError
        from qkv.summarize import Params
        from qkv.summarize.evaluate import SYSTEMS, evaluate, load_products, prepare_all

        budgets = _budgets(budget)
        names = [s.strip() for s in systems.split(",") if s.strip()]
        for s in names:
            if s not in SYSTEMS:
                raise InputError(f"unknown system {s!r}; choose from {', '.join(SYSTEMS)}")
        if seeds < 1:
            raise InputError("--seeds must be at least 1")
        if not data.exists():
            raise InputError(f"{data}: no such file or folder")
        products = load_products(data)
        if limit is not None:
            products = products[:max(1, limit)]
        enc = load_encoder(model, threads, [r.text for p in products for r in p.reviews])
        params = Params()
        with _progress({"encode": "embedding sentences", "score": "scoring systems"}) as progress:
            docs = prepare_all(products, enc, params, progress=progress)
            n_sent = sum(d.n for d in docs)
            result = evaluate(products, budgets, tokenizer=tokenizer, rouge_tokenizer=rouge_tokenizer,
                              systems=names, encoder=enc, params=params, seeds=seeds, docs=docs,
                              progress=progress)
        if as_json:
            print_json({"data": str(data), "model": enc.name, "sentences": n_sent, **result.to_dict()})
            return
        table = Table(title=f"ROUGE F1 ×100 · {result.n_products} products · {n_sent} sentences · "
                            f"{result.tokenizer} budgets · rouge tokenizer {result.rouge_tokenizer} · {enc.name}")
        table.add_column("system")
        for b in budgets:
            for m in ("R-1", "R-2", "R-L"):
                table.add_column(f"{m}@{b}", justify="right")
        for s in names:
            cells = []
            for b in budgets:
                row = next(r for r in result.rows if r["system"] == s and r["budget"] == b)
                cells += [f"{row['rouge1']:.2f}", f"{row['rouge2']:.2f}", f"{row['rougeL']:.2f}"]
            label = {"random": f"random ({seeds} seeds)", "centroid": "TF-IDF centroid",
                     "oracle": "oracle (reads refs)", "oracle-clause": "oracle, clauses (reads refs)"}.get(s, s)
            table.add_row(label, *cells, style="bold" if s == "qkv" else None)
        console.print(table)
