"""Generated product titles and shopper queries for the search benchmarks (bench/search.py,
bench/scale.py, bench/search_parallel.py): ~1,400 words plus model codes, realistic enough for
keyword and vector search, so no data set is needed. ``titles(n, seed)`` and ``queries(n, seed)``
are deterministic."""

from __future__ import annotations

import random

# Category → (nouns, category-specific features, sizes). Shared adjectives, materials, colours.
CATEGORIES = {
    "shoes": (["running shoes", "trail runners", "hiking boots", "sneakers", "sandals", "slippers", "loafers",
               "rain boots", "work boots", "basketball shoes", "walking shoes", "flip flops", "ankle boots",
               "clogs", "football boots", "tennis shoes", "skate shoes", "snow boots"],
              ["mesh upper", "memory foam insole", "rubber outsole", "wide fit", "slip-on", "lace-up",
               "arch support", "cushioned", "zero drop", "steel toe", "high top", "low top"],
              ["US 6", "US 7", "US 8", "US 9", "US 10", "US 11", "US 12", "EU 38", "EU 40", "EU 42", "EU 44", "UK 8"]),
    "clothing": (["rain jacket", "down jacket", "fleece jacket", "wool sweater", "t-shirt", "polo shirt",
                  "hoodie", "leggings", "yoga pants", "cargo shorts", "jeans", "chinos", "dress shirt",
                  "sports bra", "base layer", "winter coat", "vest", "pajama set", "swim trunks", "socks",
                  "beanie", "gloves", "scarf", "baseball cap"],
                 ["slim fit", "relaxed fit", "hooded", "zip pocket", "moisture wicking", "long sleeve",
                  "short sleeve", "crew neck", "v-neck", "high waisted", "packable", "windproof", "thermal"],
                 ["XS", "S", "M", "L", "XL", "XXL", "3XL", "size 8", "size 10", "one size", "3-pack", "6-pack"]),
    "kitchen": (["frying pan", "chef's knife", "electric kettle", "cutting board", "dutch oven", "saucepan",
                 "stock pot", "wok", "blender", "toaster", "coffee maker", "french press", "food processor",
                 "mixing bowls", "knife block", "baking sheet", "measuring cups", "spatula set", "colander",
                 "air fryer", "rice cooker", "stand mixer", "pressure cooker", "water bottle", "travel mug",
                 "lunch box", "spice rack", "dish rack", "can opener", "tea kettle"],
                ["non-stick", "dishwasher safe", "oven safe", "induction ready", "BPA free", "with lid",
                 "tri-ply", "cast iron", "enameled", "nonstick coating", "double wall", "leak proof"],
                ["8 in.", "10 in.", "12 in.", "5.5 qt", "6 qt", "1.7 L", "1 L", "500 ml", "750 ml", "32 oz",
                 "20 oz", "set of 3", "set of 5", "12-piece", "2-pack"]),
    "electronics": (["headphones", "earbuds", "usb-c charger", "bluetooth speaker", "power bank", "keyboard",
                     "mouse", "webcam", "monitor", "laptop stand", "phone case", "screen protector", "hdmi cable",
                     "usb hub", "smart watch", "fitness tracker", "tablet", "e-reader", "router", "microphone",
                     "dash cam", "action camera", "sound bar", "projector", "wall charger", "car charger",
                     "ssd", "memory card", "gaming headset", "charging cable"],
                    ["noise cancelling", "fast charging", "bluetooth 5.3", "wifi 6", "4k", "1080p", "usb-c",
                     "mechanical", "backlit", "over-ear", "in-ear", "true wireless", "magsafe", "gan"],
                    ["65W", "100W", "20W", "10000mAh", "20000mAh", "6 ft.", "3 ft.", "10 ft.", "27 in.", "24 in.",
                     "128GB", "256GB", "1TB", "2-pack", "3-pack"]),
    "home": (["desk lamp", "floor lamp", "curtains", "pillow", "duvet cover", "sheet set", "comforter",
              "throw blanket", "bath towels", "rug", "doormat", "vacuum cleaner", "robot vacuum", "candle",
              "picture frame", "wall clock", "mirror", "storage bin", "bookshelf", "shoe rack", "laundry basket",
              "hangers", "air purifier", "humidifier", "space heater", "tower fan", "mattress topper",
              "shower curtain", "bath mat", "trash can"],
             ["blackout", "machine washable", "hypoallergenic", "cooling", "thermal insulated", "cordless",
              "bagless", "quiet", "led", "dimmable", "stackable", "collapsible", "scented", "plush"],
             ["twin", "full", "queen", "king", "52 x 84 in.", "5 x 7 ft.", "8 x 10 ft.", "20 x 30 in.",
              "set of 2", "set of 4", "6-piece", "50-pack", "13 gal", "30 L"]),
    "outdoor": (["tent", "sleeping bag", "trekking poles", "headlamp", "camp chair", "hiking backpack",
                 "cooler", "hammock", "camping stove", "water filter", "sleeping pad", "lantern", "dry bag",
                 "fishing rod", "bike helmet", "bike light", "kayak paddle", "binoculars", "compass",
                 "first aid kit", "rain poncho", "tarp", "picnic blanket", "beach umbrella"],
                ["2-person", "4-person", "3-season", "ultralight", "packable", "waterproof", "insulated",
                 "rechargeable", "collapsible", "inflatable", "down filled", "mummy", "ripstop"],
                ["20 L", "35 L", "50 L", "65 L", "20 qt", "45 qt", "0 F", "20 F", "40 F", "300 lumens",
                 "1000 lumens", "10x42", "one size"]),
    "beauty": (["face serum", "moisturizer", "sunscreen", "shampoo", "conditioner", "hair dryer", "body wash",
                "face wash", "lip balm", "hand cream", "eye cream", "toner", "face mask", "hair oil",
                "electric toothbrush", "razor", "nail polish", "makeup brushes", "perfume", "deodorant"],
               ["vitamin c", "hyaluronic acid", "retinol", "spf 50", "spf 30", "fragrance free", "sulfate free",
                "for dry skin", "for oily skin", "unscented", "vegan", "cruelty free", "travel size"],
               ["1 oz", "1.7 oz", "3.4 oz", "8 oz", "16 oz", "30 ml", "50 ml", "100 ml", "250 ml", "2-pack",
                "3-pack", "value size"]),
    "toys": (["building blocks", "remote control car", "teddy bear", "robot kit", "jigsaw puzzle", "board game",
              "doll house", "action figure", "play kitchen", "train set", "art set", "kite", "water gun",
              "stuffed animal", "ride-on car", "magnetic tiles", "card game", "drone", "science kit", "play tent"],
             ["educational", "stem", "for kids 3+", "for kids 8+", "wooden", "battery operated",
              "glow in the dark", "montessori", "interactive", "1000 pieces", "500 pieces", "2-player"],
             ["100-piece", "250-piece", "12 in.", "18 in.", "small", "large", "set of 6", "1:16 scale", "1:24 scale"]),
    "tools": (["cordless drill", "hammer", "screwdriver set", "ladder", "tape measure", "circular saw",
               "jigsaw", "impact driver", "socket set", "wrench set", "pliers", "utility knife", "level",
               "stud finder", "work light", "tool box", "shop vac", "pressure washer", "air compressor",
               "angle grinder", "orbital sander", "nail gun", "caulking gun", "wet tile saw", "drill bits"],
              ["brushless", "20V", "18V", "12V", "variable speed", "heavy duty", "magnetic", "ratcheting",
               "with battery", "tool only", "corded", "keyless chuck", "impact rated"],
              ["1/2 in.", "3/8 in.", "1/4 in.", "7-1/4 in.", "25 ft.", "6 ft.", "8 ft.", "16 ft.", "2 gal", "6 gal",
               "40-piece", "100-piece", "2000 psi", "3100 psi"]),
    "garden": (["garden hose", "lawn mower", "leaf blower", "string trimmer", "hedge trimmer", "pruning shears",
                "wheelbarrow", "planter", "raised garden bed", "sprinkler", "hose reel", "garden gloves",
                "potting soil", "grass seed", "fertilizer", "bird feeder", "patio umbrella", "fire pit",
                "outdoor string lights", "solar path lights", "compost bin", "rain barrel", "shovel", "rake"],
               ["self-propelled", "gas powered", "battery powered", "expandable", "kink free", "weather resistant",
                "solar powered", "uv resistant", "galvanized", "organic", "drought tolerant", "ergonomic handle"],
               ["50 ft.", "100 ft.", "21 in.", "40V", "60V", "5/8 in.", "10 lb.", "25 lb.", "40 lb.", "3 cu. ft.",
                "12 in.", "24 in.", "set of 2"]),
    "hardware": (["faucet", "shower head", "door lock", "smoke detector", "extension cord", "light bulb",
                  "ceiling fan", "paint roller", "paint brush", "interior paint", "wood stain", "deck screws",
                  "drywall anchors", "door hinge", "cabinet pulls", "toilet seat", "water heater", "thermostat",
                  "outlet cover", "light switch", "smart plug", "pipe wrench", "pvc pipe", "lumber",
                  "vinyl flooring", "ceramic tile", "backsplash tile", "grout", "caulk", "weather stripping"],
                 ["brushed nickel", "matte black", "oil rubbed bronze", "chrome", "pressure treated",
                  "dimmable", "smart", "wifi", "high efficiency", "low flow", "peel and stick", "self-closing",
                  "semi-gloss", "satin", "outdoor rated", "tamper resistant", "water resistant"],
                 ["2x4x8", "2x4x10", "2x6x12", "4x4x8", "1 gal", "5 gal", "1 qt", "12 in. x 24 in.", "3 in. x 6 in.",
                  "60W equivalent", "100W equivalent", "15 amp", "20 amp", "1/2 in. x 10 ft.", "25-pack", "100-pack",
                  "50 ft.", "25 ft.", "52 in.", "40 gal", "50 gal"]),
    "pets": (["dog bed", "cat tree", "dog leash", "dog collar", "cat litter", "litter box", "dog food",
              "cat food", "pet carrier", "dog toys", "cat toys", "aquarium filter", "bird cage", "pet fountain",
              "dog harness", "grooming brush", "pet gate", "chew toys", "dog crate", "scratching post"],
             ["orthopedic", "no pull", "reflective", "grain free", "clumping", "odor control", "washable",
              "indestructible", "self-cleaning", "for large dogs", "for small dogs", "for indoor cats"],
             ["small", "medium", "large", "x-large", "4 lb.", "15 lb.", "30 lb.", "20 gal", "36 in.", "42 in.", "6 ft."]),
}
ADJ = ["waterproof", "lightweight", "cordless", "stainless steel", "rechargeable", "foldable", "insulated",
       "breathable", "heavy duty", "compact", "wireless", "ergonomic", "adjustable", "portable", "premium",
       "classic", "smart", "energy saving", "quick-dry", "anti-slip", "durable", "professional", "deluxe",
       "eco-friendly", "vintage", "modern", "soft", "reusable", "universal", "multi-purpose", "easy clean",
       "large capacity", "high performance", "all-season", "slim", "extra long", "non-toxic", "scratch resistant",
       "shockproof", "rust proof", "odor resistant", "anti-fog", "low profile", "tangle free", "quiet"]
