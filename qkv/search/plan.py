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

# English queries against a catalog that also holds Chinese titles search the Chinese words for
# their phrases too (``Translator.chinese_for``); False: as typed (bench/mixed_catalog.py compares)
ENGLISH_TO_CHINESE = True

Groups = tuple  # crosslingual.Group rows, as tuples: ((weight, (term, …)), …) per source word


@dataclass(frozen=True)
class QueryPlan:
    """How ``query`` is searched.

    * ``keyword``: the text the keyword side searches — the query itself; for a translated query
      every term of ``groups`` (the original's terms, then each word's English and alternatives);
      for an English query against a catalog holding Chinese, every term of its ``groups`` (its
      phrases and their Chinese words); else, with a seller's glossary, the query and the
      glossary's Chinese terms for its words.
    * ``groups``: a translated query's structured keyword query (``crosslingual.keyword_groups``:
      one synonym group per source word, weighted by trust), or an English query's against a
      bilingual catalog (``crosslingual.english_groups``: a phrase and its Chinese words); () for a
      query searched as typed.
    * ``dense``: the texts whose vectors make the dense query — (query,), or (query, its English),
      mixed by ``crosslingual.mix_vectors``; each embedded after ``query_prefix`` (the index's model's
      query prefix, E5 "query: ").
    * ``translation``: the ``qkv.translate.Translation`` (None: searched as typed).
    * ``corrected``: the text an English query was searched as on both sides, its words that no
      title holds corrected to the catalog's own (``VectorStore.spell``); None: as typed.
    """

    query: str
    keyword: str
    dense: tuple[str, ...]
    query_prefix: str = ""
    translation: object | None = None
    groups: Groups = ()
    corrected: str | None = None

    @property
    def searched_as(self) -> str | None:
        """The English a Chinese query was also searched as (None: searched as typed)."""
        return None if self.translation is None else self.translation.text

    @property
    def translated(self) -> bool:
        """Whether the translated-query retrieval runs (structured keyword side, dense feedback)."""
        return bool(self.groups)


def plan_query(query: str, translator: Callable[[], object] | None = None, *, glossary: bool = False,
               query_prefix: str = "", speller: Callable[[str], str] | None = None) -> QueryPlan:
    """The plan of ``query`` (stripped). ``translator``: gives the ``qkv.translate.Translator`` over
    the catalog's vocabulary (called only for a query that needs it: it is built on first use), or
    None to search the query as typed; ``glossary``: whether a seller's glossary is in use (its
    Chinese terms then join an English query's keyword side); ``speller``: corrects the words of
    an English query that no title holds (``VectorStore.spell``), or None to keep them as typed."""
    from qkv.search.crosslingual import english_groups, flat_query, keyword_groups

    query = query.strip()
    han = zh.has_han(query)
    text = speller(query) if speller is not None and not han else query  # what both sides search
    corrected = text if text != query else None
    if translator is None:
        return QueryPlan(query, text, (text,), query_prefix, corrected=corrected)
    if not han:
        # a bilingual catalog: the query's phrases and their Chinese words as synonym groups, so the
        # keyword side finds the Chinese listings of the same product (crosslingual.english_groups)
        found = translator().chinese_for(text) if ENGLISH_TO_CHINESE else []
        if found:
            groups = tuple(tuple(g) for g in english_groups(text, found))
            return QueryPlan(query, flat_query(groups), (text,), query_prefix, None, groups, corrected)
        # a seller's glossary works both ways: its Chinese terms for the query's English words
        # let the keyword side find a bilingual catalog's Chinese titles
        cn = translator().glossary_terms_in(text) if glossary else []
        return QueryPlan(query, f"{text} {' '.join(cn)}" if cn else text, (text,), query_prefix, corrected=corrected)
    tr = translator().translate(query)
    if not tr.english:  # (nothing translated: 安踏 alone is searched as typed)
        return QueryPlan(query, query, (query,), query_prefix, tr)
    groups = tuple(tuple(g) for g in keyword_groups(query, tr))
    return QueryPlan(query, flat_query(groups), (query, tr.english), query_prefix, tr, groups)
