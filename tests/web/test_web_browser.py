"""Each view in headless Chromium: do the main action, check what is drawn, no console errors, and
save a screenshot to artifacts/web-<view>.png."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser


def test_attention_head_heatmap_neuron_and_grid(page, screenshot):
    page.goto(page.base_url + "/")
    page.wait_for_selector("#att-heatmap .cell")
    # [CLS] nike air max 270 men ' s running shoes breath ##able lightweight [SEP]
    n = 14
    assert page.locator("#att-heatmap .cell").count() == n * n
    assert page.locator("#att-heatmap .rowlab").first.inner_text() == "[CLS]"
    assert page.locator("#att-heatmap .collab").count() == n  # tokens on both axes
    # each row of a head's map is a softmax: its cells sum to 1
    row = [float(v) for v in page.locator('#att-heatmap .cell[data-i="3"]').evaluate_all(
        "cs => cs.map(c => c.dataset.v)")]
    assert len(row) == n and abs(sum(row) - 1) < 1e-3

    # hover shows the value; keyboard moves the cursor
    page.locator('#att-heatmap .cell[data-i="1"][data-j="2"]').hover()
    assert "nike → air" in page.locator("#tooltip").inner_text()
    page.locator("#att-heatmap .heatmap").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    assert page.locator("#att-readout").inner_text().startswith("nike → nike:")

    # hide special tokens: rows and columns of [CLS] / [SEP] go away
    page.check("#att-hide-special")
    page.wait_for_function("document.querySelectorAll('#att-heatmap .cell').length === 144")
    assert "[CLS]" not in page.locator("#att-heatmap .heatmap").inner_text()
    page.uncheck("#att-hide-special")
    page.wait_for_function("document.querySelectorAll('#att-heatmap .cell').length === 196")
    page.select_option("#att-layer", "2")
    page.select_option("#att-head", "5")
    page.wait_for_selector('#att-heatmap .heatmap[data-map="layer 2 head 5"]')

    # neuron view of a clicked row token: one row per key, weights = that heatmap row
    page.locator("#att-heatmap .rowlab").nth(2).click()
    page.wait_for_selector("#neuron-table")
    assert "“air”" in page.locator("#att-neuron h3").inner_text()
    assert page.locator("#neuron-table tbody tr").count() == n
    heat = [float(v) for v in page.locator('#att-heatmap .cell[data-i="2"]').evaluate_all("cs => cs.map(c => c.dataset.v)")]
    shown = [float(x.split()[-1]) for x in page.locator("#neuron-table tbody td:last-child").all_inner_texts()]
    assert max(abs(a - b) for a, b in zip(heat, shown)) < 1e-3
    screenshot(page, "attention-head")

    page.click('#att-modes [data-mode="grid"]')
    page.wait_for_selector("#att-grid canvas")
    assert page.locator("#att-grid canvas").count() == 12
    page.locator('#att-grid canvas[data-head="7"]').click()
    page.wait_for_selector('#att-heatmap .heatmap[data-map="layer 2 head 7"]')
    page.click('#att-modes [data-mode="grid"]')
    page.wait_for_selector("#att-grid canvas")
    screenshot(page, "attention-grid")
    assert page.console_errors == []


def hold_back(page, marker: str, ms: int = 1500):
    """Answers to requests whose body holds ``marker`` reach the page ``ms`` later; once the page
    has had such an answer and a moment to draw it, ``window.__heldBack`` counts it."""
    page.evaluate("""([marker, ms]) => {
      window.__heldBack = 0;
      const real = window.fetch;
      window.fetch = async (url, opts) => {
        const slow = opts && typeof opts.body === "string" && opts.body.includes(marker);
        if (!slow) return real(url, opts);
        try {
          const res = await real(url, opts);
          await new Promise((r) => setTimeout(r, ms));
          return res;
        } finally { setTimeout(() => { window.__heldBack += 1; }, 300); }
      };
    }""", [marker, ms])


def test_attention_late_answer_does_not_draw_over_newer_choice(page):
    """Changing layer then head fires two requests; if the first answers last it must not win."""
    page.goto(page.base_url + "/")
    page.wait_for_selector("#att-heatmap .cell")
    hold_back(page, '"head":0')  # every answer for head 0 lands after the answer for head 5
    page.select_option("#att-layer", "3")  # asks for layer 3 head 0 (slow)
    page.select_option("#att-head", "5")  # asks for layer 3 head 5 (fast)
    page.wait_for_selector('#att-heatmap .heatmap[data-map="layer 3 head 5"]')
    page.wait_for_function("window.__heldBack > 0")  # the slow answer for head 0 has been handled
    assert page.locator("#att-heatmap .heatmap").get_attribute("data-map") == "layer 3 head 5"
    assert page.locator("#att-status").inner_text() == ""
    assert page.console_errors == []


def test_attention_rollout_and_tour(page, screenshot):
    page.goto(page.base_url + "/")
    page.wait_for_selector("#att-heatmap .cell")
    page.click('#att-modes [data-mode="rollout"]')
    page.wait_for_selector("#att-rollout .cell")
    assert page.locator("#att-rollout .cell").count() == 14 * 14
    assert "rollout" in page.locator("#att-rollout .maptitle").inner_text()
    page.select_option("#att-level", "word")  # word pieces merged: [CLS] Nike Air Max 270 Men ' s ...
    page.wait_for_function("document.querySelectorAll('#att-rollout .rowlab').length < 14")
    assert "Breathable" in page.locator("#att-rollout .heatmap").inner_text()
    screenshot(page, "attention-rollout")

    page.click('#att-modes [data-mode="tour"]')
    page.wait_for_selector("li.step")
    steps = page.locator("li.step h3").all_inner_texts()
    assert [s[0] for s in steps[:5]] == ["1", "2", "3", "4", "5"]
    assert page.locator('li.step[data-step="check"]').inner_text().count("✓") == 8
    # real numbers: the weights table of step 5 has one row per token, and each row sums to 1
    rows = page.locator('li.step[data-step="softmax"] figure.arr').first.locator("tbody tr")
    assert rows.count() == 14
    vals = [float(x) for x in rows.nth(3).locator("td").all_inner_texts()]
    assert abs(sum(vals) - 1) < 0.06  # shown with 2 decimals
    screenshot(page, "attention-tour")
    page.click("#lang")
    page.wait_for_function("document.querySelector('li.step h3').textContent.includes('词元')")
    screenshot(page, "attention-tour-zh")
    page.click("#lang")
    assert page.console_errors == []


def test_language_switch_and_keyboard_tabs(page):
    page.goto(page.base_url + "/")
    page.wait_for_selector("#att-heatmap .cell")
    page.click("#lang")
    assert page.locator("#tab-search").inner_text() == "搜索"
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    page.click("#lang")
    assert page.locator("#tab-search").inner_text() == "Search"
    page.locator("#tab-attention").focus()
    page.keyboard.press("ArrowRight")
    assert page.locator("#tab-search").get_attribute("aria-selected") == "true"
    assert page.locator("#view-search").is_visible() and not page.locator("#view-attention").is_visible()
    assert page.console_errors == []


# What the page's own chrome says, with the data it shows taken out (titles, tokens, values, code)
CHROME_TEXT = """() => {
  const view = [...document.querySelectorAll("main > section")].find((v) => !v.hidden);
  const copy = view.cloneNode(true);
  copy.querySelectorAll(".title, .title-cell, #attr-table td:nth-child(2), .rowlab, .collab, #neuron-table td:first-child,"
    + " code, q, .summary, #sum-table td, #sum-model, .points .label, textarea, .words, .maptitle + * .cell").forEach((n) => n.remove());
  document.body.append(copy);
  const text = copy.innerText;
  copy.remove();
  return text;
}"""
ENGLISH_CHROME = re.compile(r"\b(any|min|max|cells|score|Why this match|Click a row token|attention|layer|head|brand|colour"
                            r"|category|size|price|rating|black|white|olive|shoes|Error|Title|Attribute|Value|Confidence"
                            r"|Sentence|Review|input tokens)\b", re.I)
CHINESE_CHROME = re.compile(r"任意|最小|最大|为什么匹配|得分|品牌|颜色|类别|尺码|材质|点击|单元格|注意力|错误|标题|属性|置信度|句子|词元")


def _fill_every_view(page):
    page.goto(page.base_url + "/")
    page.wait_for_selector("#att-heatmap .cell")
    page.click("#tab-search")
    page.wait_for_selector("#search-results li .meta button")
    page.select_option('#search-filters select[data-field="colour"]', "black")
    page.press("#search-q", "Enter")
    page.wait_for_function("document.querySelector('#search-status').textContent.includes('ms')")
    page.click("#tab-attributes")
    page.click("#attr-form button[type=submit]")
    page.wait_for_selector("#attr-table tbody tr")
    page.click("#tab-summaries")
    page.click("#sum-form button[type=submit]")
    page.wait_for_selector("#sum-table tbody tr")


def _chrome_of_every_view(page) -> dict[str, str]:
    out = {}
    for v in ("attention", "search", "attributes", "summaries"):
        page.click(f"#tab-{v}")
        out[v] = page.evaluate(CHROME_TEXT)
    return out


def test_every_string_follows_the_chosen_language(page):
    """Switching language leaves nothing of the other behind: filters and their values, result
    rows, the heatmap's legend and title, the attributes' names, and error messages."""
    _fill_every_view(page)
    english = _chrome_of_every_view(page)
    assert ENGLISH_CHROME.search(english["search"]) and not any(CHINESE_CHROME.search(x) for x in english.values()), english
    page.click("#lang")
    chinese = _chrome_of_every_view(page)
    for view, text in chinese.items():
        assert not ENGLISH_CHROME.search(text), (view, ENGLISH_CHROME.search(text), text)
    assert "任意" in chinese["search"] and "最小" in chinese["search"] and "为什么匹配" in chinese["search"]
    assert "黑色" in page.locator('#search-filters select[data-field="colour"]').inner_text()
    assert "颜色" in chinese["search"] and "品牌" in chinese["attributes"] and "单元格" in chinese["attention"]
    assert "注意力权重 · 层 0 · 头 0" in page.locator("#att-heatmap .maptitle").inner_text()
    # an error in the page's terms and language, and in the other language after a switch
    page.click("#tab-attention")
    page.fill("#att-text", "")
    page.press("#att-text", "Enter")
    page.wait_for_selector("#att-status.error")
    assert page.locator("#att-status").inner_text().startswith("错误： 文本 是空的")
    page.click("#lang")
    assert page.locator("#att-status").inner_text().startswith("Error: Text is empty")
    english = _chrome_of_every_view(page)
    for view, text in english.items():
        assert not CHINESE_CHROME.search(text), (view, CHINESE_CHROME.search(text), text)
    page.click("#tab-search")
    page.fill("#search-q", " ")
    page.press("#search-q", "Enter")
    assert page.locator("#search-status").inner_text() == "Error: Type what you are looking for first."
    assert page.locator("#search-results li").count() == 0  # no stale results under the error
    assert all("422" in e for e in page.console_errors), page.console_errors  # the refused empty text


def test_nothing_close_is_said(page):
    page.goto(page.base_url + "/#search")
    page.wait_for_selector("#search-results li")
    assert page.locator("#search-nothing").count() == 0 and page.locator("#search-results li.weak").count() == 0
    page.fill("#search-q", "headphones")
    page.fill('#search-filters input[data-field="price"][data-op="<="]', "30")
    page.press("#search-q", "Enter")
    page.wait_for_selector("#search-nothing")
    n = page.locator("#search-results li").count()
    assert n and page.locator("#search-results li.weak .badge").count() == n
    assert "Nothing in the catalog is close" in page.locator("#search-nothing").inner_text()
    assert page.console_errors == []


def test_search_results_highlights_and_match_grid(page, screenshot):
    sent = []
    page.on("request", lambda r: sent.append((r.url.split("/api/")[-1], r.post_data_json)) if "/api/search" in r.url
            and r.method == "POST" else None)
    page.goto(page.base_url + "/#search")
    page.wait_for_selector("#search-results li")  # the view searches its default query on opening
    page.select_option('#search-filters select[data-field="language"]', "en")
    page.fill('#search-filters input[data-field="price"][data-op="<="]', "100")
    page.fill("#search-q", "waterproof hiking boots")
    page.select_option("#search-mode", "hybrid")
    page.press("#search-q", "Enter")
    page.wait_for_function("document.querySelector('#search-status').textContent.includes('ms')")
    items = page.locator("#search-results > li")
    assert items.count() == 10
    first = items.first
    assert "Waterproof Hiking Boots" in first.locator(".title").inner_text()
    assert {"Waterproof", "Hiking", "Boots"} <= set(first.locator(".title mark:not(.dense)").all_inner_texts())
    prices = [float(m.split("price: ")[1].split(" ")[0]) for m in items.locator(".meta").all_inner_texts() if "price: " in m]
    assert prices and all(p <= 100 for p in prices)
    assert "server" in page.locator("#search-status").inner_text()
    first.get_by_role("button", name="Why this match?").click()
    grid = first.locator(".match .heatmap")
    grid.wait_for()
    # the grid over words: no [CLS]/[SEP] rows or columns, and word pieces joined (water ##proof)
    assert grid.locator(".rowlab").all_inner_texts() == ["waterproof", "hiking", "boots"]
    assert not any(x.startswith("[") or x.startswith("##") for x in grid.locator(".collab").all_inner_texts())
    assert grid.locator(".cell").count() == 3 * grid.locator(".collab").count()
    # the search asked for the first three results' explanations only; the sixth is explained
    # when opened, and its title gets its marks then
    # in the "grid" detail: no word-level grids, pairs or context, and still the first result's
    # grid above was drawn from the search's own answer (no request when it was opened)
    assert [(b["explain"], b["explain_detail"]) for u, b in sent if u == "search"][-1] == (3, "grid")
    assert not [u for u, _ in sent if u == "search/explain"]
    drawn = sum(float(v) for v in grid.locator(".cell").evaluate_all("cs => cs.map(c => c.dataset.v)"))
    note = first.locator(".match .hint")
    cos, words, prefix, special = (float(note.get_attribute(f"data-{k}")) for k in ("cosine", "words", "prefix", "special"))
    assert abs(drawn - words) < 2e-3  # the word cells are the words' exact parts
    assert abs(words + prefix + special - cos) < 2e-3  # with the prefixes and special tokens apart: the cosine
    assert f"{cos:.4f}" in note.inner_text() and "special tokens" in note.inner_text()
    sixth = items.nth(5)
    assert sixth.locator(".title mark, .title span.dense").count() == 0
    sixth.get_by_role("button", name="Why this match?").click()
    sixth.locator(".match .heatmap").wait_for()
    assert sixth.locator(".match .heatmap .rowlab").count() == 3
    assert [(b["ids"], b["detail"]) for u, b in sent if u == "search/explain"] == [([sixth.get_attribute("data-id")], "grid")]
    assert sixth.locator(".title span[title], .title mark").count() > 0
    screenshot(page, "search")
    assert page.console_errors == []


def test_a_busy_server_is_retried_with_a_note(page):
    """429 with Retry-After: the page says the server is busy and tries again, then draws the answer."""
    answered = []

    def busy_once(route):
        if not answered:
            answered.append(429)
            route.fulfill(status=429, headers={"Retry-After": "1", "content-type": "application/json"},
                          body='{"error": "busy", "retry_after": 1}')
        else:
            answered.append(200)
            route.continue_()

    page.goto(page.base_url + "/#search")
    page.wait_for_selector("#search-results li")
    page.route("**/api/search", busy_once)
    page.fill("#search-q", "leather boots")
    page.press("#search-q", "Enter")
    page.wait_for_selector("#busy:not([hidden])")
    assert "busy" in page.locator("#busy").inner_text()
    page.wait_for_function("document.querySelector('#search-status').textContent.includes('ms')")
    assert answered == [429, 200]
    assert page.locator("#busy").is_hidden()
    assert page.console_errors == [] or all("429" in e for e in page.console_errors)


def test_attribute_table_with_spans(page, screenshot, sample_attributes):
    assert sample_attributes is not None, "qkv.attributes cannot be imported: the attributes view has no model"
    page.goto(page.base_url + "/#attributes")
    page.fill("#attr-titles", "Northpeak Women's Waterproof Hiking Boots with Ankle Support - Black, US 8\n"
                              "Velora 男士透气网面跑鞋 轻便运动鞋 橄榄绿 US 9")
    page.click("#attr-form button[type=submit]")
    page.wait_for_selector("#attr-table tbody tr")
    table = page.locator("#attr-table")
    cells = table.locator("tbody tr").all_inner_texts()
    assert any("brand" in c and "Northpeak" in c for c in cells)
    assert any("size" in c and "US 8" in c for c in cells)
    # the spans are highlighted inside the title, each coloured by its attribute
    spans = table.locator("td.title-cell .span-attr")
    got = {(spans.nth(i).get_attribute("data-attr"), spans.nth(i).inner_text()) for i in range(spans.count())}
    assert ("brand", "Northpeak") in got and ("size", "US 8") in got
    assert table.locator("td.title-cell").count() == 2
    screenshot(page, "attributes")
    assert page.console_errors == []


def test_attributes_late_answer_does_not_replace_the_newer_one(page, sample_attributes):
    assert sample_attributes is not None, "qkv.attributes cannot be imported: the attributes view has no model"
    page.goto(page.base_url + "/#attributes")
    hold_back(page, "Sweater")
    page.fill("#attr-titles", "Lumora Merino Wool Crew Neck Sweater - Navy, M")
    page.click("#attr-form button[type=submit]")  # slow
    boots = "Northpeak Women's Waterproof Hiking Boots with Ankle Support - Black, US 8"
    page.fill("#attr-titles", boots)
    page.click("#attr-form button[type=submit]")  # fast
    page.wait_for_selector("#attr-table td.title-cell")
    page.wait_for_function("window.__heldBack > 0")
    assert page.locator("#attr-table td.title-cell").all_inner_texts() == [boots]
    assert "Sweater" not in page.locator("#attr-out").inner_text()
    # the demo model says it is one, and how to train one's own
    assert "qkv attrs train" in page.locator("#attr-demo").inner_text()
    assert page.console_errors == []


def test_summary_late_answer_does_not_replace_the_newer_one(page):
    page.goto(page.base_url + "/#summaries")
    hold_back(page, '"budget":60')
    page.click("#sum-form button[type=submit]")  # budget 60: slow
    page.locator("#sum-budget").fill("150")
    page.click("#sum-form button[type=submit]")  # budget 150: fast
    page.wait_for_selector("#sum-table tbody tr")
    page.wait_for_function("window.__heldBack > 0")
    assert "≤ 150" in page.locator("#sum-out .stats").inner_text()
    assert page.locator("#sum-budget-out").inner_text() == "150"
    assert page.locator("#sum-status").inner_text() == "Summary of the reviews in the box."
    assert page.console_errors == []


def test_a_csv_with_an_unknown_review_column_lets_the_page_choose_it(page, tmp_path):
    f = tmp_path / "评论.csv"
    f.write_bytes("sku,备注,价格\nA1,很好用，推荐。,3\nA2,太小了，退货。,4\n".encode("gb18030"))
    page.goto(page.base_url + "/#summaries")
    page.click("#sum-form button[type=submit]")  # a first summary of the pasted reviews: cleared below
    page.wait_for_selector("#sum-table tbody tr")
    page.set_input_files("#sum-file", str(f))
    page.click("#sum-form button[type=submit]")
    page.wait_for_selector("#sum-column")
    assert page.locator("#sum-table").count() == 0  # no stale summary under the question
    assert "choose" in page.locator("#sum-status").inner_text()
    assert page.locator("#sum-column option").all_inner_texts() == ["—", "sku", "备注", "价格"]
    page.select_option("#sum-column", "备注")
    page.wait_for_selector("#sum-table tbody tr")
    assert set(page.locator("#sum-table tbody td:nth-child(2)").all_inner_texts()) <= {"很好用，推荐。", "太小了，退货。"}
    assert all("422" in e for e in page.console_errors), page.console_errors


def test_summary_of_pasted_reviews(page, screenshot):
    page.goto(page.base_url + "/#summaries")
    page.locator("#sum-budget").fill("40")
    assert page.locator("#sum-budget-out").inner_text() == "40"
    page.click("#sum-form button[type=submit]")
    page.wait_for_selector("#sum-table tbody tr")
    after = int(page.locator("#sum-after").inner_text())
    before = int(page.locator("#sum-before").inner_text())
    assert 0 < after <= 40 < before
    assert page.locator("#sum-saved").inner_text().startswith(str(before - after))
    sentences = page.locator("#sum-table tbody tr td:nth-child(2)").all_inner_texts()
    assert sentences and all(s in page.locator("#sum-reviews").input_value() for s in sentences)
    screenshot(page, "summaries")
    assert page.console_errors == []


def test_summary_of_an_uploaded_file(page, tmp_path):
    f = tmp_path / "reviews.txt"
    f.write_text("Great shoes, very light.\nRuns small; order a size up.\nComfortable all day.\n")
    page.goto(page.base_url + "/#summaries")
    page.set_input_files("#sum-file", str(f))
    page.select_option("#sum-tokenizer", "model")
    page.select_option("#sum-order", "score")
    page.click("#sum-form button[type=submit]")
    page.wait_for_selector("#sum-table tbody tr")
    assert page.locator("#sum-text").inner_text()
    assert "model" in page.locator(".stats").inner_text()
    ranks = [int(x) for x in page.locator("#sum-table tbody td:first-child").all_inner_texts()]
    assert ranks == sorted(ranks) or len(ranks) == 1
    assert page.locator("#sum-status").inner_text() == "Summary of the file reviews.txt."  # not the box's
    assert page.console_errors == []


WATER_HEATER = Path(__file__).parents[2] / "docs" / "examples" / "water_heater_reviews.csv"


def _points_as_drawn(pg, side: str) -> list[tuple[str, str, str]]:
    items = pg.locator(f"#sum-{side} li")
    return [(items.nth(i).locator(".label").inner_text(), items.nth(i).locator(".count").inner_text(),
             items.nth(i).locator("q").inner_text()) for i in range(items.count())]


def test_summary_shows_what_several_buyers_say_with_counts(page_zh, screenshot):
    """Issue 27, item 5: the page shows the points beside the prose, praise and complaints apart,
    each with its exact count of reviews and a quoted example — the API's points, as drawn."""
    pg = page_zh
    pg.goto(pg.base_url + "/#summaries")
    pg.locator("#sum-budget").fill("120")
    pg.set_input_files("#sum-file", str(WATER_HEATER))
    pg.click("#sum-form button[type=submit]")
    pg.wait_for_selector("#sum-points", timeout=180_000)
    api = pg.request.post(pg.base_url + "/api/summarize/upload",
                          multipart={"file": {"name": WATER_HEATER.name, "mimeType": "text/csv",
                                              "buffer": WATER_HEATER.read_bytes()}, "budget": "120"}).json()
    assert api["points"]["praise"] or api["points"]["complaints"]
    for side in ("praise", "complaints"):
        want = [(p["label"], f"{p['count']} of {api['n_reviews']} reviews", p["example"]) for p in api["points"][side]]
        assert _points_as_drawn(pg, side) == want
        if not want:
            assert pg.locator(f"#sum-{side} .hint").inner_text() == "No point is made by two or more reviews."
    assert pg.locator("#sum-model").inner_text() == api["model"] == "intfloat/multilingual-e5-small"
    screenshot(pg, "summaries-points")
    pg.click("#lang")  # the chrome follows the language; the labels and quotes are the reviews' own
    assert pg.locator("#sum-points h3").inner_text() == "买家在说什么"
    first = api["points"]["praise"][0] if api["points"]["praise"] else api["points"]["complaints"][0]
    assert f"10 条中 {first['count']} 条" in pg.locator("#sum-points").inner_text()
    assert pg.console_errors == []