MATERIALS = ["cotton", "organic cotton", "linen", "wool", "merino wool", "polyester", "nylon", "leather",
             "faux leather", "suede", "canvas", "bamboo", "oak", "walnut", "pine", "steel", "aluminum",
             "titanium", "copper", "brass", "ceramic", "glass", "silicone", "rubber", "plastic", "carbon fiber",
             "cast iron", "stainless", "microfiber", "fleece", "down", "velvet", "porcelain", "granite", "marble"]
COLOURS = ["black", "white", "navy", "red", "grey", "olive", "blue", "pink", "beige", "green", "silver",
           "brown", "charcoal", "burgundy", "teal", "ivory", "mustard", "lavender", "coral", "sage",
           "tan", "cream", "khaki", "orange", "yellow", "purple", "turquoise", "gold", "rose gold", "espresso"]
_SYL1 = ["North", "Lum", "Velo", "Ridge", "Copper", "Hearth", "Volt", "Echo", "Pixel", "Quiet", "Harbor",
         "Canyon", "Petal", "Tumble", "Bright", "Orbit", "Stone", "River", "Cedar", "Maple", "Iron", "Silver",
         "Blue", "Summit", "Prairie", "Alder", "Aspen", "Coast", "Delta", "Ember", "Frost", "Glen", "Haven",
         "Juniper", "Kite", "Lark", "Meadow", "Nova", "Oak", "Pine"]
