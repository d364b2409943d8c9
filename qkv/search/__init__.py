"""Semantic product search: dense (faiss) + keyword (SQLite FTS5 BM25) + fusion, with explanations.

    from qkv.search import Index
    idx = Index.open("my-index")
    for r in idx.search("breathable running shoes", k=5, mode="hybrid"):
        print(r.rank, r.score, r.title)

Layout: ``store`` (the store contract and the registry of backends), ``embedded/`` (the default
store: faiss + SQLite, one module per job), ``writelock`` (the single-writer lock), ``catalog``
(readers), ``filters``, ``build`` (building and updating),
``plan`` (a query's plan, made once), ``index`` (searching), ``crosslingual`` (searching with a translated query), ``fusion``, ``explain``,
``evaluate``. The keyword tokenizer is ``qkv.text.keywords``; query translation is ``qkv.translate``.
"""

from __future__ import annotations

from qkv.search import embedded as _embedded  # noqa: F401  (registers the default store; no faiss yet)

__all__ = ["Index", "QueryPlan", "SearchResponse", "SearchResult", "build_index", "parse_filter"]


def __getattr__(name):  # lazy: importing qkv.search must not pull faiss in
    if name in ("Index", "SearchResponse", "SearchResult", "build_index"):
        from qkv.search import index

        return getattr(index, name)
    if name == "QueryPlan":
        from qkv.search.plan import QueryPlan

        return QueryPlan
    if name == "parse_filter":
        from qkv.search.filters import parse_filter

        return parse_filter
    raise AttributeError(name)