def test_on_a_phone_the_header_is_one_row_and_results_start_on_the_first_screen(page):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(page.base_url + "/#search")
    page.wait_for_selector("#search-results li")
    assert page.locator("header").bounding_box()["height"] < 60
    assert not page.locator("#search-filters-box").evaluate("n => n.open")
    assert page.locator("#search-results li").first.bounding_box()["y"] < 844 * 0.6
    page.click("#tab-summaries")  # every tab stays reachable in the scrolling tab row
    assert page.locator("#view-summaries").is_visible()
    assert page.console_errors == []


def test_a_head_opened_by_keyboard_keeps_the_focus(page):
    page.goto(page.base_url + "/")
    page.wait_for_selector("#att-heatmap .cell")
    page.click('#att-modes [data-mode="grid"]')
    page.wait_for_selector('#att-grid canvas[data-head="4"]')
    page.focus('#att-grid canvas[data-head="4"]')
    page.keyboard.press("Enter")
    page.wait_for_selector('#att-heatmap .heatmap[data-map="layer 0 head 4"]')
    assert page.evaluate("document.activeElement.dataset.map") == "layer 0 head 4"
    page.keyboard.press("ArrowRight")  # and the arrows move inside it at once
    assert page.locator("#att-heatmap .cell.cursor").get_attribute("data-j") == "1"
    assert page.console_errors == []


