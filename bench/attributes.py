"""Attribute extraction: speed (titles/s on one thread) and, with --quality, dev-split scores.

    .venv/bin/python bench/attributes.py              # speed: extract vs the bare encoder, same titles
    .venv/bin/python bench/attributes.py --quality    # + train on train.jsonl minus a 20% dev split, score dev
    .venv/bin/python bench/attributes.py --compare A.qkvattr B.qkvattr --sets ae110k   # paired bootstrap

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
console = Console(width=None if sys.stdout.isatty() else 110)


TARGET = 150  # titles per second on one thread (issue 5)


def _timed(fns: list, repeats: int) -> list[tuple[float, float]]:
    """Best (wall s, CPU s) of each function over ``repeats`` rounds, the functions taking turns
    within a round so that all of them see the same neighbours. CPU time of this process is the
    fair measure on a shared machine; the best round is the one least disturbed."""
    best: list = [None] * len(fns)
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            r = (time.perf_counter() - t0, time.process_time() - c0)
            best[k] = r if best[k] is None or r[1] < best[k][1] else best[k]
    return best


def speed(n_titles: int = 600, model_path: str | None = None, repeats: int = 2) -> dict:
    import qkv
    from qkv.attributes import AttributeModel, read_jsonl
    from qkv.attributes.features import token_vectors

    enc = qkv.load(threads=1)
    if model_path:
        model = AttributeModel.load(model_path, enc)
        what = model_path
    else:  # speed depends on the label count, layers and features, not on how well it was fitted
        model, _ = AttributeModel.train(read_jsonl(DATA / "ae110k" / "train.jsonl"), enc, max_iter=10,
                                        cache_dir=CACHE)
        what = "a quick model (10 L-BFGS iterations on AE-110K train.jsonl, default settings)"
    titles = [ex.title for ex in read_jsonl(DATA / "ae110k" / "train.jsonl")][:n_titles * 2 // 3]
    titles += [ex.title for ex in read_jsonl(DATA / "oamine" / "train.jsonl")][:n_titles - len(titles)]
    layers = tuple(model.settings["layers"])
    dense = model.settings.get("use_dense", True)
    nl = enc.config.num_layers
    upto = max(l % nl for l in layers) + 1 if dense else 0
    enc.encode(titles[:32])  # warm up
    model.extract(titles[:32])
    steps = [(f"encoder alone: enc.encode ({nl} layers)", lambda: enc.encode(titles))]
    if dense:
        steps.append((f"encoder, model's layers ({upto} of {nl})", lambda: token_vectors(enc, titles, layers)))
    steps.append(("extraction: model.extract", lambda: model.extract(titles)))
    rows = list(zip([name for name, _ in steps], _timed([fn for _, fn in steps], repeats)))
    n = len(titles)
    tab = Table(title=f"attribute extraction speed: {n} titles (AE-110K + OA-Mine), 1 BLAS thread, "
                      f"best of {repeats}; target ≥ {TARGET} titles/s")
    for c in ("what", "wall s", "titles/s", "CPU s", "titles/CPU-s", "vs encode"):
        tab.add_column(c, justify="left" if c == "what" else "right")
    for name, (w, c) in rows:
        tab.add_row(name, f"{w:.2f}", f"{n / w:.0f}", f"{c:.2f}", f"{n / c:.0f}", f"{rows[0][1][1] / c:.2f}")
    console.print(tab)
    w_ext, c_ext = rows[-1][1]
    c_vec = rows[1][1][1] if dense else 0.0
    load = os.getloadavg()[0]
    uses = (f"features from encoder layers {list(layers)}, so {upto} of {nl} layers run" if dense
            else "word features only (--no-dense): no encoder pass at all")
    console.print(f"[dim]model: {what}; {len(model.attrs)} attributes ({model.crf.K} BIO labels), {uses}. "
                  "extract = tokens, encoder, features, CRF, spans; outside the encoder: "
                  f"{100 * (c_ext - c_vec) / c_ext:.0f}% of its CPU time. "
                  f"Load average {load:.1f} on {os.cpu_count()} CPUs (wall-clock figures fall with load; "
                  "CPU time is the fairer measure on a shared machine).[/]")
    per_cpu, per_wall = n / c_ext, n / w_ext
    vs_encode = rows[0][1][1] / c_ext
    ok = per_cpu >= TARGET
    colour = "green" if ok else "red"
    console.print(f"[bold {colour}]verdict: extraction {per_cpu:.0f} titles per CPU-second "
                  f"({per_wall:.0f} titles/s wall at load {load:.1f}) — target ≥ {TARGET} on one thread "
                  f"{'MET' if ok else 'NOT MET'}; {vs_encode:.2f}× the speed of the whole encoder alone "
                  f"({n / rows[0][1][1]:.0f} titles per CPU-second in this run)[/]")
    if load > (os.cpu_count() or 1):
        console.print(f"[yellow]load {load:.1f} on {os.cpu_count()} CPUs: CPU seconds stretch too when the "
                      "neighbours share the cores' caches, so compare against the encoder row of this run.[/]")
    return {"titles": n, "rows": {name: {"wall_s": w, "cpu_s": c} for name, (w, c) in rows},
            "titles_per_cpu_s": per_cpu, "titles_per_s_wall": per_wall, "vs_encode": vs_encode, "target": TARGET,
            "met": ok}


def quality(sets: list[str], max_iter: int) -> None:
    import qkv
    from qkv.attributes import (AttributeModel, dictionary_baseline, read_bio, read_jsonl, score, span_scores,
                                split_dev)

    enc = qkv.load(threads=1)
    for name in sets:
        t0 = time.perf_counter()
        if name == "taobao_zh":
            train = read_bio(DATA / name / "train.txt")[:3000]  # half: keeps a shared machine usable
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


def compare(name: str, model_a: str, model_b: str) -> dict:
    """Dev micro-F1 of two models on one set's dev split, and a paired bootstrap of the difference."""
    import qkv
    from qkv.attributes import AttributeModel, read_jsonl, split_dev
    from qkv.attributes.evaluate import paired_bootstrap

    enc = qkv.load(threads=1)
    _, dev = split_dev(read_jsonl(DATA / name / "train.jsonl"), 20)
    titles, cats = [e.title for e in dev], [e.category for e in dev]
    preds = [AttributeModel.load(m, enc).extract(titles, cats) for m in (model_a, model_b)]
    r = paired_bootstrap(dev, *preds)
    console.print(f"{name} dev ({len(dev)} titles): A {Path(model_a).name} micro-F1 {r['f1_a']:.2f}, "
                  f"B {Path(model_b).name} {r['f1_b']:.2f}; A − B = {r['diff']:+.2f}, bootstrap s.d. "
                  f"{r['sd']:.2f}, 95% interval [{r['ci95'][0]:+.2f}, {r['ci95'][1]:+.2f}] ({r['resamples']} "
                  "resamples of the dev titles)", highlight=False)
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quality", action="store_true", help="also train and score on dev splits (minutes)")
    ap.add_argument("--sets", default="ae110k,oamine,taobao_zh")
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--model", help="time this attribute model instead of training a quick one")
    ap.add_argument("--titles", type=int, default=600, help="how many titles to time (default 600)")
    ap.add_argument("--repeats", type=int, default=2, help="time each step this many times, keep the best")
    ap.add_argument("--compare", nargs=2, metavar=("MODEL_A", "MODEL_B"),
                    help="instead of timing: score two models on the --sets dev splits, paired bootstrap")
    args = ap.parse_args(argv)
    need = [DATA / "ae110k" / "train.jsonl", DATA / "oamine" / "train.jsonl"]
    if not all(p.is_file() for p in need):
        console.print(f"[yellow]attribute bench skipped: it times extraction on real titles from {DATA} "
                      "(ae110k/ and oamine/ train.jsonl), which is not here. Nothing measured; this is not "
                      "a failure.[/]")
        return 0
    if args.compare:
        for name in [s for s in args.sets.split(",") if s and s != "taobao_zh"]:
            compare(name, *args.compare)
        return 0
    speed(args.titles, args.model, args.repeats)
    if args.quality:
        quality([s for s in args.sets.split(",") if s], args.max_iter)
    return 0


if __name__ == "__main__":
    sys.exit(main())
