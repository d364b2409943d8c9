"""The similarity floor below which a search result is marked weak (qkv.search.floor), measured on
the sample catalog (qkv/data/sample_catalog.csv) for each encoder the sample is served with.

    .venv/bin/python bench/search_floor.py [--model multilingual-e5-small] [--cache /tmp/qkv-floor]

Two sets of queries, written here (English and Chinese):

* present — products the catalog holds: the cosine of the best listing of that product (a title
  holding the query's product word, as the ``want`` substrings say) in the top 10 of a hybrid search;
* absent — products the catalog does not hold (guitars, dog food, 口红 …), and products it holds
  under a price filter none of them meets (耳机 ≤ 50): the cosine of the top result.

For the cosine itself and for the cosine above the query's background (qkv.search.floor: the
catalog's 31st nearest title, unfiltered), the floor is the midpoint of the gap between the
highest absent value and the lowest present one when the two sets are apart, else the value that
misjudges fewest queries (said so). qkv/search/floor.py's MARGIN holds the figure printed for the
second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (query, filters, title substrings any of which marks the wanted product)
PRESENT = [
    ("running shoes", [], ["Running Shoes", "跑鞋"]), ("跑鞋", [], ["Running Shoes", "跑鞋"]),
    ("hiking boots", [], ["Hiking Boots", "登山靴"]), ("登山靴", [], ["Hiking Boots", "登山靴"]),
    ("down jacket", [], ["Down Jacket", "羽绒服"]), ("羽绒服", [], ["Down Jacket", "羽绒服"]),
    ("wool sweater", [], ["Sweater", "毛衣"]), ("毛衣", [], ["Sweater", "毛衣"]),
    ("frying pan", [], ["Frying Pan", "煎锅"]), ("煎锅", [], ["Frying Pan", "煎锅"]),
    ("electric kettle", [], ["Kettle", "电热水壶"]), ("电热水壶", [], ["Kettle", "电热水壶"]),
    ("water bottle", [], ["Water Bottle", "水杯"]), ("保温杯", [], ["Water Bottle", "水杯"]),
    ("headphones", [], ["Headphones", "耳机"]), ("耳机", [], ["Headphones", "耳机"]),
    ("power bank", [], ["Power Bank", "充电宝"]), ("充电宝", [], ["Power Bank", "充电宝"]),
    ("bluetooth speaker", [], ["Speaker", "音箱"]), ("蓝牙音箱", [], ["Speaker", "音箱"]),
    ("tent", [], ["Tent", "帐篷"]), ("帐篷", [], ["Tent", "帐篷"]),
    ("sleeping bag", [], ["Sleeping Bag", "睡袋"]), ("睡袋", [], ["Sleeping Bag", "睡袋"]),
    ("sunscreen", [], ["Sunscreen", "防晒"]), ("防晒霜", [], ["Sunscreen", "防晒"]),
    ("shampoo", [], ["Shampoo", "洗发水"]), ("洗发水", [], ["Shampoo", "洗发水"]),
    ("building blocks", [], ["Building Blocks", "积木"]), ("积木", [], ["Building Blocks", "积木"]),
    ("teddy bear", [], ["Teddy Bear", "泰迪熊"]), ("毛绒玩具", [], ["Teddy Bear", "泰迪熊"]),
    ("curtains", [], ["Curtains", "窗帘"]), ("窗帘", [], ["Curtains", "窗帘"]),
    ("desk lamp", [], ["Desk Lamp", "台灯"]), ("台灯", [], ["Desk Lamp", "台灯"]),
    ("vacuum cleaner", [], ["Vacuum", "吸尘器"]), ("吸尘器", [], ["Vacuum", "吸尘器"]),
    ("headlamp", [], ["Headlamp", "头灯"]), ("头灯", [], ["Headlamp", "头灯"]),
]
ABSENT = [
    ("guitar", []), ("吉他", []), ("dog food", []), ("狗粮", []), ("lipstick", []), ("口红", []),
    ("bicycle", []), ("自行车", []), ("wrist watch", []), ("手表", []), ("sofa", []), ("沙发", []),
    ("car tyres", []), ("轮胎", []), ("baby stroller", []), ("婴儿车", []), ("fishing rod", []), ("鱼竿", []),
    ("laptop computer", []), ("笔记本电脑", []), ("coffee beans", []), ("咖啡豆", []), ("golf balls", []),
    ("yoga mat", []), ("瑜伽垫", []), ("eyeglasses", []), ("眼镜", []), ("printer ink", []), ("打印机墨盒", []),
    ("wedding dress", []), ("婚纱", []), ("cat litter", []), ("猫砂", []),
    ("耳机", [{"field": "price", "op": "<=", "value": 50}]),
    ("headphones", [{"field": "price", "op": "<=", "value": 50}]),
    ("down jacket", [{"field": "price", "op": "<=", "value": 60}]),
    ("羽绒服", [{"field": "price", "op": "<=", "value": 60}]),
    ("tent", [{"field": "price", "op": "<=", "value": 80}]),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="encoder (default: the sample's, multilingual-e5-small)")
    ap.add_argument("--cache", default="/tmp/qkv-floor", help="where the sample index is built")
    args = ap.parse_args()

    import qkv
    from qkv.search import Index
    from qkv.web.sample import SAMPLE_GLOSSARY, SAMPLE_MODEL, ensure_sample_index

    enc = qkv.load(args.model or SAMPLE_MODEL)
    path = ensure_sample_index(Path(args.cache) / enc.name.replace("/", "_"), encoder=enc)
    index = Index.open(path, encoder=enc, glossary=SAMPLE_GLOSSARY)

    def results(query, filters):
        return index.search(query, k=10, mode="hybrid", where=_where(filters))

    from qkv.search.floor import BACKGROUND_RANK

    def background(query):
        return index.search(query, k=BACKGROUND_RANK + 1, mode="dense")[BACKGROUND_RANK].dense_score

    present, absent = [], []  # (cosine, cosine above the background, query)
    for query, filters, want in PRESENT:
        hits = [r.dense_score for r in results(query, filters)
                if r.dense_score is not None and any(w in r.title for w in want)]
        if not hits:
            print(f"  present but not found in the top 10: {query!r}")
            continue
        present.append((max(hits), max(hits) - background(query), query))
    for query, filters in ABSENT:
        top = max([r.dense_score for r in results(query, filters) if r.dense_score is not None] or [0.0])
        absent.append((top, top - background(query), query + (" " + str(filters) if filters else "")))
    print(f"{enc.name}: {len(present)} present queries, {len(absent)} absent")
    for k, what in ((0, "cosine"), (1, f"cosine above the background (rank {BACKGROUND_RANK})")):
        p = sorted(present, key=lambda x: x[k])
        a = sorted(absent, key=lambda x: -x[k])
        print(f"  {what}:")
        print("    lowest present:", ", ".join(f"{x[2]} {x[k]:.4f}" for x in p[:5]))
        print("    highest absent:", ", ".join(f"{x[2]} {x[k]:.4f}" for x in a[:5]))
        lo, hi = p[0][k], a[0][k]
        if hi < lo:
            print(f"    apart: gap {hi:.4f} .. {lo:.4f}; floor {(hi + lo) / 2:.4f}")
            continue
        cands = sorted({x[k] for x in present} | {x[k] for x in absent})
        errors = lambda f: sum(x[k] < f for x in present) + sum(x[k] >= f for x in absent)  # noqa: E731
        floor = min(cands, key=lambda f: (errors(f), f))
        print(f"    overlapping: floor {floor:.4f} misjudges {errors(floor)} of {len(present) + len(absent)} queries")


def _where(filters):
    """The filter tree of qkv.search.filters (one comparison here), as the web route builds it."""
    if not filters:
        return None
    from qkv.search.filters import Compare, Filter

    (f,) = filters
    return Filter(Compare(f["field"], f["op"], float(f["value"])), f"{f['field']} {f['op']} {f['value']}")


if __name__ == "__main__":
    main()
