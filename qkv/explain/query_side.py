"""The query side of attention: how a short query about the product attends to the title's words.

Rollout asks what the title's own vector is made of; a shopper's search is another text looking at
the title. With no search data, the catalog can write a stand-in query: the words the title's
nearest catalog neighbours share most (``product_query``: "angle bracket" for a Simpson angle
among other brackets) — what the product *is*, in the catalog's words, whether or not the title
says it. The query and the title are read as one text, "query | title", and each title word's
score is the last layer's attention from the query's pieces to the word's pieces (averaged over
heads and query pieces, summed over the word's pieces): the words the query leans on
(``query_attention``). The tokens a word is compared with are the model's own, so the same
works on Chinese titles with a multilingual model.

Measured on the Home Depot development judgments like every method (docs/explain.md): it is
an option (method "query"), not a default.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from qkv.explain.title_terms import STOP, fold

QUERY_WORDS = 4  # words in the stand-in query
SEPARATOR = " | "


def product_query(catalog, vector: np.ndarray, title: str, *, k: int = 20, words: int = QUERY_WORDS) -> str:
    """The ``words`` words most of the title's ``k`` nearest catalog titles hold (numbers, units
    and stop words left out), most shared first; "" when the title has no neighbour."""
    from qkv.explain.points import UNITS

    nb = catalog.neighbours(vector, title, k)
    held: Counter = Counter()
    shown: dict[str, str] = {}
    for i in nb:
        seen = set()
        for tok in catalog.titles[i].split():
            f = fold(tok)
            if not f or f in STOP or f in UNITS or f in seen or any(c.isdigit() for c in f) \
                    or not any(c.isalpha() for c in f):
                continue
            seen.add(f)
            held[f] += 1
            shown.setdefault(f, f)
    return " ".join(shown[f] for f, _ in held.most_common(words))


def query_attention(enc, query: str, title: str, words) -> np.ndarray:
    """For ``words`` of ``title`` (objects with .start/.end), the last layer's attention from the
    query's pieces to each word's pieces in the text "query | title" (mean over heads and query
    pieces, summed over the word's pieces). No query: zeros."""
    if not query.strip() or not len(words):
        return np.zeros(len(words))
    text = query + SEPARATOR + title
    shift = len(query) + len(SEPARATOR)
    last = enc.config.num_layers - 1
    tr = enc.trace([text], keep=[f"layers.{last}.attn.weights"], truncate=True)
    seq = tr.seqs[0]
    a = tr.get(f"layers.{last}.attn.weights", 0).mean(axis=0)  # [n, n], heads averaged
    offs = seq.offsets
    rows = [t for t, (s, e) in enumerate(offs) if not seq.special[t] and e <= len(query) and e > s]
    if not rows:
        return np.zeros(len(words))
    col = a[rows].mean(axis=0)
    out = np.zeros(len(words))
    for i, w in enumerate(words):
        lo, hi = w.start + shift, w.end + shift
        toks = [t for t, (s, e) in enumerate(offs) if not seq.special[t] and s < hi and e > lo]
        out[i] = float(col[toks].sum()) if toks else 0.0
    return out
