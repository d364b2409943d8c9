"""A mixed catalog: does a query reach a product's listings in both languages? (docs/search.md,
"English queries in a bilingual catalog")

    .venv/bin/python bench/mixed_catalog.py [--model multilingual-e5-small] [--k 5,10] [--cache DIR]

The sample catalog (qkv/data/sample_catalog.csv, qkv/data/make_sample_catalog.py) lists some
products in English and in Chinese. For each product listed in both, one English and one Chinese
query, written here; a listing is the product's when its title starts with the product's template
(qkv.data.make_sample_catalog.CATEGORIES) for one of its brands. Per query language and cut-off k,
over the products:

* both@k — the top k hold at least one listing of the product in each language;
* other@k — the share of the product's listings in the *other* language the top k hold (mean);
* own@k — the same for the query's own language (what must not get worse);
* stray@k — other-language listings of *other* products in the top k (mean count: the price of
  reaching across; the catalog's language is read from its ``language`` column).

Printed twice: English queries searched as typed (``qkv.search.plan.ENGLISH_TO_CHINESE = False``,
the search before this measure), then as shipped (their phrases' Chinese words searched too).
Chinese queries are translated in both runs. Hybrid search, score fusion, as ``Index.search``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SAMPLE = Path(__file__).resolve().parents[1] / "qkv" / "data" / "sample_catalog.csv"

# the Chinese template's first word after the brand → (English query, Chinese query)
QUERIES = {
    "男士透气网面跑鞋": ("running shoes", "跑鞋"),
    "女士防水登山靴": ("hiking boots", "登山靴"),
    "儿童帆布一脚蹬休闲鞋": ("kids canvas sneakers", "儿童帆布鞋"),
    "记忆棉家居拖鞋": ("house slippers", "拖鞋"),
    "美利奴羊毛圆领毛衣": ("wool sweater", "羊毛衫"),
    "速干登山短裤": ("hiking shorts", "登山短裤"),
    "可收纳连帽羽绒服": ("down jacket", "羽绒服"),
    "有机棉T恤": ("cotton t-shirt", "棉T恤"),
    "印花真丝围巾": ("silk scarf", "真丝围巾"),
    "不粘煎锅": ("frying pan", "煎锅"),
    "不锈钢主厨刀": ("chef's knife", "主厨刀"),
    "玻璃保鲜盒带盖": ("food storage containers", "保鲜盒"),
    "控温电热水壶": ("electric kettle", "电热水壶"),
    "竹制砧板": ("cutting board", "砧板"),
    "保温水杯": ("insulated water bottle", "保温水杯"),
    "无线降噪耳机": ("noise cancelling headphones", "降噪耳机"),
    "65W": ("fast charger", "快充充电器"),  # (65W 氮化镓快充充电器)
    "便携蓝牙音箱": ("bluetooth speaker", "蓝牙音箱"),
    "10000毫安充电宝": ("power bank", "充电宝"),
    "4K网络摄像头": ("webcam", "网络摄像头"),
    "遮光窗帘": ("blackout curtains", "遮光窗帘"),
    "记忆棉护颈枕": ("memory foam pillow", "记忆棉枕头"),
    "亚麻被套套装": ("duvet cover", "被套"),
    "可调光LED台灯": ("desk lamp", "台灯"),
    "无线手持吸尘器": ("stick vacuum cleaner", "吸尘器"),
    "双人超轻徒步帐篷": ("backpacking tent", "帐篷"),
    "冬季睡袋": ("sleeping bag", "睡袋"),
    "折叠铝合金登山杖": ("trekking poles", "登山杖"),
    "骑行水袋背包": ("hydration backpack", "水袋背包"),
    "充电头灯": ("headlamp", "头灯"),
    "维C亮肤精华液": ("vitamin c serum", "维C精华液"),
    "干皮保湿面霜": ("face moisturiser", "保湿面霜"),
    "物理防晒霜": ("sunscreen", "防晒霜"),
    "摩洛哥坚果油洗发水": ("shampoo", "洗发水"),
    "木制积木": ("wooden building blocks", "积木"),
    "遥控越野车": ("remote control car", "遥控车"),
    "超柔毛绒泰迪熊": ("teddy bear", "泰迪熊"),
    "儿童编程机器人套件": ("robot kit", "机器人套件"),
}


def products(catalog: Path) -> list[dict]:
    """Products listed in both languages: {"en": English query, "zh": Chinese query, "ids": {"en": set, "zh": set}}."""
    from qkv.data.make_sample_catalog import CATEGORIES

    with open(catalog, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    lang_of = {r["id"]: r.get("language", "") for r in rows}
    out = []
    for brands, templates in CATEGORIES.values():
        for en_t, zh_t, _, _ in templates:
            if zh_t is None:
                continue
            words = zh_t.replace("{brand} ", "").split(" ")[0]
            key = words if words in QUERIES else None
            if key is None:
                raise SystemExit(f"no queries written for the product {zh_t!r}: add it to QUERIES")
            ids = {"en": set(), "zh": set()}
            for r in rows:
                for b in brands:
                    if r["title"].startswith(en_t.format(brand=b)):
                        ids["en"].add(r["id"])
                    elif r["title"].startswith(zh_t.format(brand=b)):
                        ids["zh"].add(r["id"])
            if ids["en"] and ids["zh"]:
                out.append({"en": QUERIES[key][0], "zh": QUERIES[key][1], "ids": ids, "lang": lang_of})
    return out


def measure(idx, prods: list[dict], ks: list[int]) -> dict:
    """{(query language, k): (both@k, other@k, own@k, stray@k)} and the per-query top ids."""
    out, tops = {}, {}
    kmax = max(ks)
    for lang in ("en", "zh"):
        other = "zh" if lang == "en" else "en"
        top = [[r.id for r in idx.search(p[lang], k=kmax)] for p in prods]
        tops[lang] = top
        for k in ks:
            both = sum(bool(set(t[:k]) & p["ids"][lang]) and bool(set(t[:k]) & p["ids"][other])
                       for t, p in zip(top, prods)) / len(prods)
            oth = sum(len(set(t[:k]) & p["ids"][other]) / len(p["ids"][other]) for t, p in zip(top, prods)) / len(prods)
            own = sum(len(set(t[:k]) & p["ids"][lang]) / len(p["ids"][lang]) for t, p in zip(top, prods)) / len(prods)
            stray = sum(sum(1 for i in t[:k] if p["lang"].get(i) == other and i not in p["ids"][other])
                        for t, p in zip(top, prods)) / len(prods)
            out[(lang, k)] = (both, oth, own, stray)
    return out, tops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="encoder (default: qkv's default, all-MiniLM-L6-v2)")
    ap.add_argument("--k", default="5,10", help="cut-offs, comma-separated")
    ap.add_argument("--cache", default=None, help="index directory to build once and reuse")
    ap.add_argument("--catalog", default=str(SAMPLE))
    ap.add_argument("--no-language-scale", action="store_true",
                    help="calibrate alternatives only (qkv.search.crosslingual.LANGUAGE_SCALE = False)")
    ap.add_argument("--verbose", action="store_true", help="print each query's rank of the first other-language listing")
    a = ap.parse_args()
    import qkv
    from qkv.search import Index, build_index
    from qkv.search import plan as planmod

    ks = [int(x) for x in a.k.split(",")]
    if a.no_language_scale:
        from qkv.search import crosslingual

        crosslingual.LANGUAGE_SCALE = False
    enc = qkv.load(a.model) if a.model else qkv.load()
    path = Path(a.cache) if a.cache else Path(tempfile.mkdtemp(prefix="qkv-mixed-")) / "idx"
    if not (path / "manifest.json").exists():
        build_index(a.catalog, path, enc)
    prods = products(Path(a.catalog))
    print(f"{len(prods)} products listed in both languages; model {enc.name if hasattr(enc, 'name') else a.model or 'default'}")
    rows = []
    for label, flag in (("before (English as typed)", False), ("after (English + Chinese words)", True)):
        planmod.ENGLISH_TO_CHINESE = flag
        res, tops = measure(Index.open(path, enc), prods, ks)
        rows.append((label, res))
        if a.verbose:
            for p, t in zip(prods, tops["en"]):
                first = next((i for i, x in enumerate(t, 1) if x in p["ids"]["zh"]), None)
                print(f"  {label[:6]} {p['en']!r}: first Chinese listing at {first}")
    planmod.ENGLISH_TO_CHINESE = True
    head = "| run | query | " + " | ".join(f"both@{k} | other@{k} | own@{k} | stray@{k}" for k in ks) + " |"
    print(head)
    print("|" + "---|" * (2 + 4 * len(ks)))
    for label, res in rows:
        for lang in ("en", "zh"):
            cells = " | ".join(" | ".join(f"{x:.2f}" for x in res[(lang, k)]) for k in ks)
            print(f"| {label} | {'English' if lang == 'en' else 'Chinese'} | {cells} |")


if __name__ == "__main__":
    main()
