"""``qkv encode``: sentence embeddings, the first user of the encoder."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from qkv.cli._common import console, load_encoder, print_json

MODEL_OPT = typer.Option("--model", "-m", help="Short name (minilm, multilingual-e5-small; see `qkv models`), "
                         "model directory or hub id (default: all-MiniLM-L6-v2 for English text, multilingual-e5-small "
                         "for Chinese or mixed text; qkv.model.default_model).")


def register(app: typer.Typer) -> None:
    @app.command()
    def encode(
        texts: Annotated[list[str], typer.Argument(help="Texts to embed.")],
        model: Annotated[Optional[str], MODEL_OPT] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print full vectors as JSON.")] = False,
        normalize: Annotated[Optional[bool], typer.Option("--normalize/--no-normalize",
                                                          help="Default: the model's own setting.")] = None,
        truncate: Annotated[bool, typer.Option(help="Cut long texts instead of averaging windows.")] = False,
        threads: Annotated[Optional[int], typer.Option(help="Encoder threads (default QKV_THREADS or 1).")] = None,
        role: Annotated[Optional[str], typer.Option(
            "--as", help="query or passage: put the model's prefix for that role before each text "
                         "(multilingual-e5-small: 'query: ' / 'passage: '). Default: the texts as given.")] = None,
    ):
        """Embed TEXTS and print each vector's shape, norm and first values."""
        import numpy as np
        from rich.table import Table

        enc = load_encoder(model, threads, texts)
        vecs = enc.encode(texts, normalize=normalize, truncate=truncate, role=role)
        if as_json:
            print_json({"model": enc.name, "dim": enc.dim,
                        "embeddings": [{"text": t, "norm": float(np.linalg.norm(v)), "vector": v}
                                       for t, v in zip(texts, vecs)]})
            return
        table = Table(title=f"{enc.name} · {len(texts)} × {enc.dim} float32")
        table.add_column("text", overflow="fold", max_width=48)
        table.add_column("tokens", justify="right")
        table.add_column("norm", justify="right")
        table.add_column("first values")
        counts = enc.tokenizer.count(enc.with_role(texts, role))
        for t, n, v in zip(texts, counts, vecs):
            table.add_row(t, str(n), f"{np.linalg.norm(v):.4f}", " ".join(f"{x:+.4f}" for x in v[:4]) + " …")
        console.print(table)
        if len(texts) > 1:
            sims = vecs @ vecs.T if (normalize or (normalize is None and enc.config.normalize)) else None
            if sims is not None:
                console.print("cosine similarity of text 0 to the others: " +
                              ", ".join(f"{s:.3f}" for s in sims[0, 1:]))
