"""Praise and complaints in proportion without ratings, and units that say nothing are not chosen
(issue 27: the water-heater example)."""

from qkv.summarize import Params, get_counter, prepare, select, summarize
from qkv.summarize.informative import is_uninformative
from qkv.summarize.sentiment import positive_probability, text_polarity

# Ten reviews of one water heater, written for this test: six praise it, four complain (noise, a
# leak, slow service, an extra installation fee), and one says nothing yet.
WATER_HEATER = [
    "加热很快，十分钟就能洗澡，水温也很稳定。",
    "外观漂亮，安装师傅很专业，用起来很满意。",
    "加热速度快，出水量大，一家人洗澡都够用。",
    "还没有装，用了再来评价。",
    "性价比很高，保温效果好，晚上烧的水早上还是热的。",
    "操作简单，显示清楚，加热也快，推荐购买。",
    "用了一个星期，噪音很大，加热的时候嗡嗡响，晚上很吵。",
    "装好第三天接口就开始漏水，地上全是水，太失望了。",
    "售后服务太慢了，报修一个星期都没人来上门。",
    "安装的时候又收了两百多块的材料费，说好的免费安装，坑人。",
]


def test_water_heater_names_a_complaint_and_leaves_out_the_deferral(e5):
    s = summarize(WATER_HEATER, budget=120, encoder=e5)
    assert s.tokens_after <= 120
    assert "还没有装" not in s.text and "再来评价" not in s.text
    assert any(w in s.text for w in ("噪音", "漏水")), s.text
    complaints = {6, 7, 8, 9}
    chosen = [x.review for x in s.sentences]
    # complaints take about their share (4 of 10 reviews): at least one unit in three, at most two in three
    share = sum(r in complaints for r in chosen) / len(chosen)
    assert 0.25 <= share <= 0.67, (share, s.text)


def test_a_complaint_is_kept_at_every_budget(e5):
    doc = prepare(WATER_HEATER, encoder=e5)
    counter = get_counter("cl100k")
    for budget in (40, 80, 160):
        s = select(doc, budget, counter, Params())
        assert any(x.review in {6, 7, 8, 9} for x in s.sentences), (budget, s.text)


def test_text_sentiment_reads_praise_and_complaints():
    p = positive_probability(["质量很好，非常满意，推荐购买。", "太差了，漏水，要求退货。", "Great kettle."])
    assert p[0] > 0.6 and p[1] < 0.4 and p[2] == 0.5  # no English classifier: unknown
    assert text_polarity(["质量很好，非常满意。", "太差了，退货。"]).tolist() == [1, -1]


def test_uninformative_units():
    for t in ("还没有装，", "用了再来评价。", "亲们，", "谢谢卖家", "凑字数", "Haven't used it yet.",
              "Will update after a month."):
        assert is_uninformative(t), t
    for t in ("加热很快，", "漏水了。", "售后服务太慢了，", "The lid leaks.", "Heats up fast."):
        assert not is_uninformative(t), t


def test_only_uninformative_units_still_give_a_summary(e5):
    s = summarize(["还没有装，用了再来评价。"], budget=40, encoder=e5)
    assert s.text and any("says nothing" in n for n in s.notes)
