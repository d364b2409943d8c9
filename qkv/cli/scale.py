"""``qkv store migrate`` / ``qkv store index`` / ``qkv store info``: indexes beyond one machine —
Milvus-backed stores and indexing on Ray (see docs/scale.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

import qkv.scale  # noqa: F401 - registers the Milvus store with search's registry
from qkv.cli._common import console, err_console, load_encoder, print_json, progress_bars

store_app = typer.Typer(help="Stores beyond one machine: Milvus (Lite or a server), indexing on Ray.",
                        no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")


@store_app.command("migrate")
def migrate_cmd(
    source: Annotated[str, typer.Option("--from", help="Index to copy: its directory (embedded or Milvus-backed) or store URI.")],
    to: Annotated[str, typer.Option("--to", help="milvus://PATH.db[#collection], http://HOST:19530[#collection], or a directory (embedded).")],
    index: Annotated[Optional[Path], typer.Option("--index", "-i", help="Directory for the Milvus copy's manifest (default: SOURCE.milvus).")] = None,
    sample: Annotated[int, typer.Option(help="Products whose rows and vectors are compared after the copy.")] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
):
    """Copy an index to another store, then verify counts and a sample of rows and vectors."""
    from qkv.scale.migrate import migrate
    from qkv.search.store import index_dir

    source = index_dir(source)
    with progress_bars({"copy": "copying"}) as progress:
        rep = migrate(source, to, index, sample=sample, progress=progress)
    if as_json:
        print_json(rep.to_json())
        return
    console.print(f"[bold green]{rep.target_count:,}[/] products copied from {rep.source} to {rep.uri or rep.target} "
                  f"in {rep.seconds:.1f}s; verified: counts equal, {rep.sampled} sampled rows equal, "
                  f"vectors within {rep.max_vector_diff:.1g}")
    kept = [what for what, yes in (("learned term weights", rep.term_weights), ("query adapter", rep.query_adapter)) if yes]
    if kept:
        console.print("kept: " + ", ".join(kept))
    for note in rep.notes:
        err_console.print(f"[yellow]note:[/] {note}")
    if rep.uri:
        console.print(f"search it with: qkv search QUERY --index {rep.target}")


@store_app.command("index")
def index_cmd(
    catalog: Annotated[Path, typer.Argument(help="Catalog: .csv, .tsv, .jsonl or .parquet.")],
    index: Annotated[Path, typer.Option("--index", "-i", help="Index directory to create.")],
    engine: Annotated[str, typer.Option(help="ray (distributed embedding) or local (this process).")] = "ray",
    address: Annotated[Optional[str], typer.Option(help="Ray cluster: auto, ray://HOST:10001 (default: start a local Ray).")] = None,
    workers: Annotated[int, typer.Option(help="Embedding actors (one CPU and one BLAS thread each).")] = 2,
    store: Annotated[Optional[str], typer.Option(help="Keep the data in Milvus: milvus://PATH.db or http://HOST:19530.")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Replace an existing index.")] = False,
    block_rows: Annotated[int, typer.Option(help="Titles per Ray batch (= per resumable shard).")] = 512,
    work_dir: Annotated[Optional[Path], typer.Option(help="Where shards go (default: INDEX.ray-shards).")] = None,
    keep_shards: Annotated[bool, typer.Option("--keep-shards", help="Keep the embedding shards after the build.")] = False,
    id_column: Annotated[Optional[str], typer.Option(help="Id column (detected when obvious).")] = None,
    title_column: Annotated[Optional[str], typer.Option(help="Title column (detected when obvious).")] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model (default multilingual-e5-small, as `qkv index`: qkv.model.default_model).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the build report as JSON.")] = False,
):
    """Build an index with the embedding on Ray (resumable shards), into the embedded store or Milvus."""
    from qkv.errors import InputError

    if engine not in ("ray", "local"):
        raise InputError(f"--engine must be ray or local, not {engine!r}")
    enc = load_encoder(model, 1)
    bars = progress_bars({"embed": "embedding"})
    if engine == "local":
        from qkv.search.index import build_index

        with bars as progress:
            rep = build_index(catalog, index, enc, rebuild=rebuild, id_column=id_column, title_column=title_column,
                              progress=progress, **({"backend": "milvus", "uri": store} if store else {}))
        out = rep.__dict__
    else:
        from qkv.scale.ray_index import index_with_ray

        with bars as progress:
            rep = index_with_ray(catalog, index, address=address, workers=workers, model=model, encoder=enc,
                                 store=store, rebuild=rebuild, block_rows=block_rows, work_dir=work_dir,
                                 keep_shards=keep_shards, id_column=id_column, title_column=title_column,
                                 progress=progress)
        out = rep.to_json()
    if as_json:
        print_json(out)
        return
    rate = out["embedded"] / out["embed_seconds"] if out.get("embed_seconds") else 0
    console.print(f"[bold green]{out['count']:,}[/] products in {index} ({out['embedded']:,} embedded"
                  + (f", {out['reused']:,} reused from shards" if out.get("reused") else "")
                  + f") in {out['seconds']:.1f}s" + (f", {rate:,.0f} titles/s" if rate else "")
                  + (f" · data in {store}" if store else ""))


@store_app.command("info")
def info_cmd(index: Annotated[str, typer.Option("--index", "-i", help="Index directory, or the store URI it was built at.")]):
    """What an index holds and where its data lives."""
    from qkv.search.store import open_store

    with open_store(index) as st:
        m = st.manifest
        d = {"backend": m.backend, "count": st.count(), "model": m.model, "fingerprint": m.fingerprint,
             "dim": m.dim, "dtype": m.dtype, "fields": {f.name: f.kind for f in st.fields()}}
        if m.backend == "milvus":
            d.update(uri=m.extra["uri"], collection=m.extra["collection"])
        print_json(d)
