"""The one rule for the model that runs when none is named: ``default_model(texts)``.

Every command and API that is given text and no model asks here (``qkv encode``, ``tour``,
``explain``, ``attrs train``, ``summarize``, a new search index, the sample, the web app). A model
that is stored wins over the rule: a search index and an attribute model name the model they were
made with, and are always used with it.

* **Text the English model cannot read** — a letter of any script but Latin (Chinese, mixed
  Chinese and English, Japanese, Cyrillic …) → multilingual-e5-small. all-MiniLM-L6-v2's
  vocabulary turns most Chinese characters into [UNK].
* **Text not known when the model is chosen** (``texts=None``): a search index and the web app
  are asked queries nobody has typed yet, in any language → multilingual-e5-small. On English
  search it also measured better on the dense side (Home Depot dev, NDCG@10 0.3299 vs 0.2758) and
  as well on hybrid (docs/search.md, "Which model").
* **English text** (Latin letters only) → all-MiniLM-L6-v2: faster on batches (e5, with twice the
  layers, embeds titles at 0.78× and reviews at 0.73× MiniLM's rate: docs/engine.md, "Parity and
  speed of multilingual-e5-small"), and the figures quoted for English explanations (the tour's
  head), attributes and summaries (FewSum ROUGE) were measured on it; nothing measured says e5
  would do better on them.

``qkv.load()`` with no name is the loader, not a command: it loads ``DEFAULT_MODEL`` (the English
model), as it always did.
"""

from __future__ import annotations

import re
from typing import Iterable

from qkv.model.hub import E5_SMALL, MINILM

ENGLISH = MINILM.hub_id  # sentence-transformers/all-MiniLM-L6-v2
MULTILINGUAL = E5_SMALL.hub_id  # intfloat/multilingual-e5-small

# A letter outside the Latin script (ASCII letters, Latin-1 and Latin Extended A/B, Latin
# Extended Additional: "Café", "Señor", "Đà Nẵng" are still read by the English model's pieces).
_NON_LATIN_LETTER = re.compile(r"(?![A-Za-z\u00aa\u00ba\u00c0-\u024f\u1e00-\u1eff])[^\W\d_]")


def is_english(text: str) -> bool:
    """Whether every letter of ``text`` is Latin (digits, punctuation and symbols do not count)."""
    return _NON_LATIN_LETTER.search(text) is None


def default_model(texts: str | Iterable[str] | None = None) -> str:
    """The model to run on ``texts`` when none is named or stored (a hub id ``qkv.load`` takes):
    the English all-MiniLM-L6-v2 when every text is English, else multilingual-e5-small; None (the
    text is not known yet: an index, a server) → multilingual-e5-small."""
    if texts is None:
        return MULTILINGUAL
    if isinstance(texts, str):
        texts = (texts,)
    return ENGLISH if all(is_english(t) for t in texts) else MULTILINGUAL