def test_chinese_column_labels_stand_upright(page):
    page.goto(page.base_url + "/")
    page.fill("#att-text", "Velora 透气跑鞋")
    page.press("#att-text", "Enter")
    page.wait_for_selector("#att-heatmap .collab.han")
    han = page.locator("#att-heatmap .collab.han").first
    assert han.evaluate("n => getComputedStyle(n).textOrientation") == "upright"
    assert han.evaluate("n => getComputedStyle(n).transform") == "none"
    latin = page.locator("#att-heatmap .collab:not(.han)").nth(1)
    assert latin.evaluate("n => getComputedStyle(n).textOrientation") == "sideways"
    assert page.console_errors == []


def search_on_page(pg, query: str) -> None:
    """Open the search view, wait for its first answer, then search ``query`` as a shopper does."""
    pg.goto(pg.base_url + "/#search")
    pg.wait_for_selector("#search-results li", timeout=180_000)
    pg.fill("#search-q", query)
    pg.press("#search-q", "Enter")


# ---------------------------------------------------------------- the sample as `qkv serve --sample` serves it:
# multilingual-e5-small and the sample's glossary (tests/web/conftest.py: live_server_zh)
ZH_REVIEWS = ["鞋子很轻，穿着很舒服。尺码偏小，建议买大半码！", "鞋底两个月就开胶了，质量一般。",
              "性价比很高，很舒服，颜色也好看。", "物流很快，包装很好。", "跑步的时候很透气，脚不闷。"]


