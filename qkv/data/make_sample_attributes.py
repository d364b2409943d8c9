"""Write qkv/data/sample_attributes.jsonl: labelled product titles in English and Chinese (brand,
colour, size, material) on which ``qkv serve --sample`` trains its demo attribute model.

Every title is made here from templates and the small vocabularies below (written for this file;
no data set is read or copied), in the JSON-lines format ``qkv attrs train`` reads: an attribute
left out of a title is labelled absent ("n/a"). The output is deterministic (fixed seed), so
re-running it reproduces the shipped file byte for byte.

    python qkv/data/make_sample_attributes.py
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

SEED = 20261202
OUT = Path(__file__).with_name("sample_attributes.jsonl")
PER_TEMPLATE = 14  # titles made from each template

# The sample catalog's brands (make_sample_catalog.py), more invented ones, and brand names a
# Chinese seller lists under (written in Han characters: the demo must not treat them as words).
BRANDS_EN = ["Stridewell", "Northpeak", "Velora", "Kestrel Run", "Lumora", "Fieldhand", "Sakura Thread",
             "Polaris Wear", "Copperleaf", "Hearthstone", "Mingjia", "Bluefin Home", "Voltaris", "Echonet",
             "Tianlan", "Quietnest", "Harbor Loom", "Ridgeline", "Canyon Owl", "Shanye", "Aurelle", "Dewlight",
             "Tumblebee", "Orbit Kids", "Marrowby", "Oakhaven", "Pellucid", "Trailwise", "Brisa", "Halden"]
BRANDS_ZH = ["小米", "安踏", "李宁", "华为", "美的", "回力", "波司登", "九阳", "特步", "苏泊尔", "鸿星尔克", "罗莱",
             "南极人", "恒源祥", "乐扣乐扣", "飞跃", "森马", "太平鸟"]

COLOURS_EN = ["Black", "White", "Navy", "Red", "Grey", "Olive", "Blue", "Pink", "Beige", "Green", "Brown",
              "Khaki", "Burgundy", "Charcoal", "Yellow", "Purple", "Silver", "Orange", "Cream", "Teal"]
COLOURS_ZH = ["黑色", "白色", "藏青色", "红色", "灰色", "橄榄绿", "蓝色", "粉色", "米色", "绿色", "棕色",
              "卡其色", "酒红色", "深灰色", "黄色", "紫色", "银色", "橙色", "军绿色", "咖啡色", "浅蓝色", "杏色"]

SHOE_EN = ["US 6", "US 7", "US 8", "US 9", "US 10", "US 11", "US 12", "UK 4", "UK 5", "UK 6", "UK 7", "UK 8",
           "UK 9", "EU 38", "EU 40", "EU 42", "EU 44", "US 8.5", "UK 10"]
SHOE_ZH = ["36码", "37码", "38码", "39码", "40码", "41码", "42码", "43码", "44码", "US 9", "UK 5", "EU 40", "US 8"]
WEAR_EN = ["XS", "S", "M", "L", "XL", "XXL", "Size M", "Size L", "Small", "Medium", "Large"]
WEAR_ZH = ["S", "M", "L", "XL", "XXL", "M码", "L码", "XL码", "S码", "均码", "165/88A", "170/92A"]
VOLUME_EN = ["500ml", "500 ml", "750 ml", "1 L", "1.5 L", "2L", "12 oz", "16 oz", "20 oz", "24 oz", "32 oz", "350ml"]
VOLUME_ZH = ["500ml", "350ml", "750ml", "1L", "1.5L", "2升", "600毫升", "400ml", "1000ml", "20 oz"]
LENGTH_EN = ["20 cm", "24 cm", "28 cm", "30 cm", "15 inch", "10 inch", "12 in", "40 x 30 cm"]
LENGTH_ZH = ["20cm", "24cm", "28cm", "30厘米", "32cm", "26cm", "40x30cm"]
BED_EN = ["Twin", "Queen", "King", "Double", "Single"]
BED_ZH = ["1.5米", "1.8米", "2米", "双人", "单人", "200x230cm"]

FABRIC_EN = ["Cotton", "Organic Cotton", "Merino Wool", "Wool", "Linen", "Silk", "Cashmere", "Polyester", "Fleece"]
FABRIC_ZH = ["纯棉", "有机棉", "美利奴羊毛", "羊毛", "亚麻", "真丝", "羊绒", "涤纶", "摇粒绒"]
SHOE_MAT_EN = ["Leather", "Suede", "Canvas", "Mesh", "Nubuck", "Full-Grain Leather"]
SHOE_MAT_ZH = ["真皮", "牛皮", "帆布", "网面", "麂皮", "头层牛皮"]
KITCHEN_MAT_EN = ["Stainless Steel", "Cast Iron", "Bamboo", "Glass", "Ceramic", "Aluminium", "Copper", "Silicone"]
KITCHEN_MAT_ZH = ["不锈钢", "铸铁", "竹", "玻璃", "陶瓷", "铝合金", "紫铜", "硅胶", "316不锈钢"]
OUTDOOR_MAT_EN = ["Nylon", "Aluminium", "Ripstop Nylon", "Polyester", "Carbon Fibre"]
OUTDOOR_MAT_ZH = ["尼龙", "铝合金", "碳纤维", "涤纶", "牛津布"]

# (category, sizes, materials, templates). {b} brand, {c} colour, {s} size, {m} material. A
# template's optional slots are dropped at random (the attribute is then absent), so the model
# learns that a title need not hold every attribute.
EN = [
    ("shoes", SHOE_EN, SHOE_MAT_EN, [
        "{b} Men's Breathable {m} Running Shoes, Lightweight Trainers - {c}, {s}",
        "{b} Women's Waterproof Hiking Boots with Ankle Support - {c}, {s}",
        "{b} {m} Chelsea Boots for Men - {c}, {s}",
        "{b} Women's {m} Sneakers {c} {s}",
        "{c} {m} Loafers by {b}, {s}",
    ]),
    ("apparel", WEAR_EN, FABRIC_EN, [
        "{b} {m} Crew Neck Sweater - {c}, {s}",
        "{b} Men's {m} T-Shirt, Regular Fit, {c}, {s}",
        "{b} Women's {m} Hoodie {c} {s}",
        "{b} Quick-Dry Hiking Shorts, {m} - {c}, {s}",
        "{b} {m} Scarf, {c}",
    ]),
    ("kitchen", VOLUME_EN, KITCHEN_MAT_EN, [
        "{b} Insulated Water Bottle, {m} - {c}, {s}",
        "{b} {m} Travel Mug with Lid, {s}, {c}",
        "{b} {m} Electric Kettle, {s} - {c}",
        "{b} Food Storage Jar, {m}, {s}",
    ]),
    ("cookware", LENGTH_EN, KITCHEN_MAT_EN, [
        "{b} {m} Frying Pan, Induction Compatible - {c}, {s}",
        "{b} {m} Chef's Knife, {s}",
        "{b} {m} Cutting Board, Extra Large, {s}",
    ]),
    ("home", BED_EN, FABRIC_EN, [
        "{b} {m} Duvet Cover Set - {c}, {s}",
        "{b} {m} Bed Sheets, Deep Pocket, {c}, {s}",
        "{b} Blackout Curtains, {m}, 2 Panels - {c}",
    ]),
    ("outdoor", WEAR_EN, OUTDOOR_MAT_EN, [
        "{b} Packable Down Jacket, Hooded, {m} Shell - {c}, {s}",
        "{b} Trekking Poles, Collapsible {m}, Pair - {c}",
        "{b} Hiking Backpack, Water-Resistant {m}, {c}",
    ]),
    ("electronics", [], [], [
        "{b} Wireless Noise Cancelling Headphones, 30h Battery - {c}",
        "{b} Portable Bluetooth Speaker, Waterproof IPX7, {c}",
        "{b} 10000mAh Power Bank with USB-C, {c}",
    ]),
]
ZH = [
    ("shoes", SHOE_ZH, SHOE_MAT_ZH, [
        "{b} 男士透气{m}跑鞋 轻便运动鞋 {c} {s}",
        "{b} 女士防水登山靴 护踝 {c} {s}",
        "{b} {m}切尔西靴 男 {c} {s}",
        "{b}女款跑鞋 {m} {c} {s}",
        "【{b}】{m}休闲鞋 {c} {s}",
        "{b} 儿童{m}一脚蹬 {c} {s}",
    ]),
    ("apparel", WEAR_ZH, FABRIC_ZH, [
        "{b} {m}圆领毛衣 {c} {s}",
        "{b} 男士{m}短袖T恤 常规版型 {c} {s}",
        "{b}女款{m}连帽卫衣 {c} {s}",
        "{b} 速干登山短裤 {m} {c} {s}",
        "{b} 印花{m}围巾 {c}",
    ]),
    ("kitchen", VOLUME_ZH, KITCHEN_MAT_ZH, [
        "{b} {m}保温杯 {s} {c}",
        "{b} 保温水杯 24小时保冷 {m} {c} {s}",
        "{b}{m}电热水壶 {s} {c}",
        "{b} {m}保鲜盒带盖 {s}",
    ]),
    ("cookware", LENGTH_ZH, KITCHEN_MAT_ZH, [
        "{b} {m}不粘煎锅 电磁炉通用 {c} {s}",
        "{b} {m}主厨刀 {s}",
        "{b} {m}砧板 特大号 {s}",
    ]),
    ("home", BED_ZH, FABRIC_ZH, [
        "{b} {m}被套四件套 {c} {s}",
        "{b} {m}床单 {c} {s}",
        "{b} 遮光窗帘 {m} 两片装 {c}",
    ]),
    ("outdoor", WEAR_ZH, OUTDOOR_MAT_ZH, [
        "{b} 可收纳连帽羽绒服 {m}面料 {c} {s}",
        "{b} 折叠{m}登山杖 一对 {c}",
        "{b} 徒步双肩包 防泼水{m} {c}",
    ]),
    ("electronics", [], [], [
        "{b} 无线降噪耳机 30小时续航 {c}",
        "{b} 便携蓝牙音箱 IPX7防水 {c}",
        "{b} 10000毫安充电宝 Type-C {c}",
    ]),
]


def _title(template: str, values: dict[str, str | None]) -> str:
    """The template filled; a dropped slot leaves no stray separator behind."""
    text = template
    for slot, v in values.items():
        text = text.replace("{" + slot + "}", v or "")
    text = re.sub(r"\s+,", ",", text)  # "Collapsible , Pair" → "Collapsible, Pair"
    text = re.sub(r",(\s*,)+", ",", text)
    text = re.sub(r"\s*-\s*,", " -", text)  # "- , US 8" → "- US 8"
    text = re.sub(r"[\s,-]+$", "", text)
    return re.sub(r" {2,}", " ", text).strip()


def rows(seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for lang, table, brands, colours in (("en", EN, BRANDS_EN, COLOURS_EN), ("zh", ZH, BRANDS_EN + BRANDS_ZH, COLOURS_ZH)):
        for category, sizes, materials, templates in table:
            for template in templates:
                for _ in range(PER_TEMPLATE):
                    pick = {"b": rng.choice(brands), "c": rng.choice(colours),
                            "s": rng.choice(sizes) if sizes else None, "m": rng.choice(materials) if materials else None}
                    for slot, keep in (("c", 0.85), ("s", 0.85), ("m", 0.8)):
                        if "{" + slot + "}" in template and rng.random() > keep:
                            pick[slot] = None
                    pick = {k: (v if "{" + k + "}" in template else None) for k, v in pick.items()}
                    title = _title(template, pick)
                    labels = {"brand": pick["b"], "colour": pick["c"], "size": pick["s"], "material": pick["m"]}
                    out.append({"input": title, "category": category, "language": lang,
                                "target_scores": {a: ({v: 1} if v else {"n/a": 1}) for a, v in labels.items()}})
    # interleaved, so the first few hundred (a quick test's model) hold both languages
    rng.shuffle(out)
    return out


def main() -> None:
    data = rows()
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        for r in data:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(data)} labelled titles to {OUT}")


if __name__ == "__main__":
    main()
