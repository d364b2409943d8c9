"""A query's plan: how it is searched, decided once, before anything is retrieved.

``Index.search`` runs one way: ``plan`` (here: translation, keyword text and groups, dense texts,
prefix) → retrieval (each side's candidates, from the plan) → fusion (the two candidate lists) →
rows. The plan is plain data: the response carries it (``SearchResponse.plan``), an explanation
reads the keyword text the search used from it, and evaluation plans its queries the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from qkv.text import zh

Groups = tuple  # crosslingual.Group rows, as tuples: ((weight, (term, …)), …) per source word


@dataclass(frozen=True)
class QueryPlan:
    """How ``query`` is searched.

    * ``keyword``: the text the keyword side searches — the query itself; for a translated query
      every term of ``groups`` (the original's terms, then each word's English and alternatives);
      for an English query with a seller's glossary, the query and the glossary's Chinese terms for
      its words (a bilingual catalog's Chinese titles).
    * ``groups``: a translated query's structured keyword query (``crosslingual.keyword_groups``:
      one synonym group per source word, weighted by trust); () for a query searched as typed.
    * ``dense``: the texts whose vectors make the dense query — (query,), or (query, its English),
      mixed by ``crosslingual.mix_vectors``; each embedded after ``query_prefix`` (the index's model's
      query prefix, E5 "query: ").
    * ``translation``: the ``qkv.translate.Translation`` (None: searched as typed).
    """

    query: str
    keyword: str
    dense: tuple[str, ...]
    query_prefix: str = ""
    translation: object | None = None
    groups: Groups = ()

    @property
    def searched_as(self) -> str | None:
        """The English a Chinese query was also searched as (None: searched as typed)."""
        return None if self.translation is None else self.translation.text

    @property
    def translated(self) -> bool:
        """Whether the translated-query retrieval runs (structured keyword side, dense feedback)."""
        return bool(self.groups)


def plan_query(query: str, translator: Callable[[], object] | None = None, *, glossary: bool = False,
               query_prefix: str = "") -> QueryPlan:
    """The plan of ``query`` (stripped). ``translator``: gives the ``qkv.translate.Translator`` over
    the catalog's vocabulary (called only for a query that needs it: it is built on first use), or
    None to search the query as typed; ``glossary``: whether a seller's glossary is in use (its
    Chinese terms then join an English query's keyword side)."""
    from qkv.search.crosslingual import flat_query, keyword_groups

    query = query.strip()
    as_typed = QueryPlan(query, query, (query,), query_prefix)
    if translator is None:
        return as_typed
    if not zh.has_han(query):
        # a seller's glossary works both ways: its Chinese terms for the query's English words
        # let the keyword side find a bilingual catalog's Chinese titles
        cn = translator().glossary_terms_in(query) if glossary else []
        return QueryPlan(query, f"{query} {' '.join(cn)}" if cn else query, (query,), query_prefix)
    tr = translator().translate(query)
    if not tr.text:
        return QueryPlan(query, query, (query,), query_prefix, tr)
    groups = tuple(tuple(g) for g in keyword_groups(query, tr))
    return QueryPlan(query, flat_query(groups), (query, tr.text), query_prefix, tr, groups)
