from qkv.attributes import Attribute, Example, Span, normalize_value, score, span_scores
from qkv.attributes.evaluate import dictionary_baseline


def test_exact_match_protocol_counts():
    exs = [Example("Zorvex Red Shoes", {"Brand": ("Zorvex",), "Color": ("Red",), "Size": ()}),
           Example("Kallipo Blue Bag 10cm", {"Brand": ("Kallipo",), "Color": ("Blue",), "Size": ("10cm",)})]
    preds = [[Attribute("Brand", "Zorvex", 0, 6, 0.9), Attribute("Size", "Shoes", 11, 16, 0.5),
              Attribute("Type", "Shoes", 11, 16, 0.9)],  # Size is n/a -> fp; Type not judged
             {"Brand": "Kallipo Blue", "Size": "10cm"}]  # wrong brand -> fp; Color missed -> fn
    s = score(exs, preds)
    c = s.per_attr
    assert (c["Brand"].tp, c["Brand"].fp, c["Brand"].fn) == (1, 1, 0)
    assert (c["Color"].tp, c["Color"].fp, c["Color"].fn) == (0, 0, 2)
    assert (c["Size"].tp, c["Size"].fp, c["Size"].fn) == (1, 1, 0)
    m = s.micro
    assert (m.tp, m.fp, m.fn) == (2, 2, 2)
    assert abs(m.precision - 0.5) < 1e-12 and abs(m.recall - 0.5) < 1e-12 and abs(m.f1 - 0.5) < 1e-12
    assert s.unjudged == 1
    # macro: Brand F1 = 2/3, Color 0, Size 2/3
    assert abs(s.macro["f1"] - round(100 * (2 / 3 + 0 + 2 / 3) / 3, 2)) < 1e-9
    d = s.as_dict()
    assert d["micro"]["f1"] == 50.0 and d["per_attribute"]["Brand"]["gold"] == 2


def test_normalized_score_is_separate():
    exs = [Example("Men's Shoes 8.5 cm", {"Gender": ("Men's",), "Length": ("85mm",)})]
    preds = [{"Gender": "Men's", "Length": "8.5 cm"}]
    assert score(exs, preds).micro.tp == 1
    assert score(exs, preds, normalize=True).micro.tp == 2


def test_normalize_value():
    assert normalize_value("Length", "8.5 cm") == "85 mm" == normalize_value("Length", "85mm")
    assert normalize_value("Weight", "20g") == "20 g" == normalize_value("Weight", "0.02 kg")
    assert normalize_value("Size", "10 M US") == "us 10" == normalize_value("Size", "US 10")
    assert normalize_value("Gender", "Men's") == "men" == normalize_value("Gender", "MENS")
    assert normalize_value("Color", "Dark Grey") == "dark gray"
    assert normalize_value("Brand", "NIKE") == normalize_value("Brand", "Nike") == "nike"


def test_span_scores():
    ex = Example("七雄点卡", {"HPPX": ("七雄",), "HCCX": ("点卡",)},
                 spans=(Span("HPPX", 0, 2, "七雄"), Span("HCCX", 2, 4, "点卡")))
    s = span_scores([ex], [[Attribute("HPPX", "七雄", 0, 2, 1.0), Attribute("HCCX", "卡", 3, 4, 1.0)]])
    assert (s.micro.tp, s.micro.fp, s.micro.fn) == (1, 1, 1)


def test_dictionary_baseline():
    train = [Example("Zorvex Red Shoes", {"Brand": ("Zorvex",), "Color": ("Red",)})]
    assert dictionary_baseline(train, ["Zorvexy Red", "Shoes Zorvex"]) == [{"Color": "Red"}, {"Brand": "Zorvex"}]


def test_paired_bootstrap():
    from qkv.attributes import Attribute, Example
    from qkv.attributes.evaluate import paired_bootstrap

    exs = [Example(f"Zorvex {i}", {"Brand": ("Zorvex",)}) for i in range(40)]
    right = [[Attribute("Brand", "Zorvex", 0, 6, 1.0)] for _ in exs]
    half = [r if i % 2 else [] for i, r in enumerate(right)]
    same = paired_bootstrap(exs, right, right, n=200)
    assert same["diff"] == 0 and same["sd"] == 0 and same["f1_a"] == 100
    d = paired_bootstrap(exs, right, half, n=500)
    assert abs(d["f1_b"] - 100 * 2 * 20 / (2 * 20 + 20)) < 1e-9  # 20 tp, 20 fn
    assert d["diff"] > 0 and 0 < d["sd"] < d["diff"] and d["ci95"][0] > 0
