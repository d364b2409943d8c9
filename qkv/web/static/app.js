// qkv web page: talks only to the JSON API under /api/. No libraries, no network beyond this server.
"use strict";

// ------------------------------------------------------------------ labels, English / 中文
const I18N = {
  en: {
    "tab.attention": "Attention", "tab.search": "Search", "tab.attributes": "Attributes", "tab.summaries": "Summaries",
    "att.text": "Text", "att.show": "Show attention", "att.layer": "Layer", "att.head": "Head",
    "att.hide": "Hide special tokens", "att.mode.head": "One head", "att.mode.grid": "All heads of a layer",
    "att.mode.rollout": "Rollout", "att.mode.tour": "Tour: five steps",
    "att.hint": "Rows: the token that looks (query). Columns: the tokens it looks at (keys). Hover or use the arrow keys for values; click a row token (or press Enter) for the neuron view.",
    "att.rollout.hint": "Attention rollout: attention multiplied through the layers (with the residual), so each row shows which input tokens the final token representation draws on.",
    "att.neuron.pick": "Click a row token (or press Enter on a cell) to see how its query meets every key.",
    "att.loading": "Running the model…", "att.cells": "cells", "att.max": "max",
    "search.query": "Query", "search.mode": "Mode", "search.hybrid": "hybrid", "search.dense": "dense",
    "search.keyword": "keyword", "search.k": "Results", "search.go": "Search", "search.filters": "Filters",
    "search.why": "Why this match?", "search.hide": "Hide match grid", "search.latency": "server", "search.roundtrip": "round trip",
    "search.none": "No results.", "search.any": "any", "search.min": "min", "search.max": "max", "search.score": "score",
    "attr.titles": "Product titles, one per line", "attr.go": "Extract attributes", "attr.title": "Title",
    "attr.attribute": "Attribute", "attr.value": "Value", "attr.confidence": "Confidence", "attr.none": "No attributes found.",
    "sum.reviews": "Reviews, one per line (or upload a file)", "sum.file": "File", "sum.budget": "Budget (tokens)",
    "sum.go": "Summarize", "sum.chosen": "Chosen sentences", "sum.score": "score", "sum.tokens": "tokens",
    "sum.input": "input tokens", "sum.sentence": "Sentence", "sum.review": "Review", "sum.counts": "reviews / sentences", "sum.tokenizer": "tokenizer", "sum.used": "summary tokens", "sum.saved": "tokens saved",
    "unavailable": "Not available on this server:", "error": "Error:", "working": "Working…",
  },
  zh: {
    "tab.attention": "注意力", "tab.search": "搜索", "tab.attributes": "属性", "tab.summaries": "摘要",
    "att.text": "文本", "att.show": "显示注意力", "att.layer": "层", "att.head": "头",
    "att.hide": "隐藏特殊词元", "att.mode.head": "单个头", "att.mode.grid": "本层所有头",
    "att.mode.rollout": "注意力累积 (rollout)", "att.mode.tour": "导览：五个步骤",
    "att.hint": "行：发出注意的词元（查询）。列：被注意的词元（键）。悬停或用方向键查看数值；点击行上的词元（或按回车）查看神经元视图。",
    "att.rollout.hint": "注意力累积：把各层的注意力（含残差）相乘，每一行显示最终表示依赖哪些输入词元。",
    "att.neuron.pick": "点击行上的词元（或在单元格上按回车），查看它的查询向量如何与每个键相遇。",
    "att.loading": "正在运行模型…", "att.cells": "个单元格", "att.max": "最大值",
    "search.query": "查询", "search.mode": "模式", "search.hybrid": "混合", "search.dense": "向量",
    "search.keyword": "关键词", "search.k": "结果数", "search.go": "搜索", "search.filters": "筛选",
    "search.why": "为什么匹配？", "search.hide": "隐藏匹配矩阵", "search.latency": "服务器", "search.roundtrip": "往返",
    "search.none": "没有结果。", "search.any": "任意", "search.min": "最小", "search.max": "最大", "search.score": "得分",
    "attr.titles": "商品标题，每行一个", "attr.go": "提取属性", "attr.title": "标题",
    "attr.attribute": "属性", "attr.value": "值", "attr.confidence": "置信度", "attr.none": "没有找到属性。",
    "sum.reviews": "评论，每行一条（或上传文件）", "sum.file": "文件", "sum.budget": "预算（词元）",
    "sum.go": "生成摘要", "sum.chosen": "选中的句子", "sum.score": "得分", "sum.tokens": "词元",
    "sum.input": "输入词元", "sum.sentence": "句子", "sum.review": "评论", "sum.counts": "评论 / 句子", "sum.tokenizer": "分词器", "sum.used": "摘要词元", "sum.saved": "节省的词元",
    "unavailable": "此服务器不可用：", "error": "错误：", "working": "处理中…",
  },
};
let lang = localStorage.getItem("qkv.lang") || ((navigator.language || "en").startsWith("zh") ? "zh" : "en");
const t = (key) => (I18N[lang] && I18N[lang][key]) || I18N.en[key] || key;

