"""``qkv eval summarize``: ROUGE of qkv and the baselines on products with reference summaries,
all under the same budgets and token counter, in one run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qkv.errors import InputError
from qkv.progress import Count
from qkv.summarize import baselines as B
from qkv.summarize.core import Document, Params, _joiner, prepare, select
from qkv.summarize.readers import Product, read_reviews
from qkv.summarize.rouge import TYPES, rouge
from qkv.summarize.sentences import split_sentences
from qkv.summarize.units import split_units
from qkv.summarize.tokens import get_counter

SYSTEMS = ("qkv", "lead", "random", "lexrank", "textrank", "centroid", "oracle", "oracle-clause")


@dataclass
class EvalResult:
    rows: list[dict]                 # one per (system, budget): rouge1, rouge2, rougeL, tokens
    n_products: int
    n_references: float
    tokenizer: str
    rouge_tokenizer: str
    params: dict = field(default_factory=dict)
    seeds: int = 5

    def table(self, budget: int) -> list[dict]:
        return [r for r in self.rows if r["budget"] == budget]

    def score(self, system: str, budget: int, metric: str = "rouge1") -> float:
        for r in self.rows:
            if r["system"] == system and r["budget"] == budget:
                return r[metric]
        raise KeyError((system, budget))

    def to_dict(self) -> dict:
        return {"n_products": self.n_products, "references_per_product": self.n_references,
                "tokenizer": self.tokenizer, "rouge_tokenizer": self.rouge_tokenizer, "params": self.params,
                "random_seeds": self.seeds, "rows": self.rows}


def load_products(data: str | Path) -> list[Product]:
    """Products with references from a file, or from every .csv/.tsv/.jsonl file in a folder."""
    data = Path(data)
    files = sorted(p for p in data.iterdir() if p.suffix.lower() in (".csv", ".tsv", ".jsonl")) \
        if data.is_dir() else [data]
    if not files:
        raise InputError(f"{data} has no .csv, .tsv or .jsonl files")
    products = [p for f in files for p in read_reviews(f)]
    products = [p for p in products if p.references]
    if not products:
        raise InputError(f"{data} has no products with reference summaries (FewSum layout: rev1.., summ1..)")
    return products


def prepare_all(products: list[Product], encoder, params: Params = Params(), progress=None) -> list[Document]:
    """One Document per product, embedding every sentence in one batched pass."""

    class _Collect:  # the first pass collects texts; one encode call covers all products
        def __init__(self):
            self.texts: list[str] = []

        def __getattr__(self, name):
            return getattr(encoder, name)

        def encode(self, texts, **kw):
            self.texts.extend(texts)
            return np.zeros((len(texts), encoder.dim), dtype=np.float32)

    col = _Collect()
    docs = [prepare(list(p.reviews), encoder=col, params=params) for p in products]
    from qkv.summarize.core import PRECISION, _centre

    # The same role and centring as prepare() gives one product at a time (summarize's own path).
    vecs = encoder.encode(col.texts, progress=progress, precision=PRECISION, role="query")
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    at = 0
    for d in docs:
        d.vectors = vecs[at:at + len(d.cand)].astype(np.float32)
        d.notes = [n for n in d.notes if not n.startswith("sentence vectors centred")]
        d.vectors = _centre(d.vectors, d.mass, params.center, d.notes)
        at += len(d.cand)
    return docs


def sentences_of(product: Product) -> tuple[list[str], np.ndarray]:
    """Whole sentences of a product's reviews, for the baselines (which stay at sentence level
    whatever units qkv uses)."""
    texts, owner = [], []
    for i, r in enumerate(t for t in product.texts if t.strip()):
        for sp in split_sentences(r):
            texts.append(sp.text)
            owner.append(i)
    return texts, np.asarray(owner, dtype=np.int64)


def clauses_of(product: Product) -> list[str]:
    return [sp.text for r in product.texts if r.strip() for sp in split_units(r, "clause")]


def run_system(system: str, doc: Document, product: Product, budget: int, counter, params: Params,
               rouge_tokenizer: str = "default", seed: int = 0) -> str:
    """The summary text ``system`` writes for one product."""
    if system == "qkv":
        return select(doc, budget, counter, params, tokens_before=0, allow_cut=True).text
    sents, review_of = sentences_of(product)
    if system == "lead":
        rank = B.rank_lead(sents, review_of)
    elif system == "random":
        rank = B.rank_random(sents, seed)
    elif system == "lexrank":
        rank = B.rank_lexrank(sents)
    elif system == "textrank":
        rank = B.rank_textrank(sents)
    elif system == "centroid":
        rank = B.rank_centroid(sents, [t for t in doc.reviews if t.strip()])
    elif system in ("oracle", "oracle-clause"):
        units = sents if system == "oracle" else clauses_of(product)
        return _joiner([units[i] for i in B.oracle(units, list(product.references), budget, counter, _joiner,
                                                    rouge_tokenizer)])
    else:
        raise InputError(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")
    return _joiner([sents[i] for i in B.fill(rank, sents, budget, counter, _joiner)])


def evaluate(products: list[Product], budgets=(40, 75, 150), *, tokenizer: str = "cl100k",
             rouge_tokenizer: str = "default", systems=SYSTEMS, encoder=None, params: Params = Params(),
             seeds: int = 5, docs: list[Document] | None = None, progress=None) -> EvalResult:
    """ROUGE F1 (×100) of each system at each budget, averaged over references then products."""
    if not products:
        raise InputError("no products to evaluate")
    for s in systems:
        if s not in SYSTEMS:
            raise InputError(f"unknown system {s!r}; choose from {', '.join(SYSTEMS)}")
    budgets = [int(b) for b in budgets]
    if any(b < 1 for b in budgets):
        raise InputError("budgets must be whole numbers ≥ 1")
    if encoder is None:
        from qkv.summarize.core import default_encoder

        encoder = default_encoder([r.text for p in products for r in p.reviews])
    counter = get_counter(tokenizer, encoder)
    if docs is None:
        docs = prepare_all(products, encoder, params)
    rows = []
    count = Count(progress, "score", len(systems) * len(budgets))  # one (system, budget) pair at a time
    for system in systems:
        for budget in budgets:
            per_product = []
            lengths = []
            for p, d in zip(products, docs):
                runs = range(seeds) if system == "random" else [0]
                scores = []
                for seed in runs:
                    text = run_system(system, d, p, budget, counter, params, rouge_tokenizer, seed)
                    lengths.append(counter.count(text))
                    scores.append(rouge(text, p.references, rouge_tokenizer))
                per_product.append({t: float(np.mean([s[t] for s in scores])) for t in TYPES})
            row = {"system": system, "budget": budget,
                   **{t: float(np.mean([s[t] for s in per_product])) for t in TYPES},
                   "tokens": float(np.mean(lengths)), "max_tokens": int(max(lengths))}
            rows.append(row)
            count.add()
    from dataclasses import asdict

    return EvalResult(rows, len(products), float(np.mean([len(p.references) for p in products])),
                      counter.name, rouge_tokenizer, asdict(params), seeds)
