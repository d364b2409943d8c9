"""``qkv index``, ``qkv search``, ``qkv delete`` and ``qkv eval search``: product search."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from qkv.cli._common import console, err_console, load_encoder, print_json, progress_bars

INDEX_OPT = typer.Option("--index", "-i", help="Index directory (or the store URI it was built at, e.g. milvus://PATH.db).")
MODEL_OPT = typer.Option("--model", "-m", help="Model (default: the index's own, or multilingual-e5-small for a new "
                         "index; minilm keeps the English all-MiniLM-L6-v2).")


def _highlight(title: str, exp) -> "object":
    """The title with each word shaded by its share of the cosine (green = raises the score)."""
    from rich.text import Text

    text = Text()
    words = [w for w in exp.title_words if not w.special]
    top = max((abs(w.share) for w in words), default=1.0) or 1.0
    pos = 0
    for w in words:
        text.append(title[pos:w.start])
        level = w.share / top
        style = f"bold black on rgb({int(255 - 150 * level)},{255},{int(255 - 150 * level)})" if level > 0.15 else (
            "dim" if level < 0 else "")
        text.append(title[w.start:w.end], style=style)
        pos = w.end
    text.append(title[pos:])
    return text


def _piece_text(row: dict) -> str:
    """One translated word of ``crosslingual.translation_rows``: "除→divide (dictionary ×0.25; also
    remove)" — the weight only where its group is searched below full trust."""
    w = row["weight"]
    note = row["source"] + (f" ×{w:g}" if w is not None and w < 1 else "")
    if row["alternatives"]:
        note += "; also " + ", ".join(row["alternatives"])
    return f"{row['zh']}→{row['en'] or '?'} ({note})"


def _baseline_table(diffs, path: Path):
    """Each mode's metrics against the baseline file: means over the shared queries, change ± SE, p."""
    from rich.table import Table

    table = Table(title=f"against {path}",
                  caption="paired over the queries both runs scored; p: sign-flip randomization test")
    for col in ("mode", "metric", "queries", "baseline", "this run", "change", "± SE", "p"):
        table.add_column(col, justify="left" if col in ("mode", "metric") else "right", no_wrap=True)
    for d in diffs:
        mark = "bold" if d.p < 0.05 else "dim"  # a change a seller can act on, or one within noise
        table.add_row(d.mode, d.metric, f"{d.n:,}", f"{d.base:.4f}", f"{d.new:.4f}",
                      f"[{mark}]{d.delta:+.4f}[/]", f"{d.se:.4f}", f"[{mark}]{d.p:.4f}[/]")
    return table


