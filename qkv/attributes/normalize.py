"""Optional normalisation of extracted values, so "85mm" and "8.5 cm", "Men's" and "mens",
"NIKE" and "Nike" compare equal. Exact-match scores never use it; ``qkv attrs eval --normalize``
reports a second, normalised score beside them.

Rules, in order: a number with a known unit becomes the number in a base unit (length mm, weight g,
volume ml) — "8.5 cm" -> "85 mm"; a shoe/clothing size with a region becomes "us 10"; gender words
become men / women / unisex / boys / girls / kids; colour words are lower-cased with British
spellings and "grey" folded; anything else is case-folded with runs of spaces collapsed
(brand casing: "NIKE" == "Nike").
"""

from __future__ import annotations

import re

_LENGTH = {"mm": 1, "millimeter": 1, "millimeters": 1, "cm": 10, "centimeter": 10, "centimeters": 10,
           "m": 1000, "meter": 1000, "meters": 1000, "in": 25.4, "inch": 25.4, "inches": 25.4, '"': 25.4,
           "ft": 304.8, "feet": 304.8, "foot": 304.8}
_WEIGHT = {"g": 1, "gr": 1, "gram": 1, "grams": 1, "kg": 1000, "mg": 0.001, "oz": 28.3495, "ounce": 28.3495,
           "ounces": 28.3495, "lb": 453.592, "lbs": 453.592, "pound": 453.592, "pounds": 453.592}
_VOLUME = {"ml": 1, "l": 1000, "liter": 1000, "liters": 1000, "litre": 1000, "fl oz": 29.5735,
           "fl. oz": 29.5735, "fl.oz": 29.5735, "floz": 29.5735}
_UNITS = [(u, f, "ml") for u, f in _VOLUME.items()] + [(u, f, "mm") for u, f in _LENGTH.items()] + \
         [(u, f, "g") for u, f in _WEIGHT.items()]
_UNITS.sort(key=lambda x: -len(x[0]))
_NUM_UNIT = re.compile(r"^\s*(\d+(?:[.,]\d+)?)\s*(" + "|".join(re.escape(u) for u, _, _ in _UNITS) + r")\.?\s*$", re.I)
_SIZE = re.compile(r"^\s*(?:(us|uk|eu)\s*(\d+(?:\.\d+)?)|(\d+(?:\.\d+)?)\s*(?:[a-z]{1,2}\s+)?(us|uk|eu))\s*$", re.I)
_GENDER = {"men": "men", "mens": "men", "men's": "men", "man": "men", "male": "men", "boy": "boys",
           "boys": "boys", "boy's": "boys", "boys'": "boys", "women": "women", "womens": "women",
           "women's": "women", "woman": "women", "female": "women", "ladies": "women", "lady": "women",
           "girl": "girls", "girls": "girls", "girl's": "girls", "girls'": "girls", "unisex": "unisex",
           "kids": "kids", "kid": "kids", "children": "kids", "child": "kids", "kid's": "kids", "kids'": "kids",
           "baby": "baby", "infant": "baby", "toddler": "baby"}
_COLOUR = {"grey": "gray", "colour": "color", "multicolour": "multicolor", "multi-color": "multicolor",
           "multi color": "multicolor"}


def _num(x: float) -> str:
    r = round(x, 2)
    return str(int(r)) if r == int(r) else f"{r:g}"


def normalize_value(attr: str, value: str) -> str:
    """A canonical form of ``value`` for comparison and display (the attribute name is a hint)."""
    v = " ".join(value.replace("’", "'").split())
    m = _NUM_UNIT.match(v)
    if m:
        n = float(m.group(1).replace(",", "."))
        unit = m.group(2).lower()
        for u, f, base in _UNITS:
            if u == unit:
                return f"{_num(n * f)} {base}"
    m = _SIZE.match(v)
    if m:
        region = (m.group(1) or m.group(4)).lower()
        return f"{region} {m.group(2) or m.group(3)}"
    low = v.lower()
    if low in _GENDER:
        return _GENDER[low]
    words = low.split(" ")
    if "gender" in attr.lower() or "people" in attr.lower():
        g = [_GENDER.get(w) for w in words]
        if all(g):
            return " ".join(dict.fromkeys(g))
    if "colo" in attr.lower():
        joined = _COLOUR.get(low)
        if joined:
            return joined
        return " ".join(_COLOUR.get(w, w) for w in words)
    return low
