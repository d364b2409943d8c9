"""Each view in headless Chromium: do the main action, check what is drawn, no console errors, and
save a screenshot to artifacts/web-<view>.png."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def test_attention_head_heatmap_and_grid(page, screenshot):
    page.goto(page.base_url + "/")
    page.wait_for_selector("#att-heatmap .cell")
    # [CLS] nike air max 270 men ' s running shoes breath ##able lightweight [SEP]
    n = 14
    assert page.locator("#att-heatmap .cell").count() == n * n
    assert page.locator("#att-heatmap .rowlab").first.inner_text() == "[CLS]"
    # each row of a head's map is a softmax: its cells sum to 1
    row = [float(v) for v in page.locator('#att-heatmap .cell[data-i="3"]').evaluate_all(
        "cs => cs.map(c => c.dataset.v)")]
    assert len(row) == n and abs(sum(row) - 1) < 2e-3

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
    assert "[CLS]" not in page.locator("#att-heatmap").inner_text()
    page.uncheck("#att-hide-special")
    page.wait_for_function("document.querySelectorAll('#att-heatmap .cell').length === 196")
    page.select_option("#att-layer", "2")
    page.select_option("#att-head", "5")
    page.wait_for_selector('#att-heatmap .heatmap[aria-label="layer 2 head 5"]')
    screenshot(page, "attention-head")

    page.click('#att-modes [data-mode="grid"]')
    page.wait_for_selector("#att-grid canvas")
    assert page.locator("#att-grid canvas").count() == 12
    page.locator('#att-grid canvas[data-head="7"]').click()
    page.wait_for_selector('#att-heatmap .heatmap[aria-label="layer 2 head 7"]')
    page.click('#att-modes [data-mode="grid"]')
    screenshot(page, "attention-grid")
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


def test_search_results_highlights_and_match_grid(page, screenshot):
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
    assert grid.locator(".rowlab").count() == 6  # [CLS] water ##proof hiking boots [SEP]
    assert grid.locator(".cell").count() == 6 * grid.locator(".collab").count()
    screenshot(page, "search")
    assert page.console_errors == []


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
    page.click("#sum-form button[type=submit]")
    page.wait_for_selector("#sum-table tbody tr")
    assert page.locator("#sum-text").inner_text()
    assert page.console_errors == []
