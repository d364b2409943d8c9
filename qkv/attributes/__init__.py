"""Product attributes from titles, learned from labelled examples, with spans and confidences.

    from qkv.attributes import AttributeModel, read_jsonl
    model, report = AttributeModel.train(read_jsonl("train.jsonl"), qkv.load())
    model.save("attrs.qkvattr")
    AttributeModel.load("attrs.qkvattr").extract(["Nike Air Max 270 Men's Running Shoes"])
    # -> [[Attribute(attr, value, start, end, confidence), ...]]   title[start:end] == value

Pieces: ``data`` (readers, dev split), ``features`` (encoder token vectors + word features),
``align`` (gold values -> BIO labels), ``crf`` (the tagger), ``model`` (train / extract / files),
``evaluate`` (the exact-match protocol), ``normalize`` (optional value normalisation).
"""

from qkv.attributes.data import Example, Span, read_bio, read_examples, read_jsonl, split_dev
from qkv.attributes.evaluate import Scores, dictionary_baseline, score, span_scores
from qkv.attributes.model import Attribute, AttributeModel, TrainReport
from qkv.attributes.normalize import normalize_value

__all__ = ["Attribute", "AttributeModel", "Example", "Scores", "Span", "TrainReport", "dictionary_baseline",
           "normalize_value", "read_bio", "read_examples", "read_jsonl", "score", "span_scores", "split_dev"]
