"""``qkv eval selling-points`` (do a title's selling points match what shoppers search) and
``qkv terms train`` / ``qkv terms advise`` / ``qkv terms adapt`` (a term-weight head learned from the
seller's own search terms, the words a title lacks, and an index's query vectors fitted to the
terms): faces over ``qkv.explain.evaluate_points``, ``qkv.explain.terms`` and ``qkv.search.adapter``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from qkv.cli._common import console, load_encoder, print_json, progress_bars

MODEL_OPT = typer.Option("--model", "-m", help="Short name (minilm, multilingual-e5-small; see `qkv models`), "
                         "model directory or hub id (default all-MiniLM-L6-v2).")
THREADS_OPT = typer.Option(help="Encoder threads (default QKV_THREADS or 1).")


HALF_HELP = ("all, a or b: use the queries of one half (split by query id, as `qkv eval search --half`): "
             "train a head on a, evaluate on b")


# A search-term report's columns, read the same way by `qkv terms train` and `qkv terms adapt`
QueryColumn = Annotated[Optional[str], typer.Option(help="The report's query column (default: guessed).")]
ProductColumn = Annotated[Optional[str], typer.Option(help="The report's product column (default: guessed).")]
WeightColumn = Annotated[Optional[str], typer.Option(help="The report's clicks/orders column (default: guessed; "
                                                     "none: every row counts 1).")]


def _judged(corpus: Path, queries: Path, qrels: Path, half: str):
    from qkv.explain.evaluate_points import judged_titles, load_corpus_titles
    from qkv.search.evaluate import in_half, load_qrels, load_queries

    q = {k: v for k, v in load_queries(queries).items() if in_half(k, half)}
    return judged_titles(load_corpus_titles(corpus), q, load_qrels(qrels))


def _check_half(half: str) -> None:
    from qkv.errors import InputError

    if half not in ("all", "a", "b"):
        raise InputError(f"--half {half!r} is not available; use all, a or b")


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
            "--method", help="Selling-points method(s) to score: catalog (the corpus is the catalog), title, query, "
                             "learned (needs --terms), rollout. Default: catalog, title and rollout (and learned with --terms).")] = None,
        random_seeds: Annotated[int, typer.Option(help="Random orders averaged for the random baseline.")] = 10,
        terms: Annotated[Optional[Path], typer.Option(help="A term-weight head (`qkv terms train`): also score "
                                                      "the learned method.")] = None,
        half: Annotated[str, typer.Option(help=HALF_HELP)] = "all",
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
        _check_half(half)
        methods = method or (["learned"] if terms else []) + ["catalog", "title", "rollout"]
        for m in methods:
            if m not in METHODS:
                raise InputError(f"--method {m!r} is not available; use one of {', '.join(METHODS)}")
        if "learned" in methods and terms is None:
            raise InputError("--method learned needs --terms HEAD.npz (train one with `qkv terms train`)")
        judged = _judged(corpus, queries, qrels, half)
        enc = load_encoder(model, threads)
        head = None
        if terms is not None:
            from qkv.explain.terms import TermHead

            head = TermHead.load(terms, enc)
        with progress_bars({"titles": "scoring titles", "encode": "embedding the catalog"}) as progress:
            cat = None
            if "catalog" in methods or "query" in methods or (head is not None and head.needs_catalog):
                from qkv.explain.points import load_catalog

                cat = load_catalog(corpus, enc, progress=progress)
            rankers = {f"qkv selling points ({m}), {enc.name}": points_ranker(enc, m, catalog=cat, head=head)
                       for m in methods}
            res = evaluate(judged, rankers, n=sample, seed=seed, random_seeds=random_seeds, progress=progress)
        if as_json:
            print_json(res.to_json())
            return
        t = Table(title=f"Selling points vs shopper words · {res.titles:,} of {res.eligible:,} judged titles"
                  + (f" (random sample, seed {seed})" if res.titles < res.eligible else "")
                  + ("" if half == "all" else f" · queries of half {half}"), title_justify="left")
        t.add_column("ranking")
        t.add_column("AP", justify="right")
        t.add_column("first row's gain ± SE", justify="right")
        t.add_column("p", justify="right")
        vs = {n: (d, se, p) for n, d, se, p in res.against}
        for name, ap in res.rows:
            d, se, p = vs.get(name, (None, None, None))
            t.add_row(name, f"{ap:.4f}", "" if d is None else f"{d:+.4f} ± {se:.4f}", "" if p is None else f"{p:.4f}")
        t.caption = (f"random: {res.random_range[0]:.4f}–{res.random_range[1]:.4f} over {res.random_seeds} seeds; "
                     "skipped: " + (", ".join(f"{v:,} {k}" for k, v in res.skipped.items()) or "none")
                     + "; gain: the first row's AP minus the row's, paired over the titles (p: sign-flip randomization test)")
        console.print(t)

    terms_app = typer.Typer(help="Term weights learned from your search terms: which title words shoppers search.",
                            no_args_is_help=True)
    app.add_typer(terms_app, name="terms")

    @terms_app.command("train")
    def terms_train(
        out: Annotated[Path, typer.Option("--out", "-o", help="Where to save the head (.npz): the file is yours.")],
        report: Annotated[Optional[Path], typer.Option(help="Search-term report (CSV/TSV with a header): query, "
                                                       "product title or id, clicks or orders.")] = None,
        catalog: Annotated[Optional[Path], typer.Option(help="Catalog (as `qkv index` reads it) to look the report's "
                                                        "product ids up in (leave out when the column holds titles).")] = None,
        query_column: QueryColumn = None,
        product_column: ProductColumn = None,
        weight_column: WeightColumn = None,
        corpus: Annotated[Optional[Path], typer.Option(help="Or BEIR: corpus.jsonl ...")] = None,
        queries: Annotated[Optional[Path], typer.Option(help="... queries.jsonl ...")] = None,
        qrels: Annotated[Optional[Path], typer.Option(help="... and qrels .tsv (queries judged ≥ 2.5 of 3 count).")] = None,
        half: Annotated[str, typer.Option(help=HALF_HELP)] = "all",
        ridge: Annotated[float, typer.Option(help="L2 penalty of the ridge fit.")] = 1.0,
        title_features: Annotated[bool, typer.Option("--title-features/--no-title-features", help="Also give the head "
                                                     "each word's place in the title and whether it is a number, unit "
                                                     "or stop word.")] = True,
        catalog_features: Annotated[Optional[bool], typer.Option("--catalog-features/--no-catalog-features", help="Also give the "
                                                       "head the share of the title's nearest catalog titles holding "
                                                       "each word and how often it opens a title (a brand); the "
                                                       "catalog is the BEIR corpus or --catalog, and scoring then "
                                                       "needs it too (default: on when there is a catalog).")] = None,
        model: Annotated[Optional[str], MODEL_OPT] = None,
        threads: Annotated[Optional[int], THREADS_OPT] = None,
    ):
        """Fit a term-weight head (DeepCT) on the encoder's token vectors: how likely each title word is searched."""
        from qkv.errors import InputError
        from qkv.explain.terms import examples_from_qrels, examples_from_report, train

        _check_half(half)
        beir = (corpus, queries, qrels)
        if (report is None) == all(x is None for x in beir):
            raise InputError("give --report (a search-term report) or --corpus, --queries and --qrels (BEIR), not both")
        if report is None and any(x is None for x in beir):
            raise InputError("BEIR training needs all three of --corpus, --queries and --qrels")
        if ridge < 0:
            raise InputError("--ridge must be 0 or more")
        if report is not None:
            titles = None
            if catalog is not None:
                from qkv.search.catalog import read_catalog

                titles = {r["id"]: r["title"] for r in read_catalog(catalog).rows}
            examples = examples_from_report(report, titles=titles, query_column=query_column,
                                            product_column=product_column, weight_column=weight_column)
            source = str(report)
        else:
            from qkv.explain.evaluate_points import load_corpus_titles
            from qkv.search.evaluate import in_half, load_qrels, load_queries

            examples = examples_from_qrels(load_corpus_titles(corpus), load_queries(queries), load_qrels(qrels),
                                           keep_query=lambda q: in_half(q, half))
            source = f"{qrels} (half {half})"
        if catalog_features and report is not None and catalog is None:
            raise InputError("--catalog-features reads the catalog: give --catalog CATALOG, or --no-catalog-features")
        if catalog_features is None:  # on whenever there is a catalog to read
            catalog_features = report is None or catalog is not None
        enc = load_encoder(model, threads)
        with progress_bars({"titles": "encoding titles", "fit": "fitting the head",
                            "encode": "embedding the catalog"}) as progress:
            cat = None
            if catalog_features:
                from qkv.explain.points import load_catalog

                cat = load_catalog(catalog if report is not None else corpus, enc, progress=progress)
            head = train(enc, examples, ridge=ridge, title_features=title_features, catalog=cat, progress=progress,
                         source=source)
        path = head.save(out)
        i = head.info
        console.print(f"trained on {i['titles']:,} titles ({i['words']:,} words, mean target {i['mean_target']:.3f}) "
                      f"with {enc.name}; saved {path}")

    @terms_app.command("adapt")
    def terms_adapt(
        index: Annotated[str, typer.Option("--index", "-i", help="The index to adapt (`qkv index`): its titles stay as "
                                           "they are; the fit is stored in it and every search uses it.")],
        report: Annotated[Optional[Path], typer.Option(help="Search-term report (CSV/TSV with a header): query, "
                                                       "product id or title, clicks or orders.")] = None,
        query_column: QueryColumn = None,
        product_column: ProductColumn = None,
        weight_column: WeightColumn = None,
        queries: Annotated[Optional[Path], typer.Option(help="Or BEIR: queries.jsonl ...")] = None,
        qrels: Annotated[Optional[Path], typer.Option(help="... and qrels .tsv (gain: judgment − 1, as `qkv eval search`).")] = None,
        half: Annotated[str, typer.Option(help=HALF_HELP.replace("train a head", "fit"))] = "all",
        epochs: Annotated[Optional[int], typer.Option(help="Passes over the queries (default: chosen on a held-out tenth).")] = None,
        tau: Annotated[Optional[float], typer.Option(help="Softmax temperature over cosines (default: the one the "
                                                     "model was trained with: MiniLM 0.05, E5 0.01).")] = None,
        force: Annotated[bool, typer.Option("--force", help="Install the fit even when it did not beat no adapter "
                                            "on the held-out queries.")] = False,
        remove: Annotated[bool, typer.Option("--remove", help="Delete the index's query adapter and exit.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
        threads: Annotated[Optional[int], THREADS_OPT] = None,
    ):
        """Fit the index's query vectors to the seller's search terms (a linear query adapter; titles unchanged)."""
        from rich.table import Table

        from qkv.errors import InputError
        from qkv.search import adapter as ad_mod
        from qkv.search.index import Index
        from qkv.search.store import index_dir, read_manifest

        root = index_dir(index)
        manifest = read_manifest(root)
        if remove:
            if report is not None or queries is not None or qrels is not None:
                raise InputError("--remove deletes the adapter; give no training data with it")
            gone = ad_mod.remove(root)
            console.print(f"removed {ad_mod.adapter_path(root)}" if gone else f"{root} has no query adapter")
            return
        _check_half(half)
        if (report is None) == (queries is None and qrels is None):
            raise InputError("give --report (a search-term report) or --queries and --qrels (BEIR), not both")
        if report is None and (queries is None or qrels is None):
            raise InputError("BEIR training needs both --queries and --qrels")
        if epochs is not None and epochs < 1:
            raise InputError("--epochs must be at least 1")
        enc = load_encoder(manifest.model, threads)
        with Index.open(root, enc, adapter=False) as idx:
            if report is not None:
                from qkv.explain.terms import report_rows

                rows = report_rows(report, query_column=query_column, product_column=product_column,
                                   weight_column=weight_column)
                ids = idx.store.all_ids()
                titles = [r["title"] if r else "" for r in idx.store.get_rows(ids)]
                pairs, unknown = ad_mod.pairs_from_report(rows, ids, titles)
                if not pairs:
                    raise InputError(f"{report}: none of its {len(rows):,} rows names a product of {root} (by id or "
                                     "exact title); check --product-column")
                source = str(report)
            else:
                from qkv.search.evaluate import in_half, load_qrels, load_queries

                pairs = ad_mod.pairs_from_qrels(load_queries(queries), load_qrels(qrels),
                                                keep_query=lambda q: in_half(q, half))
                unknown, source = 0, f"{qrels} (half {half})"
            fitted_on = None if report is not None else {"qrels": str(Path(qrels).resolve()), "half": half}
            with progress_bars({"embed": "embedding the queries", "fit": "fitting (passes)"}) as progress:
                adapter, rep = ad_mod.train(idx, pairs, epochs=epochs, tau=tau, progress=progress, source=source,
                                            fitted_on=fitted_on)
        installed = rep.helps or force
        path = ad_mod.install(root, adapter) if installed else None
        if as_json:
            print_json({**rep.to_dict(), "unknown_rows": unknown, "installed": None if path is None else str(path)})
            return
        console.print(f"fitted on {rep.queries:,} queries ({rep.products:,} products, softmax over {rep.catalog:,} "
                      f"titles at τ {adapter.info['tau']:g}), {rep.epochs} passes, {rep.seconds:.0f} s"
                      + (f"; {unknown:,} report rows named no product of the index" if unknown else ""))
        if rep.held_out:
            console.print(f"dense search on {rep.held_out:,} held-out queries (the passes were fitted without them):")
            t = Table()
            for c in ("", "NDCG@10", "Recall@100"):
                t.add_column(c, justify="right" if c else "left")
            t.add_row("without the adapter", f"{rep.before['ndcg@10']:.4f}", f"{rep.before['recall@100']:.4f}")
            t.add_row(f"with it ({rep.epochs} pass{'es' if rep.epochs > 1 else ''})", f"{rep.after['ndcg@10']:.4f}",
                      f"{rep.after['recall@100']:.4f}")
            console.print(t)
            console.print("[dim]held-out NDCG@10 after each pass: " + ", ".join(f"{x:.4f}" for x in rep.per_epoch) + "[/]")
        from qkv.search.fusion import alpha_for

        console.print(f"the adapted cosines spread {rep.spread:.2f}× as wide: score fusion weighs them "
                      f"{alpha_for(manifest.model, rep.spread):.3f} instead of {alpha_for(manifest.model):.3f}")
        if path is not None:
            console.print(f"installed {path}: searches of {root} use it (`--no-adapter` to compare; "
                          "`qkv terms adapt --remove` to drop it)")
        else:
            console.print("[yellow]not installed: no pass beat searching without an adapter on the held-out "
                          "queries (--force installs it anyway)[/]")

    @terms_app.command("advise")
    def terms_advise(
        title: Annotated[str, typer.Argument(help="The product title to advise on.")],
        terms: Annotated[Path, typer.Option(help="The term-weight head (`qkv terms train`).")],
        catalog: Annotated[Path, typer.Option(help="Your catalog (as `qkv index` reads it): the nearest titles come from it.")],
        k: Annotated[int, typer.Option(help="Nearest catalog titles to read.")] = 20,
        top: Annotated[int, typer.Option(help="Words to suggest.")] = 10,
        as_json: Annotated[bool, typer.Option("--json", help="Print the advice as JSON.")] = False,
        model: Annotated[Optional[str], MODEL_OPT] = None,
        threads: Annotated[Optional[int], THREADS_OPT] = None,
    ):
        """Words shoppers use for the title's nearest catalog products that the title lacks, by learned weight."""
        from rich.table import Table
        from rich.text import Text

        from qkv.errors import InputError
        from qkv.explain.points import load_catalog
        from qkv.explain.terms import FLOOR, TermHead, advise, advisers, product_type

        if k < 1 or top < 1:
            raise InputError("--k and --top must be at least 1")
        # a stored model wins: the head's own, unless --model names one (TermHead.load checks it)
        enc = load_encoder(model or TermHead.load(terms).model, threads)
        head = TermHead.load(terms, enc)
        with progress_bars({"encode": "embedding the catalog"}, transient=True) as progress:
            cat = load_catalog(catalog, enc, progress=progress)
        near = advisers(enc, title, cat, k=k)
        adv = advise(head, enc, title, cat, k=k, top=top, near=near)
        if as_json:
            print_json({"title": title, "neighbours": [{"title": cat.titles[i], "cosine": round(s, 4)} for i, s in near],
                        "advice": [a.to_dict() for a in adv]})
            return
        kind = product_type(title)
        t = Table(title=f"Words shoppers use for the {len(near)} products nearest “{title}” that it lacks",
                  title_justify="left")
        t.add_column("word")
        t.add_column("weight", justify="right")
        t.add_column(f"in the {len(near)}", justify="right")
        for a in adv:
            t.add_row(Text(a.word), f"{a.weight:.3f}", str(a.neighbours))
        t.caption = (f"neighbours: of the {k} nearest, those within {FLOOR:.0%} of the nearest one's cosine"
                     + (f" that say “{kind}”" if kind else "")
                     + "; weight: the learned search likelihood of the word in their naming words, "
                       "mean weighted by cosine")
        console.print(t)