def test_misspelt_query_shows_the_spelling_it_was_searched_as(page_zh):
    pg = page_zh
    search_on_page(pg, "waterprof hikng boots")
    pg.wait_for_function("document.querySelector('#search-as') && !document.querySelector('#search-as').hidden",
                         timeout=180_000)
    assert pg.locator("#search-as").inner_text().startswith("Showing results for: waterproof hiking boots · ")
    top5 = pg.locator("#search-results > li .title").all_inner_texts()[:5]
    assert any("Waterproof Hiking Boots" in t for t in top5), top5
    pg.click("#lang")
    pg.wait_for_function("document.querySelector('#search-as').textContent.includes('已按此拼写检索')")
    pg.click("#lang")
    # "Search instead for" the words as typed: nothing corrected, the line under the box gone
    assert pg.locator("#search-astyped").inner_text() == "Search instead for waterprof hikng boots"
    pg.click("#search-astyped")
    pg.wait_for_function("document.querySelector('#search-as').hidden", timeout=180_000)


def test_chinese_query_shows_what_it_was_searched_as(page_zh, screenshot):
    pg = page_zh
    search_on_page(pg, "透气跑鞋")
    pg.wait_for_function("document.querySelector('#search-as') && !document.querySelector('#search-as').hidden",
                         timeout=180_000)
    assert pg.locator("#search-as").inner_text().startswith("Searched as:")
    assert "breathable running shoes" in pg.locator("#search-as").inner_text()
    top5 = pg.locator("#search-results > li .title").all_inner_texts()[:5]
    assert any("Breathable Mesh Running Shoes" in t for t in top5) and any("透气网面跑鞋" in t for t in top5), top5
    # the first results' English words are marked: the keyword side searched the translation
    first = pg.locator("#search-results > li").first
    assert first.locator(".title mark:not(.dense)").count() > 0
    pg.click("#lang")
    pg.wait_for_function("document.querySelector('#search-as').textContent.includes('检索为')")
    screenshot(pg, "search-zh")
    pg.click("#lang")
    # an English query finds the Chinese hiking boots (the glossary's 登山靴 on the keyword side)
    pg.fill("#search-q", "waterproof hiking boots")
    pg.press("#search-q", "Enter")
    pg.wait_for_function("document.querySelector('#search-as').hidden", timeout=180_000)
    pg.wait_for_function("[...document.querySelectorAll('#search-results .title')].some(t => t.textContent.includes('登山靴'))",
                         timeout=180_000)
    top5 = pg.locator("#search-results > li .title").all_inner_texts()[:5]
    assert any("登山靴" in t for t in top5) and any("Waterproof Hiking Boots" in t for t in top5), top5
    screenshot(pg, "search-en-finds-zh")
    assert pg.console_errors == []


