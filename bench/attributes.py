"""Attribute extraction: speed (titles/s on one thread) and, with --quality, dev-split scores.

    .venv/bin/python bench/attributes.py              # speed: extract vs the bare encoder, same titles
    .venv/bin/python bench/attributes.py --quality    # + train on train.jsonl minus a 20% dev split, score dev

Reads ../shared/data/attributes (never copied into the repo); says so and exits 0 when it is absent.
The dev split is ``qkv.attributes.split_dev(examples, 20)``: a title goes to dev when
sha1("qkv" + NUL + title) mod 100 < 20. Encoder vectors are cached in /tmp/qkv-cache/attributes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("QKV_SHARED_DATA", ROOT.parent / "shared" / "data")) / "attributes"
CACHE = Path(os.environ.get("QKV_CACHE", "/tmp/qkv-cache")) / "attributes"
console = Console()


def speed(n_titles: int = 400, model_path: str | None = None) -> None:
    import qkv
    from qkv.attributes import AttributeModel, read_jsonl

    enc = qkv.load(threads=1)
    if model_path:
        model = AttributeModel.load(model_path, enc)
    else:  # a quick model: speed depends on the label count and features, not on how well it was fitted
        small = read_jsonl(DATA / "ae110k" / "train_small.jsonl")
        model, _ = AttributeModel.train(small, enc, max_iter=40, cache_dir=CACHE)
    titles = [ex.title for ex in read_jsonl(DATA / "ae110k" / "train.jsonl")][:n_titles]
    titles += [ex.title for ex in read_jsonl(DATA / "oamine" / "train.jsonl")][:n_titles // 2]
    enc.encode(titles[:32])  # warm up
    model.extract(titles[:32])
    t0, c0 = time.perf_counter(), time.process_time()
    enc.encode(titles)
    t_enc, c_enc = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    model.extract(titles)
    t_ext, c_ext = time.perf_counter() - t0, time.process_time() - c0
    tab = Table(title=f"attribute extraction, {len(titles)} titles, 1 BLAS thread (target ≥ 150 titles/s)")
    for c in ("what", "wall s", "titles/s", "CPU s", "titles per CPU-s", "vs encoder"):
        tab.add_column(c, justify="left" if c == "what" else "right")
    n = len(titles)
    tab.add_row("enc.encode (reference: encoder alone)", f"{t_enc:.2f}", f"{n / t_enc:.0f}", f"{c_enc:.2f}",
                f"{n / c_enc:.0f}", "1.00")
    tab.add_row("AttributeModel.extract (encoder + CRF)", f"{t_ext:.2f}", f"{n / t_ext:.0f}", f"{c_ext:.2f}",
                f"{n / c_ext:.0f}", f"{t_enc / t_ext:.2f}")
    console.print(tab)
    load = os.getloadavg()[0]
    console.print(f"[dim]load average during the run: {load:.1f} on {os.cpu_count()} CPUs "
                  "(a shared machine: titles/s scale down with load)[/]")


def quality(sets: list[str], max_iter: int) -> None:
    import qkv
    from qkv.attributes import (AttributeModel, dictionary_baseline, read_bio, read_jsonl, score, span_scores,
                                split_dev)

    enc = qkv.load(threads=1)
    for name in sets:
        t0 = time.perf_counter()
        if name == "taobao_zh":
            train = read_bio(DATA / name / "train.txt")
            dev = read_bio(DATA / name / "dev.txt")
        else:
            train, dev = split_dev(read_jsonl(DATA / name / "train.jsonl"), 20)
        model, rep = AttributeModel.train(train, enc, max_iter=max_iter, cache_dir=CACHE)
        if name == "taobao_zh":
            s = span_scores(dev, model.extract([e.title for e in dev], all_spans=True, cache_dir=CACHE))
            extra = ""
        else:
            preds = model.extract([e.title for e in dev], [e.category for e in dev], cache_dir=CACHE)
            s = score(dev, preds)
            sn = score(dev, preds, normalize=True)
            b = score(dev, dictionary_baseline(train, [e.title for e in dev]))
            extra = (f"; normalized micro-F1 {100 * sn.micro.f1:.2f}; dictionary baseline micro-F1 "
                     f"{100 * b.micro.f1:.2f}")
        tab = Table(title=f"{name}: train {len(train)} / dev {len(dev)} titles · {s.protocol} · micro-F1 "
                          f"{100 * s.micro.f1:.2f} (P {100 * s.micro.precision:.2f} R {100 * s.micro.recall:.2f}) · "
                          f"macro-F1 {s.macro['f1']:.2f}")
        for c in ("attribute", "gold", "P", "R", "F1"):
            tab.add_column(c, justify="left" if c == "attribute" else "right")
        for a, c in s.as_dict()["per_attribute"].items():
            if c["gold"] or c["fp"]:
                tab.add_row(a, str(c["gold"]), f"{c['precision']:.1f}", f"{c['recall']:.1f}", f"{c['f1']:.1f}")
        console.print(tab)
        console.print(f"[dim]{name}: trained in {rep.seconds:.0f}s ({rep.optimiser['iterations']} L-BFGS iterations), "
                      f"whole run {time.perf_counter() - t0:.0f}s{extra}[/]")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quality", action="store_true", help="also train and score on dev splits (minutes)")
    ap.add_argument("--sets", default="ae110k,oamine,taobao_zh")
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--model", help="time this attribute model instead of training a quick one")
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        console.print(f"[yellow]{DATA} not found: the attribute bench needs the shared data; skipped.[/]")
        return 0
    speed(model_path=args.model)
    if args.quality:
        quality([s for s in args.sets.split(",") if s], args.max_iter)
    return 0


if __name__ == "__main__":
    sys.exit(main())
