"""Small labelled titles written here (templates + a seeded generator), and one tiny model trained
on them once per session. Nothing comes from ../shared."""

import random

import pytest

from qkv.attributes import Example

BRANDS = ["Zorvex", "Kallipo", "Mentura", "Brisko", "Ulvane", "Tarmik", "Quenta", "Hollis"]
COLOURS = ["Red", "Navy Blue", "Black", "White", "Olive Green", "Grey"]
TYPES = ["Running Shoes", "Fishing Lure", "Rain Jacket", "Backpack", "Water Bottle", "Yoga Mat"]
GENDERS = ["Men's", "Women's", "Unisex"]
FILLER = ["Lightweight", "Outdoor", "New", "Breathable", "Durable", "2024", "Sport", "Hot Sale"]


def make_examples(n: int, seed: int) -> list[Example]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        brand, colour, typ = rnd.choice(BRANDS), rnd.choice(COLOURS), rnd.choice(TYPES)
        size = f"{rnd.randint(2, 99)}{rnd.choice(['mm', 'cm', 'g'])}"
        parts = [("Brand", brand)]
        if rnd.random() < 0.6:
            parts.append(("Gender", rnd.choice(GENDERS)))
        parts.append((None, rnd.choice(FILLER)))
        parts.append(("Type", typ))
        if rnd.random() < 0.7:
            parts.append(("Size", size))
        if rnd.random() < 0.7:
            parts.append(("Color", colour))
        head, tail = parts[:1], parts[1:]
        rnd.shuffle(tail)
        parts = head + tail
        title = " ".join(v for _, v in parts)
        values = {a: (v,) for a, v in parts if a}
        for a in ("Gender", "Size", "Color"):
            values.setdefault(a, ())  # judged absent ("n/a")
        out.append(Example(title, values, "Outdoor"))
    return out


@pytest.fixture(scope="session")
def synthetic():
    return make_examples(80, 1), make_examples(30, 2)


@pytest.fixture(scope="session")
def tiny_model(encoder, synthetic):
    from qkv.attributes import AttributeModel

    train, _ = synthetic
    model, report = AttributeModel.train(train, encoder, max_iter=60)
    return model, report