def test_a_translated_query_shows_its_words_as_chips(page_zh, screenshot):
    """Under "searched as", a chip per translated word (the API's ``translation``): 透气 → breathable
    from the sample's glossary at full weight; 无线 → wireless, from the dictionary by the parts of
    无线耳机, with its weight shown and its other English ("also cordless") dim; source and weight
    in the tooltip, in the page's language; no chips for an English query."""
    from qkv.search.crosslingual import SOURCE_TRUST

    pg = page_zh
    search_on_page(pg, "透气无线耳机")
    pg.wait_for_selector("#search-words:not([hidden]) li", timeout=180_000)
    assert pg.locator("#search-as q").inner_text() == "breathable wireless headphones"
    chips = pg.locator("#search-words li")
    assert chips.all_inner_texts()[0] == "透气 → breathable"  # full trust: no weight shown
    assert chips.all_inner_texts()[1:] == [f"无线 → wireless ×{SOURCE_TRUST['sub-words']:g} also cordless",
                                           f"耳机 → headphones ×{SOURCE_TRUST['sub-words']:g}"]
    full, weak = chips.nth(0), chips.nth(1)
    assert full.locator(".weight").count() == 0 and "seller's glossary" in full.get_attribute("title")
    w = SOURCE_TRUST["sub-words"]
    assert weak.locator(".weight").inner_text() == f"×{w:g}" and "weak" in weak.get_attribute("class")
    assert weak.locator(".also").inner_text() == "also cordless"
    tip = weak.get_attribute("title")
    assert "无线 → wireless" in tip and "dictionary, by its parts" in tip and f"weight {w:g}" in tip
    # the alternatives and the weight are dim (the page's muted colour), the word itself is not
    colour = "el => getComputedStyle(el).color"
    muted = pg.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--muted').trim()")
    assert muted and weak.locator(".also").evaluate(colour) == weak.locator(".weight").evaluate(colour) \
        != weak.locator("b").evaluate(colour)
    # the chips sit right under the "searched as" line, above the results
    top = pg.evaluate("""() => ['#search-as', '#search-words', '#search-results'].map(
                           (s) => document.querySelector(s).getBoundingClientRect())
                           .map((r) => [r.top, r.bottom])""")
    assert top[0][1] <= top[1][0] + 1 and top[1][1] <= top[2][0] + 1
    screenshot(pg, "search-zh-words")
    pg.click("#lang")  # 中文: the labels and the tooltip follow
    pg.wait_for_function("document.querySelector('#search-words li:nth-child(2)').title.includes('词典')")
    assert "权重" in weak.get_attribute("title") and weak.locator(".also").inner_text() == "也搜 cordless"
    screenshot(pg, "search-zh-words-zh")
    pg.click("#lang")
    pg.fill("#search-q", "waterproof hiking boots")
    pg.press("#search-q", "Enter")
    pg.wait_for_function("document.querySelector('#search-words').hidden", timeout=180_000)
    assert pg.locator("#search-words li").count() == 0
    assert pg.console_errors == []