_SYL2 = ["peak", "ora", "line", "leaf", "stone", "aris", "net", "moon", "nest", "loom", "owl", "wood",
         "works", "craft", "gear", "labs", "home", "trail", "field", "wave", "forge", "mark", "point", "bay"]
BRANDS = [a + b for a in _SYL1 for b in _SYL2]  # 960 invented brands
LINES = ["Pro", "Max", "Lite", "Plus", "Elite", "Essentials", "Signature", "Sport", "Classic", "Ultra",
         "Go", "Prime", "Flex", "Air", "Edge", "Core", "Trek", "Studio", "Urban", "Basics"]
CAT_NAMES = sorted(CATEGORIES)


def _title(rng) -> str:
    """One title: brand [line] [model] adjectives/material/feature noun - colour, size (order varies
    a little, as sellers write them)."""
    cat = rng.choice(CAT_NAMES)
    nouns, feats, sizes = CATEGORIES[cat]
    words = [rng.choice(BRANDS)]
    if rng.random() < 0.35:
        words.append(rng.choice(LINES))
    if rng.random() < 0.3:  # model codes: the rare, near-unique tokens real catalogs are full of
        words.append(f"{rng.choice('ABCDEFGHKLMRSTVXZ')}{rng.choice('ABCDEFGHKLMRSTVXZ0123456789')}-{rng.randrange(10, 9999)}")
    desc = rng.sample(ADJ, rng.choice((1, 1, 2, 2, 3)))
    if rng.random() < 0.5:
        desc.append(rng.choice(MATERIALS))
    if rng.random() < 0.6:
        desc.append(rng.choice(feats))
    rng.shuffle(desc)
    words += [d.title() if rng.random() < 0.7 else d for d in desc]
    words.append(rng.choice(nouns).title())
    tail = []
    if rng.random() < 0.7:
        tail.append(rng.choice(COLOURS).title())
    if rng.random() < 0.8:
        tail.append(rng.choice(sizes))
    if rng.random() < 0.25:
        extra = rng.choice(feats)
        if extra not in desc:
            words += ["with" if rng.random() < 0.5 else "-", extra]
    return " ".join(words) + (" - " + ", ".join(tail) if tail else "")


def titles(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct generated titles (deterministic for a seed); vocabulary ~1,400 words plus model
    codes, so a query word matches a realistic fraction of a large catalog, not a tenth of it."""
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < n:
        t = _title(rng)
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def queries(n: int, seed: int = 1) -> list[str]:
    """Shopper-style queries: a product word with one or two qualifiers, sometimes a brand or size."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        nouns, feats, sizes = CATEGORIES[rng.choice(CAT_NAMES)]
        words = [rng.choice(nouns)]
        quals = [rng.choice(ADJ), rng.choice(feats), rng.choice(MATERIALS), rng.choice(COLOURS)]
        words = rng.sample(quals, rng.choice((1, 1, 2))) + words
        r = rng.random()
        if r < 0.15:
            words.insert(0, rng.choice(BRANDS))
        elif r < 0.3:
            words.append(rng.choice(sizes))
        out.append(" ".join(words))
    return out