def register(app: typer.Typer) -> None:
    from qkv.cli import eval_app

    @app.command("index")
    def index_cmd(
        catalog: Annotated[Path, typer.Argument(help="Catalog: .csv, .tsv, .jsonl (BEIR corpus.jsonl too) or .parquet.")],
        index: Annotated[str, INDEX_OPT],
        upsert: Annotated[bool, typer.Option("--upsert", help="Add or replace products by id in an existing index.")] = False,
        rebuild: Annotated[bool, typer.Option("--rebuild", help="Replace an existing index entirely.")] = False,
        id_column: Annotated[Optional[str], typer.Option(help="Id column (detected when obvious).")] = None,
        title_column: Annotated[Optional[str], typer.Option(help="Title column (detected when obvious).")] = None,
        fmt: Annotated[Optional[str], typer.Option("--format", help="csv, tsv, jsonl or parquet (default: by extension).")] = None,
        float16: Annotated[bool, typer.Option("--float16", help="Keep vectors as float16 (half the memory).")] = False,
        ann: Annotated[str, typer.Option(help="auto (exact below 100k products, HNSW above), flat, hnsw or ivfpq.")] = "auto",
        model: Annotated[Optional[str], MODEL_OPT] = None,
        threads: Annotated[Optional[int], typer.Option(help="Encoder threads (default QKV_THREADS or 1).")] = None,
        batch_size: Annotated[int, typer.Option(help="Titles per encoder batch.")] = 64,
        as_json: Annotated[bool, typer.Option("--json", help="Print the build report as JSON.")] = False,
        engine: Annotated[str, typer.Option(help="local (this process) or ray (embedding on Ray actors; qkv[ray]).")] = "local",
        address: Annotated[Optional[str], typer.Option(help="With --engine ray: auto or ray://HOST:10001 (default: a local Ray).")] = None,
        workers: Annotated[Optional[int], typer.Option(help="Embedding processes, one BLAS thread each (local, default 1: "
                                                             "pays only when cores are free), or Ray actors (--engine ray, default 2).")] = None,
        store: Annotated[Optional[str], typer.Option(help="Keep the data in Milvus: milvus://PATH.db or http://HOST:19530 (qkv[milvus]).")] = None,
        precision: Annotated[Optional[str], typer.Option(help="Encoder precision: bfloat16 (default for a new index where the CPU has a bfloat16 unit), float32, or int8 (float32 models: int8 products, cosine ≥ 0.995 to float32; docs/engine.md).")] = None,
        term_weights: Annotated[Optional[str], typer.Option(
            "--term-weights", help="A term-weight head (`qkv terms train`): index each title's words with its learned "
                                   "weights as term frequencies (DeepCT-Index) instead of raw counts; 'none': plain. "
                                   "Default: the index's own (an update or rebuild keeps it), plain for a new index.")] = None,
        term_scale: Annotated[Optional[float], typer.Option(
            help="With --term-weights: repeats of a word of weight 1 in its keyword document (default 20: the weights to 0.05).")] = None,
        keep_zero: Annotated[Optional[bool], typer.Option(
            "--keep-zero/--drop-zero", help="With --term-weights: keep words weighted ~0 at the floor (default) or "
                                            "leave them out of the keyword side.")] = None,
        term_k1: Annotated[Optional[float], typer.Option(
            help="With --term-weights: BM25's k1 over the learned weights (saturation; default 0.1).")] = None,
        term_b: Annotated[Optional[float], typer.Option(
            help="With --term-weights: BM25's b over the learned weights (length normalisation, 0–1; default 0.9).")] = None,
        term_blend: Annotated[Optional[float], typer.Option(
            help="With --term-weights: λ in tf = λ · count + weight (default 0.25; 0: the learned weight alone).")] = None,
        term_floor: Annotated[Optional[float], typer.Option(
            help="With --term-weights: the least weight a kept word gets (0–1; default one repeat).")] = None,
    ):
        """Build or update a search index from CATALOG."""
        from qkv.errors import InputError
        from qkv.search.index import build_index
        from qkv.search.store import index_dir, read_manifest

        index = index_dir(index)
        if engine not in ("local", "ray"):
            raise InputError(f"--engine must be local or ray, not {engine!r}")
        if engine == "ray" or store:
            if term_weights not in (None, "none"):
                raise InputError("--term-weights works with the local engine and the embedded store")
            if upsert:
                raise InputError("--upsert works with the local engine and the embedded store; "
                                 "the Ray engine and --store build whole indexes (use --rebuild to replace one)")
            from qkv.cli.scale import index_cmd as scale_index

            return scale_index(catalog, index, engine=engine, address=address, workers=workers or 2, store=store,
                               rebuild=rebuild, block_rows=512, work_dir=None, keep_shards=False,
                               id_column=id_column, title_column=title_column, model=model, as_json=as_json)

        enc = None
        if model or not (index / "manifest.json").is_file():
            enc = load_encoder(model, threads)  # none named: the rule's model for an index (qkv.model.default_model)
        elif threads:
            enc = load_encoder(read_manifest(index).model, threads)
        with progress_bars({"embed": "embedding", "weigh": "term weights"}) as progress:
            rep = build_index(catalog, index, enc, upsert=upsert, rebuild=rebuild,
                              dtype="float16" if float16 else "float32", ann=ann, id_column=id_column,
                              title_column=title_column, fmt=fmt, batch_size=batch_size, progress=progress,
                              workers=workers or 1, precision=precision, term_weights=term_weights,
                              term_scale=term_scale, keep_zero=keep_zero, term_k1=term_k1, term_b=term_b,
                              term_blend=term_blend, term_floor=term_floor)
        if as_json:
            print_json(rep.__dict__)
            return
        c = rep.catalog
        console.print(f"[bold green]{rep.count:,}[/] products in {rep.path} "
                      f"({rep.embedded:,} embedded with {rep.model}, {rep.unchanged:,} unchanged) in {rep.seconds:.1f}s"
                      + (f", {rep.embedded / rep.embed_seconds:,.0f} titles/s" if rep.embed_seconds else ""))
        if rep.term_weights:
            from qkv.search.termweights import TermWeighting

            tw = TermWeighting.from_json(rep.term_weights)
            console.print(f"keyword side weighted by the term head {tw.head} ({tw.describe()})")
        console.print(f"columns: id={c['id_column']!r} title={c['title_column']!r}; fields: "
                      + ", ".join(f"{k} ({v})" for k, v in c["fields"].items()))
        for key, label in (("duplicate_ids", "duplicate ids (last kept)"), ("empty_titles_skipped", "empty titles skipped"),
                           ("missing_ids_skipped", "rows without id skipped"),
                           ("undecodable_bytes_replaced", "undecodable byte sequences replaced")):
            if c.get(key):
                console.print(f"[yellow]{c[key]:,} {label}[/]")

    @app.command("search")
    def search_cmd(
        query: Annotated[str, typer.Argument(help="What a shopper would type.")],
        index: Annotated[str, INDEX_OPT],
        k: Annotated[int, typer.Option("-k", help="Number of results.")] = 10,
        mode: Annotated[str, typer.Option(help="hybrid, dense or keyword.")] = "hybrid",
        fusion: Annotated[str, typer.Option(help="Hybrid fusion: score (weighted, default) or rrf.")] = "score",
        where: Annotated[Optional[str], typer.Option(help="Filter on fields, e.g. \"price < 50 and colour = red\".")] = None,
        explain: Annotated[bool, typer.Option("--explain", help="Show which query tokens matched which title tokens.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
        model: Annotated[Optional[str], MODEL_OPT] = None,
        threads: Annotated[Optional[int], typer.Option(help="Encoder threads (default QKV_THREADS or 1).")] = None,
        ef_search: Annotated[Optional[int], typer.Option(
            "--ef-search", help="HNSW search breadth (default 96): more recall, more time.")] = None,
        translate: Annotated[bool, typer.Option("--translate/--no-translate",
                                                help="Also search a Chinese query in English (dictionary translation).")] = True,
        spell: Annotated[bool, typer.Option("--spell/--no-spell",
                                            help="Search an English word no title holds as the catalog word it most likely meant (both sides).")] = True,
        glossary: Annotated[Optional[Path], typer.Option(help="CSV of 'Chinese term,English term' that overrides the dictionary.")] = None,
        trade_glossary: Annotated[str, typer.Option("--trade-glossary", help="Built-in trade glossary for Chinese queries, below --glossary and above the dictionary: home-improvement (default) or none.")] = "home-improvement",
        adapter: Annotated[bool, typer.Option("--adapter/--no-adapter", help="Apply the index's query adapter (`qkv terms adapt`) when it has one.")] = True,
    ):
        """Search an index: dense (meaning), keyword (BM25) or hybrid (both, fused)."""
        from rich.table import Table

        from rich.markup import escape

        from qkv.search.crosslingual import FEEDBACK_DOCS, translation_rows
        from qkv.search.index import Index
        from qkv.search.store import index_dir, read_manifest

        index = index_dir(index)
        manifest = read_manifest(index)
        enc = load_encoder(model or manifest.model, threads) if mode != "keyword" or explain else None
        with Index.open(index, enc, ef_search=ef_search, glossary=glossary, trade_glossary=trade_glossary,
                        adapter=adapter) as idx:
            res = idx.search(query, k=k, mode=mode, where=where, explain=explain, fusion=fusion, translate=translate,
                             spell=spell)
            tr = res.translation
            adapted = mode != "keyword" and idx.adapter(query=res.plan) is not None
            if as_json:
                from qkv.search.floor import weak_results

                out = {"query": query, "mode": mode, "k": k, "where": where, "model": manifest.model,
                       "query_adapter": adapted}
                if tr is not None:
                    out.update(searched_as=tr.text, translation=translation_rows(tr))
                if res.corrected is not None:
                    out.update(corrected=res.corrected)
                timings = {a: b * 1000 for a, b in res.timings.items()}
                weak, floor = weak_results(idx, query, res)  # as the web API marks them
                print_json({**out, "timings_ms": timings, "floor": None if floor is None else round(floor, 4),
                            "results": [{**r.to_json(), "weak": w} for r, w in zip(res, weak)]})
                return
        if tr is not None:
            console.print(f"searched as: [bold]{escape(tr.text) or '(no translation)'}[/]  [dim]"
                          + " · ".join(escape(_piece_text(r)) for r in translation_rows(tr) if r["source"] != "as typed")
                          + (f" · + top {FEEDBACK_DOCS} results fed back" if FEEDBACK_DOCS and tr.text and mode != "keyword" else "")
                          + "[/]")
        if res.corrected is not None:  # words no title holds, searched in the catalog's own spelling
            console.print(f"showing results for: [bold]{escape(res.corrected)}[/]")
        if not res:
            console.print("no results" + (" (the keyword side needs a shared word; try --mode dense)" if mode == "keyword" else ""))
            return
        table = Table(title=f"{mode} · {query!r}" + (f" · where {where}" if where else "") + f" · {manifest.model}"
                      + (" · query adapter" if adapted else ""), show_lines=explain)
        for col, j in (("#", "right"), ("score", "right"), ("title", "left"), ("id", "left")):
            table.add_column(col, justify=j, overflow="fold")
        fields = [f for f in res[0].fields][:3]
        for f in fields:
            table.add_column(f)
        for r in res:
            title = r.title
            cell = _highlight(title, r.explanation) if explain and r.explanation else title
            if explain and r.explanation:
                from rich.text import Text

                e = r.explanation
                extra = Text(f"\ncos {e.cosine:.4f} = Σ grid {e.parts_sum:.4f}" if e.exact else f"\ncos {e.cosine:.4f}",
                             style="dim")
                sp = sum(w.share for w in e.title_words if w.special)
                extra.append(f" (special and prefix tokens {sp:+.4f})", style="dim")
                top = sorted((w for w in e.title_words if not w.special), key=lambda w: -w.share)[:3]
                extra.append("\nmatched: " + ", ".join(f"{w.text}←{w.best_query_word} {w.share:+.3f}" for w in top),
                             style="green")
                if e.keyword_terms:
                    extra.append("\nBM25: " + ", ".join(f"{t} {s:.2f}" for t, s in e.keyword_terms), style="cyan")
                cell = Text.assemble(cell, extra)
            table.add_row(str(r.rank), f"{r.score:.3f}", cell, r.id, *[str(r.fields.get(f, "")) for f in fields])
        console.print(table)

    @app.command("delete")
    def delete_cmd(
        ids: Annotated[list[str], typer.Argument(help="Product ids to remove.")],
        index: Annotated[str, INDEX_OPT],
    ):
        """Remove products from an index by id."""
        from qkv.search.index import delete_products

        n = delete_products(index, ids)
        console.print(f"removed {n} of {len(ids)} product(s)" + ("" if n == len(ids) else " (the others were not in the index)"))

    @eval_app.command("search")
    def eval_search(
        corpus: Annotated[Path, typer.Option(help="BEIR corpus.jsonl.")],
        queries: Annotated[Path, typer.Option(help="BEIR queries.jsonl.")],
        qrels: Annotated[Path, typer.Option(help="BEIR qrels .tsv (query-id, corpus-id, score).")],
        index: Annotated[Optional[Path], typer.Option(help="Index directory to build once and reuse (default: a cache under /tmp/qkv-cache).")] = None,
        rerank: Annotated[bool, typer.Option("--rerank", help="Rank only each query's judged products (+ Spearman).")] = False,
        half: Annotated[str, typer.Option(help="all, a or b: evaluate half the queries (tune on one, report the other).")] = "all",
        limit: Annotated[Optional[int], typer.Option(help="Evaluate at most this many queries.")] = None,
        fusion: Annotated[str, typer.Option(help="Hybrid fusion: score or rrf.")] = "score",
        alpha: Annotated[Optional[float], typer.Option(help="Dense weight in score fusion (default: the tuned one).")] = None,
        gain_offset: Annotated[Optional[float], typer.Option(help="NDCG gain = judgment − offset (default: 1 for 1–3 grades, else 0).")] = None,
        coverage: Annotated[bool, typer.Option("--coverage/--no-coverage", help="Weight BM25 by matched query terms in hybrid fusion.")] = True,
        query_field: Annotated[str, typer.Option(help="Field of each query record to search (e.g. 'en' for the English originals of translated queries).")] = "text",
        translate: Annotated[bool, typer.Option("--translate/--no-translate", help="Also search Chinese queries in English.")] = True,
        spell: Annotated[bool, typer.Option("--spell/--no-spell", help="Correct English words no title holds, as search does.")] = True,
        glossary: Annotated[Optional[Path], typer.Option(help="CSV of 'Chinese term,English term' that overrides the dictionary.")] = None,
        trade_glossary: Annotated[str, typer.Option("--trade-glossary", help="Built-in trade glossary for Chinese queries, below --glossary and above the dictionary: home-improvement (default) or none.")] = "home-improvement",
        as_json: Annotated[bool, typer.Option("--json", help="Print metrics as JSON.")] = False,
        model: Annotated[Optional[str], MODEL_OPT] = None,
        threads: Annotated[Optional[int], typer.Option(help="Encoder threads (default QKV_THREADS or 1).")] = None,
        precision: Annotated[Optional[str], typer.Option(help="Encoder precision: bfloat16 (default for a new index where the CPU has a bfloat16 unit), float32, or int8 (float32 models: int8 products, cosine ≥ 0.995 to float32; docs/engine.md).")] = None,
        adapter: Annotated[bool, typer.Option("--adapter/--no-adapter", help="Apply the index's query adapter (`qkv terms adapt`) when it has one.")] = True,
        per_query: Annotated[Optional[Path], typer.Option("--per-query", help="Also write each query's metrics to this file (JSON), to compare a later run against with --baseline.")] = None,
        baseline: Annotated[Optional[Path], typer.Option(help="A --per-query file of an earlier run: print each metric's change against it over the queries both scored, with its paired standard error and randomization-test p.")] = None,
    ):
        """NDCG@10, MRR@10 and Recall@100 of keyword, dense and hybrid search on BEIR data."""
        import hashlib

        from rich.table import Table

        from qkv.search.evaluate import MODES, evaluate, load_qrels, load_queries
        from qkv.search.index import Index, build_index
        from qkv.search.store import read_manifest

        if half not in ("all", "a", "b"):
            raise typer.BadParameter("half must be all, a or b")
        from qkv.search import significance

        base_doc = significance.load(baseline) if baseline is not None else None  # a bad file fails before the run
        if base_doc is not None:
            significance.check_protocol(base_doc, "rerank" if rerank else "full-corpus")
        if model is None and index is not None and (index / "manifest.json").is_file():
            model = read_manifest(index).model  # an existing index is searched with its own model
        enc = load_encoder(model, threads)
        if index is None:
            key = hashlib.blake2b(f"{corpus.resolve()}|{enc.fingerprint()}|{precision or ''}".encode(),
                                  digest_size=6).hexdigest()
            index = Path("/tmp/qkv-cache/eval-index") / key
        if not (index / "manifest.json").is_file():
            with progress_bars({"embed": "indexing corpus"}) as progress:
                build_index(corpus, index, enc, progress=progress, precision=precision)
        q, r = load_queries(queries, query_field), load_qrels(qrels)
        with Index.open(index, enc, glossary=glossary, trade_glossary=trade_glossary, adapter=adapter) as idx, \
                progress_bars() as progress:
            res = evaluate(idx, q, r, rerank=rerank, gain_offset=gain_offset, half=half, limit=limit,
                           fusion_=fusion, alpha=alpha, coverage=coverage, translate=translate, spell=spell,
                           progress=progress)
        from qkv.search.evaluate import fitted_on_these

        if fitted_on_these(res.settings.get("query_adapter"), qrels, half):  # said, so nobody reports it as held out
            res.settings["query_adapter"]["fitted_on_these_queries"] = True
            err_console.print(f"[yellow]the index's query adapter was fitted on these judgments "
                          f"(half {res.settings['query_adapter']['fitted_on'].get('half')}): the dense and hybrid "
                          "figures are not held out; evaluate the other half, or pass --no-adapter[/]")
        if per_query is not None:  # kept before comparing: a refused comparison does not lose the run
            res.save_per_query(per_query)
            err_console.print(f"each query's metrics: {per_query}")
        diffs = significance.compare(base_doc, res.as_per_query()) if base_doc is not None else None
        if as_json:
            out = res.to_json()
            if diffs is not None:
                out["baseline"] = {"path": str(baseline), "differences": [d.to_json() for d in diffs]}
            print_json(out)
            return
        table = Table(title=f"{res.protocol} · {res.queries:,} queries · {res.settings['products']:,} products")
        table.add_column("mode")
        metrics = list(res.metrics["keyword"])
        for m in metrics:
            table.add_column(m, justify="right")
        for mode in MODES:
            table.add_row(mode, *[f"{res.metrics[mode][m]:.4f}" for m in metrics])
        console.print(table)
        console.print(f"[dim]settings: {res.settings}[/]")
        if diffs is not None:
            console.print(_baseline_table(diffs, baseline))