function applyLang() {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  document.querySelectorAll("[data-i18n]").forEach((n) => { n.textContent = t(n.dataset.i18n); });
  document.getElementById("lang").textContent = lang === "zh" ? "English" : "中文";
}

// ------------------------------------------------------------------ small helpers
const $ = (id) => document.getElementById(id);
function el(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === "class") n.className = v;
    else if (k === "style") n.style.cssText = v;
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c != null) n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return n;
}
const fmt = (x, d = 3) => (x == null || Number.isNaN(x) ? "–" : Number(x).toFixed(d));

class ApiError extends Error { constructor(status, message) { super(message); this.status = status; } }

async function api(path, body, { form = false } = {}) {
  const opts = body === undefined ? {} : form
    ? { method: "POST", body }
    : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
  const res = await fetch("/api/" + path, opts);
  let data = null;
  try { data = await res.json(); } catch (e) { data = { error: res.statusText }; }
  if (!res.ok) throw new ApiError(res.status, (data && data.error) || res.statusText);
  return data;
}

function setStatus(id, msg, isError = false) {
  const n = $(id);
  n.textContent = msg || "";
  n.classList.toggle("error", !!isError);
}
function showError(id, e) {
  const prefix = e.status === 503 ? t("unavailable") : t("error");
  setStatus(id, `${prefix} ${e.message}`, true);
}

// white → deep blue; v in [0, 1]
function colour(v) {
  v = Math.max(0, Math.min(1, v));
  const a = [244, 248, 253], b = [8, 48, 107];
  const c = a.map((x, i) => Math.round(x + (b[i] - x) * v));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
// diverging blue ← white → red for signed values; v in [-1, 1]
function signed(v) {
  v = Math.max(-1, Math.min(1, v));
  const w = [247, 247, 247], pos = [178, 24, 43], neg = [33, 102, 172];
  const end = v >= 0 ? pos : neg, s = Math.abs(v);
  const c = w.map((x, i) => Math.round(x + (end[i] - x) * s));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

const tooltip = $("tooltip");
function tip(evt, text) {
  if (!text) { tooltip.hidden = true; return; }
  tooltip.textContent = text;
  tooltip.hidden = false;
  tooltip.style.left = Math.min(evt.clientX + 14, window.innerWidth - tooltip.offsetWidth - 8) + "px";
  tooltip.style.top = evt.clientY + 14 + "px";
}

// ------------------------------------------------------------------ heatmap: a CSS grid, tokens on both axes
// values: rows × cols; colour scaled to the largest value shown. onPick(i) for a row; onCursor(i,j) readout.
function heatmap(container, { values, rowLabels, colLabels, rowSpecial = [], colSpecial = [], onPick, readout, label }) {
  container.replaceChildren();
  const nr = values.length, nc = nr ? values[0].length : 0;
  let max = 0;
  for (const r of values) for (const v of r) if (v > max) max = v;
  const cell = Math.max(12, Math.min(30, Math.floor(640 / Math.max(nc, 1))));
  const g = el("div", { class: "heatmap", tabindex: "0", role: "grid", "aria-label": label || "heatmap",
    style: `grid-template-columns: auto repeat(${nc}, ${cell}px); --cell: ${cell}px` });
  g.append(el("div"));
  colLabels.forEach((c, j) => g.append(el("div", { class: "collab" + (colSpecial[j] ? " special" : ""), title: c }, c)));
  const cells = [];
  const say = (i, j) => `${rowLabels[i]} → ${colLabels[j]}: ${fmt(values[i][j], 4)}`;
  values.forEach((row, i) => {
    g.append(el("div", { class: "rowlab" + (rowSpecial[i] ? " special" : ""), "data-row": i,
      onclick: () => onPick && onPick(i) }, rowLabels[i]));
    cells.push(row.map((v, j) => {
      const c = el("div", { class: "cell", "data-i": i, "data-j": j, "data-v": v, style: `background:${colour(max ? v / max : 0)}` });
      c.addEventListener("mousemove", (e) => { tip(e, say(i, j)); });
      c.addEventListener("mouseleave", (e) => tip(e, null));
      c.addEventListener("click", () => { move(i, j); onPick && onPick(i); });
      g.append(c);
      return c;
    }));
  });
  let ci = 0, cj = 0;
  function move(i, j) {
    if (!nr || !nc) return;
    cells[ci][cj].classList.remove("cursor");
    ci = Math.max(0, Math.min(nr - 1, i)); cj = Math.max(0, Math.min(nc - 1, j));
    cells[ci][cj].classList.add("cursor");
    if (readout) readout.textContent = say(ci, cj);
  }
  g.addEventListener("keydown", (e) => {
    const d = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] }[e.key];
    if (d) { move(ci + d[0], cj + d[1]); e.preventDefault(); }
    else if (e.key === "Enter" && onPick) { onPick(ci); e.preventDefault(); }
  });
  g.addEventListener("focus", () => move(ci, cj));
  container.append(g);
  container.append(el("div", { class: "legend" }, "0", el("span", { class: "ramp" }), `${t("att.max")} ${fmt(max, 3)} · ${nr}×${nc} ${t("att.cells")}`));
  return g;
}