def test_attention_view_of_a_chinese_title(page_zh, screenshot):
    pg = page_zh
    pg.goto(pg.base_url + "/")
    pg.wait_for_selector("#att-heatmap .cell", timeout=180_000)
    assert pg.locator("#att-layer option").count() == 12  # the multilingual model's 12 layers
    title = "Northpeak 男士透气网面跑鞋 轻便运动鞋"
    pg.fill("#att-text", title)
    pg.click("#att-form button[type=submit]")
    pg.wait_for_function("[...document.querySelectorAll('#att-heatmap .rowlab')].some(r => r.textContent.includes('跑'))",
                         timeout=180_000)
    labels = pg.locator("#att-heatmap .rowlab").all_inner_texts()
    assert labels[0] == "<s>" and labels[-1] == "</s>" and not any("UNK" in x for x in labels)
    n = len(labels)
    assert pg.locator("#att-heatmap .cell").count() == n * n
    row = [float(v) for v in pg.locator('#att-heatmap .cell[data-i="5"]').evaluate_all("cs => cs.map(c => c.dataset.v)")]
    assert len(row) == n and abs(sum(row) - 1) < 1e-3  # a softmax row over the Chinese title's pieces
    pg.select_option("#att-level", "word")  # pieces grouped into words
    pg.wait_for_function(f"document.querySelectorAll('#att-heatmap .rowlab').length < {n}", timeout=180_000)
    words = pg.locator("#att-heatmap .rowlab").all_inner_texts()
    assert "Northpeak" in words and any("跑鞋" in w for w in words), words
    screenshot(pg, "attention-zh")
    assert pg.console_errors == []


