"""``qkv eval selling-points``: do a title's selling points match what shoppers search (faces over
``qkv.explain.evaluate_points``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from qkv.cli._common import console, load_encoder, print_json, progress_bars

MODEL_OPT = typer.Option("--model", "-m", help="Short name (minilm, multilingual-e5-small; see `qkv models`), "
                         "model directory or hub id (default all-MiniLM-L6-v2).")
THREADS_OPT = typer.Option(help="Encoder threads (default QKV_THREADS or 1).")


def _judged(corpus: Path, queries: Path, qrels: Path):
    from qkv.explain.evaluate_points import judged_titles, load_corpus_titles
    from qkv.search.evaluate import load_qrels, load_queries

    return judged_titles(load_corpus_titles(corpus), load_queries(queries), load_qrels(qrels))


def register(app: typer.Typer) -> None:
    from qkv.cli import eval_app

    @eval_app.command("selling-points")
    def eval_selling_points(
        corpus: Annotated[Path, typer.Option(help="BEIR corpus.jsonl (the catalog: every title).")],
        queries: Annotated[Path, typer.Option(help="BEIR queries.jsonl.")],
        qrels: Annotated[Path, typer.Option(help="BEIR qrels .tsv (query-id, corpus-id, score 1–3).")],
        sample: Annotated[Optional[int], typer.Option(help="Score this many titles drawn at random (default: all).")] = None,
        seed: Annotated[int, typer.Option(help="Seed of the title sample.")] = 0,
        method: Annotated[Optional[list[str]], typer.Option(
            "--method", help="Selling-points method(s) to score: catalog (the corpus is the catalog), title, "
                             "learned (needs --head), rollout. Default: catalog, title and rollout.")] = None,
        random_seeds: Annotated[int, typer.Option(help="Random orders averaged for the random baseline.")] = 10,
        as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
        model: Annotated[Optional[str], MODEL_OPT] = None,
        threads: Annotated[Optional[int], THREADS_OPT] = None,
    ):
        """Average precision of the words shoppers search among a title's ranked selling points,
        qkv beside random, IDF, DF, title order and reverse title order."""
        from rich.table import Table

        from qkv.errors import InputError
        from qkv.explain.evaluate_points import evaluate, points_ranker
        from qkv.explain.salience import METHODS

        if random_seeds < 1:
            raise InputError("--random-seeds must be at least 1")
        methods = method or ["catalog", "title", "rollout"]
        for m in methods:
            if m not in METHODS:
                raise InputError(f"--method {m!r} is not available; use one of {', '.join(METHODS)}")
        judged = _judged(corpus, queries, qrels)
        enc = load_encoder(model, threads)
        with progress_bars({"titles": "scoring titles", "encode": "embedding the catalog"}) as progress:
            cat = None
            if "catalog" in methods:
                from qkv.explain.points import load_catalog

                cat = load_catalog(corpus, enc, progress=progress)
            rankers = {f"qkv selling points ({m}), {enc.name}": points_ranker(enc, m, catalog=cat) for m in methods}
            res = evaluate(judged, rankers, n=sample, seed=seed, random_seeds=random_seeds, progress=progress)
        if as_json:
            print_json(res.to_json())
            return
        t = Table(title=f"Selling points vs shopper words · {res.titles:,} of {res.eligible:,} judged titles"
                  + (f" (random sample, seed {seed})" if res.titles < res.eligible else ""), title_justify="left")
        t.add_column("ranking")
        t.add_column("AP", justify="right")
        for name, ap in res.rows:
            t.add_row(name, f"{ap:.4f}")
        t.caption = (f"random: {res.random_range[0]:.4f}–{res.random_range[1]:.4f} over {res.random_seeds} seeds; "
                     "skipped: " + (", ".join(f"{v:,} {k}" for k, v in res.skipped.items()) or "none"))
        console.print(t)
