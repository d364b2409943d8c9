"""Write qkv/data/sample_catalog.csv: a small invented product catalog for examples, tests and the
web app. Brands, titles and prices are made up here from templates (no data set is copied); the
output is deterministic (fixed seed), so re-running it reproduces the shipped file byte for byte.

    python qkv/data/make_sample_catalog.py
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

SEED = 20261130
OUT = Path(__file__).with_name("sample_catalog.csv")

COLOURS = ["black", "white", "navy", "red", "grey", "olive", "blue", "pink", "beige", "green"]
ZH_COLOURS = {"black": "黑色", "white": "白色", "navy": "藏青色", "red": "红色", "grey": "灰色",
              "olive": "橄榄绿", "blue": "蓝色", "pink": "粉色", "beige": "米色", "green": "绿色"}

# category → (brands, [(English template, Chinese template or None, size choices, price range)])
CATEGORIES = {
    "shoes": (["Stridewell", "Northpeak", "Velora", "Kestrel Run"], [
        ("{brand} Men's Breathable Mesh Running Shoes, Lightweight Trainers", "{brand} 男士透气网面跑鞋 轻便运动鞋",
         ["US 8", "US 9", "US 10", "US 11"], (39, 119)),
        ("{brand} Women's Waterproof Hiking Boots with Ankle Support", "{brand} 女士防水登山靴 护踝",
         ["US 6", "US 7", "US 8", "US 9"], (59, 159)),
        ("{brand} Kids' Slip-On Canvas Sneakers", "{brand} 儿童帆布一脚蹬休闲鞋", ["EU 28", "EU 30", "EU 32"], (15, 39)),
        ("{brand} Leather Chelsea Boots for Men", None, ["US 9", "US 10", "US 11"], (79, 189)),
        ("{brand} Memory Foam House Slippers, Non-Slip Sole", "{brand} 记忆棉家居拖鞋 防滑", ["S", "M", "L"], (12, 29)),
    ]),
    "apparel": (["Lumora", "Fieldhand", "Sakura Thread", "Polaris Wear"], [
        ("{brand} Merino Wool Crew Neck Sweater", "{brand} 美利奴羊毛圆领毛衣", ["S", "M", "L", "XL"], (49, 129)),
        ("{brand} Quick-Dry Hiking Shorts with Zip Pockets", "{brand} 速干登山短裤 拉链口袋", ["S", "M", "L", "XL"], (19, 45)),
        ("{brand} Packable Down Jacket, Hooded, Windproof", "{brand} 可收纳连帽羽绒服 防风", ["S", "M", "L", "XL"], (89, 229)),
        ("{brand} Organic Cotton T-Shirt, Regular Fit", "{brand} 有机棉T恤 常规版型", ["XS", "S", "M", "L"], (9, 25)),
        ("{brand} Silk Scarf with Floral Print", "{brand} 印花真丝围巾", ["one size"], (19, 69)),
        ("{brand} Thermal Base Layer Leggings for Skiing", None, ["S", "M", "L"], (24, 59)),
    ]),
    "kitchen": (["Copperleaf", "Hearthstone", "Mingjia", "Bluefin Home"], [
        ("{brand} Non-Stick Frying Pan, Induction Compatible", "{brand} 不粘煎锅 电磁炉通用", ["20 cm", "24 cm", "28 cm"], (19, 69)),
        ("{brand} Stainless Steel Chef's Knife", "{brand} 不锈钢主厨刀", ["15 cm", "20 cm"], (25, 99)),
        ("{brand} Glass Food Storage Containers with Lids, Set of 5", "{brand} 玻璃保鲜盒带盖 5件套", ["set of 5"], (18, 42)),
        ("{brand} Electric Kettle with Temperature Control", "{brand} 控温电热水壶", ["1.2 L", "1.7 L"], (29, 89)),
        ("{brand} Bamboo Cutting Board, Extra Large", "{brand} 竹制砧板 特大号", ["40 x 30 cm", "45 x 35 cm"], (14, 39)),
        ("{brand} Cast Iron Dutch Oven, Enamelled", None, ["4 qt", "6 qt"], (49, 149)),
        ("{brand} Insulated Water Bottle, Keeps Drinks Cold 24 Hours", "{brand} 保温水杯 24小时保冷", ["500 ml", "750 ml", "1 L"], (15, 39)),
    ]),
    "electronics": (["Voltaris", "Echonet", "Pixelmoon", "Tianlan"], [
        ("{brand} Wireless Noise Cancelling Headphones, 30h Battery", "{brand} 无线降噪耳机 30小时续航", ["one size"], (59, 299)),
        ("{brand} USB-C Fast Charger, 65W GaN", "{brand} 65W 氮化镓快充充电器", ["65W"], (19, 49)),
        ("{brand} Portable Bluetooth Speaker, Waterproof IPX7", "{brand} 便携蓝牙音箱 IPX7防水", ["one size"], (25, 129)),
        ("{brand} 10000mAh Power Bank with USB-C", "{brand} 10000毫安充电宝 Type-C", ["10000 mAh", "20000 mAh"], (17, 49)),
        ("{brand} Mechanical Keyboard, Hot-Swappable Switches", None, ["full size", "75%"], (49, 159)),
        ("{brand} 4K Webcam with Privacy Cover", "{brand} 4K网络摄像头 带防窥盖", ["one size"], (39, 119)),
    ]),
    "home": (["Quietnest", "Linden & Co", "Yunmian", "Harbor Loom"], [
        ("{brand} Blackout Curtains, Thermal Insulated, 2 Panels", "{brand} 遮光窗帘 隔热 两片装", ["52 x 63 in", "52 x 84 in"], (22, 59)),
        ("{brand} Memory Foam Pillow for Neck Pain", "{brand} 记忆棉护颈枕", ["standard", "queen"], (24, 69)),
        ("{brand} Linen Duvet Cover Set", "{brand} 亚麻被套套装", ["twin", "queen", "king"], (59, 179)),
        ("{brand} LED Desk Lamp with Dimmer", "{brand} 可调光LED台灯", ["one size"], (19, 59)),
        ("{brand} Cordless Stick Vacuum Cleaner", "{brand} 无线手持吸尘器", ["one size"], (99, 329)),
        ("{brand} Scented Soy Candle, Lavender", None, ["8 oz", "12 oz"], (9, 29)),
    ]),
    "outdoor": (["Ridgeline", "Northpeak", "Canyon Owl", "Shanye"], [
        ("{brand} 2-Person Backpacking Tent, Ultralight", "{brand} 双人超轻徒步帐篷", ["2 person", "3 person"], (99, 349)),
        ("{brand} Sleeping Bag for Cold Weather, -10°C", "{brand} 冬季睡袋 零下10度", ["regular", "long"], (59, 189)),
        ("{brand} Trekking Poles, Collapsible Aluminium, Pair", "{brand} 折叠铝合金登山杖 一对", ["one size"], (25, 79)),
        ("{brand} Hydration Backpack with 2L Water Bladder", "{brand} 骑行水袋背包 2升", ["2 L", "3 L"], (29, 79)),
        ("{brand} Camping Headlamp, Rechargeable, 400 Lumens", "{brand} 充电头灯 400流明", ["one size"], (14, 39)),
        ("{brand} Folding Camp Chair with Cup Holder", None, ["one size"], (19, 59)),
    ]),
    "beauty": (["Aurelle", "Dewlight", "Xueqing", "Petal & Pine"], [
        ("{brand} Vitamin C Face Serum for Brightening", "{brand} 维C亮肤精华液", ["30 ml", "50 ml"], (14, 49)),
        ("{brand} Hydrating Face Moisturiser for Dry Skin", "{brand} 干皮保湿面霜", ["50 ml"], (12, 45)),
        ("{brand} Mineral Sunscreen SPF 50, Fragrance Free", "{brand} 物理防晒霜 SPF50 无香", ["50 ml", "100 ml"], (11, 32)),
        ("{brand} Argan Oil Shampoo for Frizzy Hair", "{brand} 摩洛哥坚果油洗发水", ["250 ml", "500 ml"], (8, 24)),
        ("{brand} Ionic Hair Dryer, 1800W, Fast Drying", None, ["one size"], (29, 99)),
    ]),
    "toys": (["Tumblebee", "Brightblock", "Xiaoxiong", "Orbit Kids"], [
        ("{brand} Wooden Building Blocks, 100 Pieces", "{brand} 木制积木 100块", ["100 pieces"], (19, 45)),
        ("{brand} Remote Control Car, Off-Road, Rechargeable", "{brand} 遥控越野车 可充电", ["1:16", "1:12"], (29, 79)),
        ("{brand} Plush Teddy Bear, Extra Soft", "{brand} 超柔毛绒泰迪熊", ["30 cm", "50 cm"], (12, 35)),
        ("{brand} STEM Robot Kit for Kids 8+", "{brand} 儿童编程机器人套件 8岁以上", ["one size"], (39, 99)),
        ("{brand} Jigsaw Puzzle, 1000 Pieces, Mountain Landscape", None, ["1000 pieces"], (14, 29)),
    ]),
}


def rows(seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    out = []
    n = 0
    for cat, (brands, templates) in CATEGORIES.items():
        for en, zh, sizes, (lo, hi) in templates:
            for brand in rng.sample(brands, k=min(len(brands), 3)):
                for colour in rng.sample(COLOURS, k=2):
                    size = rng.choice(sizes)
                    chinese = zh is not None and rng.random() < 0.25
                    if chinese:
                        title = f"{zh.format(brand=brand)} {ZH_COLOURS[colour]} {size}"
                    else:
                        title = f"{en.format(brand=brand)} - {colour.capitalize()}, {size}"
                    n += 1
                    price = round(rng.uniform(lo, hi)) - 0.01
                    out.append({"id": f"P{n:04d}", "title": title, "brand": brand, "category": cat,
                                "colour": colour, "size": size, "price": f"{price:.2f}",
                                "rating": f"{rng.uniform(3.2, 5.0):.1f}", "language": "zh" if chinese else "en"})
    return out


def main() -> None:
    data = rows()
    with open(OUT, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(data[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(data)
    print(f"wrote {len(data)} products to {OUT}")


if __name__ == "__main__":
    main()
