"""Review summaries under a hard token budget, scored by sentence-to-sentence attention.

>>> from qkv.summarize import summarize
>>> s = summarize(["Great shoes, very comfortable.", "Comfortable and light. Runs small."], budget=20)
>>> s.text, s.tokens_before, s.tokens_after, s.saving
"""

from qkv.summarize.core import Document, Params, Summary, SummarySentence, prepare, select, summarize
from qkv.summarize.readers import Product, Review, read_reviews
from qkv.summarize.sentences import Span, split_sentences
from qkv.summarize.tokens import TOKENIZERS, get_counter

__all__ = ["Document", "Params", "Product", "Review", "Span", "Summary", "SummarySentence", "TOKENIZERS",
           "get_counter", "prepare", "read_reviews", "select", "split_sentences", "summarize"]