// keyboard for any tablist: arrows move, Enter/Space or focus selects (WAI-ARIA tabs pattern)
function tablist(root, onSelect) {
  const tabs = [...root.querySelectorAll("[role=tab]")];
  const select = (tab, focus = true) => {
    tabs.forEach((x) => { const on = x === tab; x.setAttribute("aria-selected", on); x.tabIndex = on ? 0 : -1; });
    if (focus) tab.focus();
    onSelect(tab);
  };
  tabs.forEach((tab, k) => {
    tab.addEventListener("click", () => select(tab, false));
    tab.addEventListener("keydown", (e) => {
      const d = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
      if (d) { select(tabs[(k + d + tabs.length) % tabs.length]); e.preventDefault(); }
      if (e.key === "Home") { select(tabs[0]); e.preventDefault(); }
      if (e.key === "End") { select(tabs[tabs.length - 1]); e.preventDefault(); }
    });
  });
  return select;
}

// ------------------------------------------------------------------ server info
let INFO = null;
async function loadInfo() {
  INFO = await api("health");
  $("model-info").textContent = `${INFO.model.split("/").pop()} · ${INFO.num_layers}×${INFO.num_heads}` +
    (INFO.index ? ` · index: ${INFO.index}` : "");
  const layer = $("att-layer"), head = $("att-head");
  layer.replaceChildren(...Array.from({ length: INFO.num_layers }, (_, i) => el("option", { value: i }, i)));
  head.replaceChildren(...Array.from({ length: INFO.num_heads }, (_, i) => el("option", { value: i }, i)));
}

// ============================================================== attention view
const att = { data: null, text: "", mode: "head", row: null, cache: {} };

function keepIdx(special) {
  const hide = $("att-hide-special").checked;
  return special.map((s, i) => (hide && s ? -1 : i)).filter((i) => i >= 0);
}
function sub(m, rows, cols) { return rows.map((i) => cols.map((j) => m[i][j])); }

async function fetchLayer(layer) {
  const key = att.text + "\u0000" + layer;
  if (!att.cache[key]) att.cache[key] = await api("attention", { text: att.text, layer });
  return att.cache[key];
}

async function runAttention() {
  const text = $("att-text").value;
  if (text !== att.text) { att.text = text; att.cache = {}; att.row = null; att.rollout = null; att.tour = null; }
  setStatus("att-status", t("att.loading"));
  try {
    if (att.mode === "head" || att.mode === "grid") {
      att.data = await fetchLayer(+$("att-layer").value);
      if (att.mode === "head") drawHead(); else drawGrid();
    } else if (att.mode === "rollout") {
      await drawRollout();
    } else if (att.mode === "tour") {
      await drawTour();
    }
    setStatus("att-status", "");
  } catch (e) { showError("att-status", e); }
}

