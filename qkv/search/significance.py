"""Is a change in search quality more than noise? Two evaluations of the same judged queries
compared query by query.

A seller trying an option (a term head, a query adapter, another model) sees NDCG@10 move by a
few thousandths, and on a few thousand queries that can be chance. Both evaluations score the same
queries, so the test is paired: d_q = metric_new(q) − metric_base(q) over the queries both scored
(a query with no relevant judged product has no NDCG in either and is left out). Reported: the
mean difference, its standard error sd(d)/√n, and the two-sided p of a paired randomization test
— each d_q's sign flipped at random, ``ROUNDS`` times, counting how often |mean| reaches the
observed one (Fisher's permutation test; Smucker, Allan & Carterette 2007, "A comparison of
statistical significance tests for information retrieval evaluation", found it, the bootstrap and
the t-test in agreement on IR metrics and recommend it, as it assumes nothing of the differences'
distribution — NDCG's clump at 0 and 1).
The flips come from a fixed seed, so the same files give the same p.

A per-query file (``qkv eval search --per-query``) holds one evaluation: its protocol, settings
and each query's metrics per mode; ``--baseline`` compares the run against one.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkv.errors import InputError

FORMAT = "qkv-eval-per-query"
VERSION = 1
ROUNDS = 10_000  # sign flips; p resolves to 1e-4
SEED = 0


@dataclass(frozen=True)
class Difference:
    """One mode's metric, new run against the baseline, over the ``n`` queries both scored."""
    mode: str
    metric: str
    n: int
    base: float  # mean over those queries
    new: float
    delta: float  # new − base
    se: float  # standard error of the mean difference (paired)
    p: float  # two-sided, paired randomization test

    def to_json(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


def paired_test(base: np.ndarray, new: np.ndarray, rounds: int = ROUNDS, seed: int = SEED) -> tuple[int, float, float, float]:
    """(n, mean difference, its standard error, two-sided p) of ``new`` − ``base``, paired,
    over the positions where neither is NaN."""
    base, new = np.asarray(base, np.float64), np.asarray(new, np.float64)
    keep = ~(np.isnan(base) | np.isnan(new))
    d = new[keep] - base[keep]
    n = len(d)
    if n == 0:
        return 0, float("nan"), float("nan"), float("nan")
    delta = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    if not np.any(d):
        return n, delta, se, 1.0  # nothing changed: no flip can differ
    rng = np.random.default_rng(seed)
    hits, observed = 0, abs(d.sum()) * (1 - 1e-12)  # a flip as extreme as the run counts (float noise aside)
    step = max(1, 2_000_000 // n)  # flips drawn in blocks of ~2M signs
    for at in range(0, rounds, step):
        signs = rng.integers(0, 2, size=(min(step, rounds - at), n), dtype=np.int8) * 2 - 1
        hits += int(np.count_nonzero(np.abs(signs @ d) >= observed))
    return n, delta, se, (hits + 1) / (rounds + 1)


def save(path: Path, protocol: str, settings: dict, qids: list[str], per: dict[str, dict[str, list[float]]]) -> None:
    """Write one evaluation's per-query metrics (NaN as null), atomically: a crash leaves the old file."""
    doc = {"format": FORMAT, "version": VERSION, "protocol": protocol, "settings": settings, "queries": qids,
           "modes": {m: {k: [None if math.isnan(x) else x for x in v] for k, v in ms.items()} for m, ms in per.items()}}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # beside it (one file system), the umask's mode
    try:
        tmp.write_text(json.dumps(doc, default=str), encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load(path: Path) -> dict:
    """A per-query file, checked: its queries and every metric list line up."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (write one with `qkv eval search … --per-query {path}`)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path} is not a per-query file of `qkv eval search --per-query` ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f"{path} is not a per-query file of `qkv eval search --per-query`")
    if doc.get("version") != VERSION:
        raise InputError(f"{path} is a version {doc.get('version')} per-query file; this qkv reads version {VERSION}")
    n = len(doc.get("queries", []))
    for m, ms in doc.get("modes", {}).items():
        for k, v in ms.items():
            if len(v) != n:
                raise InputError(f"{path}: {m} {k} holds {len(v)} values for {n} queries (the file is damaged)")
    return doc


def check_protocol(base: dict, protocol: str | None) -> None:
    """Refuse a baseline of another protocol (checkable before a run)."""
    if base.get("protocol") != protocol:
        raise InputError(f"the baseline was evaluated with the {base.get('protocol')} protocol, this run with "
                         f"{protocol}: compare runs of one protocol (both with or both without --rerank)")


def compare(base: dict, new: dict) -> list[Difference]:
    """Each mode and metric both evaluations hold, new against base, over their shared queries.
    Refused when they cannot be compared: another protocol or gain, or no query in common."""
    check_protocol(base, new.get("protocol"))
    gb, gn = base.get("settings", {}).get("gain_offset"), new.get("settings", {}).get("gain_offset")
    if gb != gn:
        raise InputError(f"the baseline's NDCG gain offset is {gb}, this run's {gn}: pass the same --gain-offset")
    at = {q: i for i, q in enumerate(base["queries"])}
    pairs = [(at[q], j) for j, q in enumerate(new["queries"]) if q in at]
    if not pairs:
        raise InputError("the baseline and this run share no query: evaluate the same queries "
                         "(the same --queries, --half and --limit)")
    bi, ni = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    out = []
    for mode, ms in new["modes"].items():
        for metric, vals in ms.items():
            b = base["modes"].get(mode, {}).get(metric)
            if b is None:
                continue
            bv = np.array([np.nan if x is None else x for x in b], np.float64)[bi]
            nv = np.array([np.nan if x is None else x for x in vals], np.float64)[ni]
            n, delta, se, p = paired_test(bv, nv)
            keep = ~(np.isnan(bv) | np.isnan(nv))
            out.append(Difference(mode, metric, n, float(bv[keep].mean()) if n else float("nan"),
                                  float(nv[keep].mean()) if n else float("nan"), delta, se, p))
    return out
