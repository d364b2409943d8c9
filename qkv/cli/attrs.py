"""``qkv attrs``: extract product attributes from titles, train an attribute model, evaluate it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from qkv.cli._common import console, err_console, print_json, progress_bars

attrs_app = typer.Typer(help="Product attributes from titles: extract, train, eval.", no_args_is_help=True)

MODEL_HELP = "Attribute model file made by `qkv attrs train` (none ships with qkv: train one on your labelled titles)."


def _require_model(model: Optional[Path]) -> Path:
    from qkv.errors import InputError

    if model is None:
        raise InputError("--model FILE is required: qkv ships no attribute model (the public labelled sets "
                         "carry research-only licences). Train one with `qkv attrs train --data train.jsonl --out FILE`")
    return model


def _load_model(model: Path, encoder: Optional[str]):
    from qkv.attributes import AttributeModel
    from qkv.cli._common import load_encoder

    m = AttributeModel.load(model)
    if encoder is not None:
        m.bind(load_encoder(encoder))
    return m


def _read_titles(file: Path, column: str) -> tuple[list[str], list[Optional[str]]]:
    """Titles from a CSV (header row) or JSON-lines file; the category column is used if present."""
    import csv

    from qkv.errors import InputError

    if not file.is_file():
        raise InputError(f"no such file: {file}")
    titles, cats = [], []
    if file.suffix in (".jsonl", ".json", ".ndjson"):
        from qkv.attributes.data import iter_jsonl

        for no, obj in iter_jsonl(file):
            if not isinstance(obj, dict) or not isinstance(obj.get(column), str):
                raise InputError(f"{file}:{no}: no string field {column!r}")
            titles.append(obj[column])
            cats.append(obj.get("category") if isinstance(obj.get("category"), str) else None)
        return titles, cats
    with open(file, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or column not in reader.fieldnames:
            raise InputError(f"{file} has no column {column!r} (columns: {', '.join(reader.fieldnames or [])}); "
                             "choose one with --column")
        for row in reader:
            titles.append(row[column] or "")
            cats.append(row.get("category") or None)
    return titles, cats


def _show(title: str, found) -> None:
    from rich.table import Table
    from rich.text import Text

    text = Text(title)
    for a in found:
        text.stylize("bold reverse", a.start, a.end)
    console.print(text)
    if not found:
        console.print("  [dim](no attributes found)[/]")
        return
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for c in ("attribute", "value", "span", "confidence"):
        t.add_column(c, justify="right" if c in ("span", "confidence") else "left")
    if any(a.normalized is not None for a in found):
        t.add_column("normalized")
    for a in found:
        row = [a.attr, a.value, f"{a.start}:{a.end}", f"{a.confidence:.3f}"]
        if a.normalized is not None:
            row.append(a.normalized)
        t.add_row(*row)
    console.print(t)


@attrs_app.command()
def extract(
    titles: Annotated[Optional[list[str]], typer.Argument(help="Product titles.")] = None,
    model: Annotated[Optional[Path], typer.Option("--model", "-m", help=MODEL_HELP)] = None,
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="CSV (with header) or JSON-lines file of titles.")] = None,
    column: Annotated[str, typer.Option(help="Column / field holding the title.")] = "title",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write results as JSON lines here.")] = None,
    category: Annotated[Optional[str], typer.Option(help="Category of every title given on the command line.")] = None,
    normalize: Annotated[bool, typer.Option(help="Add a normalised form of each value.")] = False,
    all_spans: Annotated[bool, typer.Option("--all-spans", help="Every span found, not one per attribute.")] = False,
    min_confidence: Annotated[float, typer.Option(help="Drop values less confident than this.")] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    encoder: Annotated[Optional[str], typer.Option(help="Encoder to use (default: the one the model records).")] = None,
):
    """Find attribute values in TITLES (or in --file): value, character span, confidence."""
    import json

    from qkv.errors import InputError

    model = _require_model(model)
    if not titles and file is None:
        raise InputError("give titles as arguments or --file catalog.csv")
    if titles and file is not None:
        raise InputError("give titles as arguments or --file, not both")
    m = _load_model(model, encoder)
    if file is not None:
        texts, cats = _read_titles(file, column)
    else:
        texts, cats = list(titles), [category] * len(titles)
    cats_arg = cats if any(c for c in cats) else None
    if file is not None:
        with progress_bars({"extract": "extracting"}, transient=not sys.stderr.isatty()) as progress:
            results = m.extract(texts, cats_arg, all_spans=all_spans, normalize=normalize,
                                min_confidence=min_confidence, batch_size=256, progress=progress)
    else:
        results = m.extract(texts, cats_arg, all_spans=all_spans, normalize=normalize, min_confidence=min_confidence)
    rows = [{"title": t, "attributes": [a.as_dict() for a in r]} for t, r in zip(texts, results)]
    if out is not None:
        tmp = out.with_name(out.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        tmp.replace(out)
        n = sum(len(r) for r in results)
        err_console.print(f"wrote {len(rows)} titles, {n} values to {out}")
        return
    if as_json:
        print_json({"model": str(model), "results": rows})
        return
    for t, r in zip(texts, results):
        _show(t, r)


@attrs_app.command()
def train(
    data: Annotated[Path, typer.Option("--data", "-d", help="Labelled titles: JSON lines, or character BIO (.txt).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Model file to write.")],
    dev: Annotated[int, typer.Option(help="Hold out this percent (seeded hash of the title) and score on it; 0 = none.")] = 0,
    mode: Annotated[str, typer.Option(help="crf (linear-chain CRF) or softmax (per-token, BIO-constrained decoding).")] = "crf",
    layers: Annotated[Optional[str], typer.Option(help="Encoder layers (0-based, negative from the end) whose outputs are "
                                                        "features, comma-separated; the encoder stops after the deepest. "
                                                        "Default: 3,4 for MiniLM, 7 for multilingual-e5-small.")] = None,
    max_iter: Annotated[int, typer.Option(help="L-BFGS iterations.")] = 100,
    no_dense: Annotated[bool, typer.Option("--no-dense", help="Word features only (no encoder vectors).")] = False,
    cache: Annotated[Optional[Path], typer.Option(help="Cache encoder vectors in this folder.")] = None,
    encoder: Annotated[Optional[str], typer.Option(help="Encoder: a short name (minilm, multilingual-e5-small), "
                                                        "a directory or hub id (default: all-MiniLM-L6-v2 for English titles, "
                                                        "multilingual-e5-small for Chinese or mixed ones).")] = None,
    han_words: Annotated[bool, typer.Option("--han-words/--no-han-words",
                                            help="Cut Chinese runs into jieba's words for the word features "
                                                 "(on by default).")] = True,
    char_features: Annotated[bool, typer.Option("--char-features",
                                                help="Add each token's first and last characters and the character "
                                                     "pairs across its edges (measured +0.8 micro-F1 on Chinese titles).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the training report as JSON.")] = False,
):
    """Learn an attribute model from labelled titles."""
    from qkv.attributes import AttributeModel, read_examples, split_dev
    from qkv.cli._common import load_encoder
    from qkv.errors import InputError

    if mode not in ("crf", "softmax"):
        raise InputError(f"--mode must be crf or softmax, not {mode!r}")
    try:
        layer_list = None if layers is None else tuple(int(x) for x in layers.split(",") if x.strip())
    except ValueError:
        raise InputError(f"--layers must be comma-separated integers, e.g. 3,4 (got {layers!r})") from None
    if not 0 <= dev < 100:
        raise InputError("--dev is a percentage from 0 to 99")
    examples = read_examples(data)
    train_set, dev_set = split_dev(examples, dev) if dev else (examples, [])
    enc = load_encoder(encoder, texts=[e.title for e in train_set])
    with progress_bars({"encode": "encoding titles", "fit": "fitting (L-BFGS iterations)"},
                       transient=not sys.stderr.isatty()) as progress:
        model, report = AttributeModel.train(train_set, enc, layers=layer_list, mode=mode, max_iter=max_iter,
                                             use_dense=not no_dense, cache_dir=cache, progress=progress,
                                             han_words=han_words, char_features=char_features)
    model.save(out)
    result = {"model": str(out), "encoder": enc.name, "bytes": out.stat().st_size, "train": report.as_dict()}
    if dev_set:
        result["dev"] = _score(model, dev_set, normalize=True)
    if as_json:
        print_json(result)
        return
    al = report.alignment
    console.print(f"trained with {enc.name} on {report.titles} titles ({report.tokens} tokens), {report.attributes} attributes, "
                  f"{report.features} word features in {report.seconds:.1f}s "
                  f"({report.optimiser['iterations']} iterations) -> {out} ({result['bytes'] / 1e6:.2f} MB)")
    console.print(f"gold values: {al.values}; labelled {al.labelled} spans; not in the title (skipped) "
                  f"{al.not_in_title}; off token boundaries (snapped) {al.off_boundary}; overlapping (skipped) "
                  f"{al.overlapping}; empty titles {al.empty_titles}")
    for t, a, v in al.examples_not_in_title[:3]:
        console.print(f"  [dim]not in title:[/] {a}={v!r} in {t!r}", highlight=False)
    if dev_set:
        console.print(f"dev split: {len(dev_set)} titles ({dev}% by seeded title hash)")
        _print_scores(result["dev"])


def _score(model, examples, normalize: bool = False) -> dict:
    from qkv.attributes import score, span_scores

    if all(ex.spans is not None for ex in examples):
        preds = model.extract([ex.title for ex in examples], all_spans=True)
        return {"exact": span_scores(examples, preds).as_dict()}
    preds = model.extract([ex.title for ex in examples], [ex.category for ex in examples])
    out = {"exact": score(examples, preds).as_dict()}
    if normalize:
        out["normalized"] = score(examples, preds, normalize=True).as_dict()
    return out


def _print_scores(res: dict) -> None:
    from rich.table import Table

    ex = res["exact"]
    mi, ma = ex["micro"], ex["macro"]
    console.print(f"[bold]{ex['protocol']}[/] over {ex['offers']} titles: micro P {mi['precision']:.2f}  "
                  f"R {mi['recall']:.2f}  [bold]F1 {mi['f1']:.2f}[/]   macro P {ma['precision']:.2f}  "
                  f"R {ma['recall']:.2f}  F1 {ma['f1']:.2f}")
    if "normalized" in res:
        n = res["normalized"]["micro"]
        console.print(f"normalized values: micro P {n['precision']:.2f}  R {n['recall']:.2f}  F1 {n['f1']:.2f} "
                      "(reported apart from the exact-match score)")
    t = Table(title="per attribute", header_style="bold")
    for c in ("attribute", "gold", "tp", "fp", "fn", "P", "R", "F1"):
        t.add_column(c, justify="left" if c == "attribute" else "right")
    for a, c in ex["per_attribute"].items():
        t.add_row(a, str(c["gold"]), str(c["tp"]), str(c["fp"]), str(c["fn"]), f"{c['precision']:.1f}",
                  f"{c['recall']:.1f}", f"{c['f1']:.1f}")
    console.print(t)


@attrs_app.command("eval")
def eval_(
    model: Annotated[Optional[Path], typer.Option("--model", "-m", help=MODEL_HELP)] = None,
    data: Annotated[Path, typer.Option("--data", "-d", help="Labelled titles (JSON lines or character BIO).")] = ...,
    normalize: Annotated[bool, typer.Option(help="Also score normalised values (separately).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    encoder: Annotated[Optional[str], typer.Option(help="Encoder to use (default: the one the model records).")] = None,
):
    """Precision, recall and F1 (micro, macro, per attribute) by exact match on labelled titles."""
    from qkv.attributes import read_examples

    model = _require_model(model)
    m = _load_model(model, encoder)
    examples = read_examples(data)
    res = _score(m, examples, normalize)
    if as_json:
        print_json({"model": str(model), "data": str(data), **res})
        return
    _print_scores(res)


def register(app: typer.Typer) -> None:
    app.add_typer(attrs_app, name="attrs")