function drawHead() {
  const d = att.data, h = +$("att-head").value;
  const idx = keepIdx(d.special);
  const labels = idx.map((i) => d.tokens[i]);
  const spec = idx.map((i) => d.special[i]);
  heatmap($("att-heatmap"), {
    values: sub(d.weights[h], idx, idx), rowLabels: labels, colLabels: labels, rowSpecial: spec, colSpecial: spec,
    readout: $("att-readout"), label: `layer ${d.layer} head ${h}`,
    onPick: (r) => { att.row = idx[r]; drawNeuron(); },
  });
  if (att.row != null) drawNeuron(); else $("att-neuron").replaceChildren(el("p", { class: "hint" }, t("att.neuron.pick")));
}

function drawGrid() {
  const d = att.data, idx = keepIdx(d.special), n = idx.length;
  const box = $("att-grid");
  box.replaceChildren();
  d.weights.forEach((w, h) => {
    const m = sub(w, idx, idx);
    let max = 0; for (const r of m) for (const v of r) max = Math.max(max, v);
    const cv = el("canvas", { width: n, height: n, tabindex: "0", role: "button", "data-head": h,
      "aria-label": `layer ${d.layer} head ${h}` });
    const ctx = cv.getContext("2d");
    m.forEach((r, i) => r.forEach((v, j) => { ctx.fillStyle = colour(max ? v / max : 0); ctx.fillRect(j, i, 1, 1); }));
    const pick = () => { $("att-head").value = h; selectMode(document.querySelector('#att-modes [data-mode="head"]')); };
    cv.addEventListener("click", pick);
    cv.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { pick(); e.preventDefault(); } });
    cv.addEventListener("mousemove", (e) => {
      const r = cv.getBoundingClientRect();
      const i = Math.floor((e.clientY - r.top) / r.height * n), j = Math.floor((e.clientX - r.left) / r.width * n);
      if (i >= 0 && j >= 0 && i < n && j < n) {
        const s = `H${h}: ${d.tokens[idx[i]]} → ${d.tokens[idx[j]]}: ${fmt(m[i][j], 4)}`;
        tip(e, s); $("att-grid-readout").textContent = s;
      }
    });
    cv.addEventListener("mouseleave", (e) => tip(e, null));
    box.append(el("figure", {}, cv, el("figcaption", {}, `${t("att.layer")} ${d.layer} · ${t("att.head")} ${h}`)));
  });
}

// neuron view, rollout and the tour come from qkv.explain (see app.js: drawNeuron / drawRollout / drawTour)
async function drawNeuron() { /* filled in with qkv.explain */ }
async function drawRollout() { /* filled in with qkv.explain */ }
async function drawTour() { /* filled in with qkv.explain */ }

const PANELS = { head: "att-head-panel", grid: "att-grid-panel", rollout: "att-rollout-panel", tour: "att-tour-panel" };
const selectMode = tablist($("att-modes"), (tab) => {
  att.mode = tab.dataset.mode;
  for (const [m, id] of Object.entries(PANELS)) $(id).hidden = m !== att.mode;
  $("att-head-label").hidden = att.mode !== "head";
  runAttention();
});

$("att-form").addEventListener("submit", (e) => { e.preventDefault(); runAttention(); });
$("att-layer").addEventListener("change", runAttention);
$("att-head").addEventListener("change", () => att.data && drawHead());
$("att-hide-special").addEventListener("change", runAttention);

// ============================================================== search view
const srch = { fields: null };

async function initSearch() {
  if (!INFO.features.search) { setStatus("search-status", `${t("unavailable")} ${INFO.index ? "qkv.search" : "no index (start with qkv serve --index DIR or --sample)"}`, true); return; }
  if (srch.fields) return;
  try {
    const f = await api("search/fields");
    srch.fields = f.fields;
    const box = $("search-filters");
    box.replaceChildren(...f.fields.map((fd) => {
      if (fd.kind === "number") {
        return el("fieldset", { class: "num" }, el("legend", {}, fd.name),
          el("label", {}, t("search.min") + " ", el("input", { type: "number", step: "any", "data-field": fd.name, "data-op": ">=", placeholder: fmt(fd.min, 2), style: "width:6rem" })),
          " ",
          el("label", {}, t("search.max") + " ", el("input", { type: "number", step: "any", "data-field": fd.name, "data-op": "<=", placeholder: fmt(fd.max, 2), style: "width:6rem" })));
      }
      if (fd.values) {
        return el("label", {}, fd.name + " ", el("select", { "data-field": fd.name, "data-op": "=" },
          el("option", { value: "" }, t("search.any")), ...fd.values.map((v) => el("option", { value: v }, v))));
      }
      return el("label", {}, fd.name + " ", el("input", { type: "text", "data-field": fd.name, "data-op": "contains", style: "width:8rem" }));
    }));
    $("search-filters-box").open = true;
  } catch (e) { showError("search-status", e); return; }
  if (!$("search-results").children.length) runSearch();
}