def test_summary_of_chinese_reviews(page_zh, screenshot):
    pg = page_zh
    pg.goto(pg.base_url + "/#summaries")
    pg.fill("#sum-reviews", "\n".join(ZH_REVIEWS))
    pg.locator("#sum-budget").fill("40")
    pg.click("#sum-form button[type=submit]")
    pg.wait_for_selector("#sum-table tbody tr", timeout=180_000)
    after, before = int(pg.locator("#sum-after").inner_text()), int(pg.locator("#sum-before").inner_text())
    assert 0 < after <= 40 < before
    units = pg.locator("#sum-table tbody tr td:nth-child(2)").all_inner_texts()
    # clause-sized units (Chinese reviews run on with commas), each taken from the reviews
    assert units and all(u in "\n".join(ZH_REVIEWS) for u in units)
    assert len(units) < sum(r.count("。") + r.count("！") + r.count("，") for r in ZH_REVIEWS)
    # the summary reads as sentences: every unit closed, none left on a comma
    text = pg.locator("#sum-text").inner_text()
    assert text and text[-1] in "。！？!?" and "，。" not in text and not text.endswith("，"), text
    screenshot(pg, "summaries-zh")
    assert pg.console_errors == []


def test_a_word_with_no_translation_shows_as_an_untranslated_chip(page, screenshot):
    """Issue 30, item 3: 安踏 has no translation; it is searched as typed and shown as such (the
    "no translation found" / "未找到翻译" chip), beside 跑鞋 → running shoes."""
    pg = page
    search_on_page(pg, "安踏跑鞋")
    pg.wait_for_selector("#search-words:not([hidden]) li.untranslated", timeout=180_000)
    assert pg.locator("#search-as q").inner_text() == "安踏 running shoes"
    chip = pg.locator("#search-words li.untranslated")
    assert chip.count() == 1 and chip.inner_text() == "安踏 → no translation found"
    assert pg.locator("#search-words li:not(.untranslated)").first.inner_text().startswith("跑鞋 → running shoes")
    pg.click("#lang")
    pg.wait_for_function("document.querySelector('#search-words li.untranslated').textContent.includes('未找到翻译')")
    screenshot(pg, "search-untranslated-chip")
    assert pg.console_errors == []


def test_an_adapted_index_says_so_under_the_box(browser, encoder, sample_index, tmp_path, serve):
    """A query searched through the index's query adapter (`qkv terms adapt`) says so, in both languages."""
    import shutil

    from qkv.search import Index, adapter as A
    from qkv.web import create_app

    from .conftest import _page

    root = tmp_path / "idx"
    shutil.copytree(sample_index, root)
    with Index.open(root, encoder) as idx:
        shoes = {r["id"]: 1.0 for r in idx.store.get_rows(idx.store.all_ids()) if r["category"] == "shoes"}
        ad, _ = A.train(idx, {"gift for a runner": shoes}, epochs=5, lr=0.01)
    A.install(root, ad)
    ctx, pg = _page(browser, serve(create_app(encoder=encoder, index_dir=root)))
    try:
        search_on_page(pg, "gift for a runner")
        pg.wait_for_selector("#search-adapted", timeout=180_000)
        assert pg.locator("#search-as").inner_text() == "Meaning side fitted to your search terms (query adapter)."
        pg.click("#lang")
        pg.wait_for_function("document.querySelector('#search-adapted').textContent.includes('查询适配器')")
        assert not pg.console_errors, pg.console_errors
    finally:
        ctx.close()
