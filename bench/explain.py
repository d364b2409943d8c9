"""Explain benchmark: the numbers behind the tour's default head, and how long each view takes.

    .venv/bin/python bench/explain.py              # 300 titles from each of two sets
    .venv/bin/python bench/explain.py --titles 100
    .venv/bin/python bench/explain.py --model multilingual-e5-small --level word --zh
        # the multilingual model's default head: word-level maps, plus 300 Chinese Taobao titles

1. Head profile (``qkv.explain.heads``) over the train titles of OA-Mine and AE-110K in
   ../shared/data/attributes (read only, never copied): per head the share of weight on
   [CLS]/[SEP], on the previous/next token, the row entropy, and ``far_peak`` — the largest weight a
   content token puts on one other, non-neighbouring content token. The tour's default head is the
   one with the highest far_peak. Without the data the profile is skipped (said clearly, exit 0).
   ``--zh`` adds Chinese titles: the first titles of taobao_zh/train.txt (character BIO, one
   character per line, blank line between titles; a title is its characters joined).
   ``--level word`` profiles word-level maps (``head_profile(level="word")``).
2. Timings on a fixed title, one BLAS thread, each the best of 3 after one warm-up run: the tour,
   attention_maps, value zeroing (all layers), the full explanation, the HTML page.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "attributes"
TITLE = "Nike Air Max 270 Men's Running Shoes Breathable Lightweight"


def _best(fn, n: int = 3) -> float:
    fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def _bio_titles(path: Path, n: int) -> list[str]:
    """The first ``n`` titles of a character-BIO file (one "char TAG" per line, blank between titles)."""
    out, cur = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if cur:
                    out.append("".join(cur))
                    cur = []
                    if len(out) == n:
                        break
                continue
            cur.append(line.split(" ")[0] if not line.startswith(" ") else " ")
    if cur and len(out) < n:
        out.append("".join(cur))
    return out


def main(argv=None) -> int:
    from rich.console import Console
    from rich.table import Table

    import qkv
    from qkv.explain import attention_maps, head_profile, tour
    from qkv.explain.report import explain

    ap = argparse.ArgumentParser()
    ap.add_argument("--titles", type=int, default=300, help="titles per data set for the head profile")
    ap.add_argument("--model", default=None, help="model to profile (default: MiniLM)")
    ap.add_argument("--level", default="token", choices=("token", "word"), help="token- or word-level maps")
    ap.add_argument("--zh", action="store_true", help="add Chinese titles from taobao_zh/train.txt")
    ap.add_argument("--no-timings", action="store_true", help="only the head profile")
    args = ap.parse_args(argv)
    con = Console()
    enc = qkv.load(args.model, threads=1)
    con.print(f"model {enc.name} · level {args.level} · load {open('/proc/loadavg').read().split()[:3]}")

    sets = [DATA / "oamine" / "train.jsonl", DATA / "ae110k" / "train.jsonl"]
    zh_set = DATA / "taobao_zh" / "train.txt"
    if all(p.is_file() for p in sets) and (zh_set.is_file() or not args.zh):
        from qkv.cli._common import progress_bars

        titles = []
        for p in sets:
            with open(p, encoding="utf-8") as f:
                titles += [json.loads(line)["input"] for _, line in zip(range(args.titles), f)]
        if args.zh:
            titles += _bio_titles(zh_set, args.titles)
        t0 = time.perf_counter()
        with progress_bars({"heads": "head profile"}) as bar:
            prof = head_profile(enc, titles, level=args.level, progress=bar)
        a = prof.stats["far_peak"]
        order = np.argsort(-a, axis=None)[:8]
        tab = Table(title=f"Heads with the highest far_peak ({args.level} level) over {prof.n_texts} titles "
                          f"({time.perf_counter() - t0:.1f} s)")
        for c in ("layer", "head", "far_peak", "[CLS]/[SEP]", "previous", "next", "entropy"):
            tab.add_column(c, justify="right")
        for i in order:
            l, h = divmod(int(i), a.shape[1])
            s = prof.stats
            tab.add_row(str(l), str(h), f"{s['far_peak'][l, h]:.4f}", f"{s['special'][l, h]:.3f}",
                        f"{s['previous'][l, h]:.3f}", f"{s['next'][l, h]:.3f}", f"{s['entropy'][l, h]:.3f}")
        con.print(tab)
        con.print(f"best head by far_peak: layer {prof.best()[0]} head {prof.best()[1]}")
        if args.zh:  # the same heads on each language alone
            n_en = 2 * args.titles
            for name, part in (("English", titles[:n_en]), ("Chinese", titles[n_en:])):
                p = head_profile(enc, part, level=args.level)
                l, h = prof.best()
                bl, bh = p.best()
                con.print(f"{name} ({p.n_texts} titles): far_peak of layer {l} head {h} = "
                          f"{p.stats['far_peak'][l, h]:.4f}; best alone: layer {bl} head {bh} "
                          f"({p.stats['far_peak'][bl, bh]:.4f})")
    else:
        con.print(f"[yellow]no data at {DATA} (../shared/data is absent): head profile skipped[/]")
    if args.no_timings:
        return 0

    tab = Table(title=f"Timings on “{TITLE}” (best of 3, 1 BLAS thread)")
    tab.add_column("what")
    tab.add_column("seconds", justify="right")
    m = attention_maps(enc, TITLE)
    rows = [("tour (5 steps + check)", lambda: tour(enc, TITLE)),
            ("attention_maps (one traced pass)", lambda: attention_maps(enc, TITLE)),
            ("value zeroing, all 6 layers", lambda: (m._cache.pop("value_zeroing", None), m.value_zeroing())),
            ("explain (maps, VZ, occlusion, selling points, pair)", lambda: explain(enc, TITLE, query="running shoes")),
            ("HTML page", lambda: explain(enc, TITLE).to_html())]
    for name, fn in rows:
        tab.add_row(name, f"{_best(fn):.3f}")
    con.print(tab)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