function readFilters() {
  return [...$("search-filters").querySelectorAll("[data-field]")].filter((n) => n.value !== "").map((n) => ({
    field: n.dataset.field, op: n.dataset.op, value: n.type === "number" ? Number(n.value) : n.value,
  }));
}

// the title with its matched words marked: keyword matches in yellow, the rest tinted by their share of the dense score
function markedTitle(title, hl) {
  if (!hl || !hl.length) return [title];
  const maxShare = Math.max(...hl.map((h) => h.share), 1e-9);
  const parts = [];
  let at = 0;
  for (const h of hl) {
    if (h.start < at) continue;
    parts.push(title.slice(at, h.start));
    const word = title.slice(h.start, h.end);
    const tipText = `${word}: ${t("search.score")} share ${fmt(h.share, 4)}` + (h.answers ? ` ← "${h.answers}"` : "") +
      (h.keyword.length ? ` · BM25: ${h.keyword.join(", ")}` : "");
    if (h.keyword.length) parts.push(el("mark", { title: tipText }, word));
    else if (h.share >= 0.6 * maxShare) parts.push(el("mark", { class: "dense", title: tipText, style: `opacity:${0.45 + 0.55 * h.share / maxShare}` }, word));
    else parts.push(el("span", { title: tipText }, word));
    at = h.end;
  }
  parts.push(title.slice(at));
  return parts;
}

function matchGrid(box, x) {
  const e = x.explanation;
  const qs = e.query_tokens.map((_, i) => i), ts = e.title_tokens.map((_, j) => j);
  box.replaceChildren();
  const note = el("p", { class: "hint" },
    `cos = ${fmt(e.cosine, 4)}; Σ grid = ${fmt(e.parts_sum, 4)}${e.exact ? " (exact parts)" : ""}` +
    (e.keyword_terms.length ? ` · BM25: ${e.keyword_terms.map((k) => `${k.term} ${fmt(k.bm25, 2)}`).join(", ")}` : ""));
  box.append(note);
  const hm = el("div", { class: "heatmap-wrap" });
  box.append(hm);
  heatmap(hm, { values: qs.map((i) => ts.map((j) => e.grid[i][j])), rowLabels: e.query_tokens, colLabels: e.title_tokens,
    rowSpecial: e.query_tokens.map((s) => /^\[.*\]$/.test(s)), colSpecial: e.title_tokens.map((s) => /^\[.*\]$/.test(s)),
    readout: null, label: `match grid ${x.id}` });
}

async function runSearch() {
  if (!INFO.features.search) return initSearch();
  const body = { query: $("search-q").value, mode: $("search-mode").value, k: Number($("search-k").value) || 10,
                 filters: readFilters(), explain: true };
  setStatus("search-status", t("working"));
  const t0 = performance.now();
  try {
    const r = await api("search", body);
    const rt = performance.now() - t0;
    const list = $("search-results");
    list.replaceChildren();
    if (!r.results.length) list.append(el("p", {}, t("search.none")));
    r.results.forEach((x) => {
      const grid = el("div", { class: "match", hidden: true });
      const btn = el("button", { type: "button", "aria-expanded": "false" }, t("search.why"));
      btn.addEventListener("click", () => {
        const open = grid.hidden;
        if (open && !grid.firstChild) matchGrid(grid, x);
        grid.hidden = !open;
        btn.setAttribute("aria-expanded", String(open));
        btn.textContent = open ? t("search.hide") : t("search.why");
      });
      const f = Object.entries(x.fields).filter(([, v]) => v != null).map(([k, v]) => `${k}: ${v}`).join(" · ");
      const sc = [`${t("search.score")} ${fmt(x.score, 4)}`,
                  x.dense_score != null ? `cos ${fmt(x.dense_score, 3)}${x.dense_rank ? " #" + x.dense_rank : ""}` : null,
                  x.keyword_score != null ? `BM25 ${fmt(x.keyword_score, 2)} #${x.keyword_rank}` : null].filter(Boolean).join(" · ");
      list.append(el("li", { "data-id": x.id },
        el("div", { class: "title" }, ...markedTitle(x.title, x.highlights)),
        el("div", { class: "meta" }, `${x.id} · ${f}`),
        el("div", { class: "meta" }, sc, " ", x.explanation ? btn : null),
        grid));
    });
    const tm = Object.entries(r.timings_ms).map(([k, v]) => `${k} ${fmt(v, 1)}`).join(", ");
    setStatus("search-status", `${r.count} · ${t("search.latency")} ${fmt(r.server_ms, 1)} ms (${tm}) · ${t("search.roundtrip")} ${fmt(rt, 1)} ms`);
    $("search-status").dataset.latency = r.server_ms;
  } catch (e) { showError("search-status", e); }
}
$("search-form").addEventListener("submit", (e) => { e.preventDefault(); runSearch(); });

// ============================================================== summaries view
$("sum-budget").addEventListener("input", () => { $("sum-budget-out").textContent = $("sum-budget").value; });

function renderSummary(r, reviews) {
  const out = $("sum-out");
  out.replaceChildren();
  out.append(el("div", { class: "stats" },
    el("div", {}, el("b", { id: "sum-before" }, r.tokens_before), t("sum.input")),
    el("div", {}, el("b", { id: "sum-after" }, r.tokens_after), `${t("sum.used")} (≤ ${r.budget})`),
    el("div", {}, el("b", { id: "sum-saved" }, `${r.tokens_saved} (${fmt(r.saving, 1)}%)`), t("sum.saved")),
    el("div", {}, el("b", {}, `${r.n_reviews} / ${r.n_sentences}`), t("sum.counts")),
    el("div", {}, el("b", {}, r.tokenizer), t("sum.tokenizer"))));
  out.append(el("div", { class: "summary", id: "sum-text", lang: "" }, r.text));
  const maxScore = Math.max(...r.sentences.map((s) => s.score), 1e-9);
  out.append(el("h3", {}, t("sum.chosen")));
  out.append(el("table", { class: "data", id: "sum-table" },
    el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, t("sum.sentence")), el("th", {}, t("sum.score")), el("th", {}, t("sum.tokens")), el("th", {}, t("sum.review")))),
    el("tbody", {}, ...r.sentences.map((s) => el("tr", {},
      el("td", {}, s.rank), el("td", {}, s.text),
      el("td", {}, el("span", { class: "conf" }, el("i", { style: `width:${100 * s.score / maxScore}%` })), fmt(s.score, 4)),
      el("td", {}, s.tokens), el("td", {}, `${s.review + 1}${s.rating != null ? " ★" + s.rating : ""}`))))));
  if (r.notes && r.notes.length) out.append(el("p", { class: "hint" }, r.notes.join(" ")));
}

async function runSummary() {
  if (!INFO.features.summaries) { setStatus("sum-status", `${t("unavailable")} qkv.summarize`, true); return; }
  setStatus("sum-status", t("working"));
  try {
    const budget = Number($("sum-budget").value);
    const file = $("sum-file").files[0];
    let r, reviews;
    if (file) {
      const fd = new FormData();
      fd.append("file", file);
      fd.append("budget", String(budget));
      r = await api("summarize/upload", fd, { form: true });
      reviews = r.reviews;
    } else {
      reviews = $("sum-reviews").value.split(/\n/).map((x) => x.trim()).filter(Boolean);
      r = await api("summarize", { reviews, budget });
    }
    renderSummary(r, reviews);
    setStatus("sum-status", "");
  } catch (e) { showError("sum-status", e); }
}
$("sum-form").addEventListener("submit", (e) => { e.preventDefault(); runSummary(); });

// ============================================================== views, language, start
const VIEWS = ["attention", "search", "attributes", "summaries"];
const selectView = tablist($("tabs"), (tab) => {
  const v = tab.id.replace("tab-", "");
  VIEWS.forEach((x) => { $("view-" + x).hidden = x !== v; });
  history.replaceState(null, "", "#" + v);
  if (VIEW_INIT[v]) VIEW_INIT[v]();
});
const VIEW_INIT = { search: () => initSearch() };

$("lang").addEventListener("click", () => {
  lang = lang === "zh" ? "en" : "zh";
  localStorage.setItem("qkv.lang", lang);
  applyLang();
});

(async function start() {
  applyLang();
  try { await loadInfo(); } catch (e) { showError("att-status", e); return; }
  const v = location.hash.replace("#", "");
  if (VIEWS.includes(v) && v !== "attention") selectView($("tab-" + v), false);
  runAttention();
})();
