// qkv web page: talks only to the JSON API under /api/. No libraries, no network beyond this server.
// One file past 500 lines on purpose: the page ships with no build step or bundler, so its parts
// (labels in two languages, the API client, one section per view) live here, marked by rulers.
"use strict";

// ------------------------------------------------------------------ labels, English / 中文
const I18N = {
  en: {
    "tab.attention": "Attention", "tab.search": "Search", "tab.attributes": "Attributes", "tab.summaries": "Summaries",
    "att.text": "Text", "att.show": "Show attention", "att.layer": "Layer", "att.head": "Head",
    "att.hide": "Hide special tokens", "att.mode.head": "One head", "att.mode.grid": "All heads of a layer",
    "att.mode.rollout": "Rollout", "att.mode.tour": "Tour: five steps",
    "att.hint": "Rows: the token that looks (query). Columns: the tokens it looks at (keys). Hover or use the arrow keys for values; click a row token (or press Enter) for the neuron view.",
    "att.rollout.hint": "Attention rollout: each layer's attention (heads averaged, plus the residual) multiplied from the first layer up to the chosen one, so each row shows which input tokens that token's representation draws on after that layer.",
    "att.neuron.pick": "Click a row token (or press Enter on a cell) to see how its query meets every key.",
    "att.loading": "Running the model…", "att.kind": "Map", "att.kind.attention": "attention weights", "att.kind.norm": "norm-weighted ‖α·f(x)‖",
    "att.level": "Units", "att.level.token": "tokens", "att.level.word": "words", "att.hidden": "Share of each row's weight that went to the hidden special tokens, on average:",
    "att.neuron": "Neuron view", "att.key": "key", "att.neuron.hint": "q × k: the query's and each key's numbers multiplied one by one (red positive, blue negative); their sum is q·k, divided by √d and put through softmax it gives the weights of the heatmap's row.", "att.cells": "cells", "att.max": "max",
    "search.query": "Query", "search.mode": "Mode", "search.hybrid": "hybrid", "search.dense": "dense",
    "search.keyword": "keyword", "search.k": "Results", "search.go": "Search", "search.filters": "Filters",
    "search.why": "Why this match?", "search.hide": "Hide match grid", "search.latency": "server", "search.roundtrip": "round trip",
    "search.none": "No results.", "search.as": "Searched as:", "search.corrected": "Showing results for:", "search.astyped": "Search instead for", "search.adapted": "Meaning side fitted to your search terms (query adapter).", "search.any": "any", "search.min": "min", "search.max": "max", "search.score": "score",
    "search.words": "translated words", "search.also": "also", "search.source": "source", "search.weight": "weight",
    "search.weight.hint": "its keyword group is searched at this weight: the less sure the source, the less it counts",
    "src.glossary": "seller's glossary", "src.units": "units", "src.trade glossary": "trade glossary", "src.dictionary": "dictionary",
    "src.ECDICT": "dictionary (ECDICT, English–Chinese, reversed)",
    "src.sub-words": "dictionary, by its parts", "src.as typed": "as typed", "src.untranslated": "no translation found",
    "attr.titles": "Product titles, one per line", "attr.go": "Extract attributes", "attr.title": "Title",
    "attr.attribute": "Attribute", "attr.value": "Value", "attr.confidence": "Confidence", "attr.none": "No attributes found.", "attr.known": "Attributes this model knows", "attr.nomodel": "no attribute model (start with qkv serve --attributes FILE or --sample)",
    "attr.demo": "A demo model: trained on {n} invented sample titles in English and Chinese, it knows the brand, colour, size and material of products like the sample catalog's. For your own catalog, label some of your titles and train your own model:",
    "attrname.brand": "brand", "attrname.colour": "colour", "attrname.size": "size", "attrname.material": "material",
    "sum.reviews": "Reviews, one per line (or upload a file)", "sum.file": "File", "sum.budget": "Budget (tokens)",
    "sum.go": "Summarize", "sum.chosen": "Chosen sentences", "sum.score": "score", "sum.tokens": "tokens",
    "sum.input": "input tokens", "sum.sentence": "Sentence", "sum.review": "Review", "sum.counts": "reviews / sentences", "sum.tokenizer": "tokenizer", "sum.tok.model": "the encoder's own", "sum.order": "order", "sum.order.original": "as in the reviews", "sum.order.score": "by score", "sum.used": "summary tokens", "sum.saved": "tokens saved",
    "sum.points": "What buyers say", "sum.praise": "Praise", "sum.complaints": "Complaints", "sum.nopoint": "No point is made by two or more reviews.",
    "sum.nreviews": "{n} of {all} reviews", "sum.inreviews": "in reviews {list}", "sum.model": "read by",
    "sum.from.file": "Summary of the file {name}.", "sum.from.box": "Summary of the reviews in the box.",
    "sum.column": "Which column holds the reviews?", "sum.column.ask": "The file has no column named like reviews (review, text, 评论内容, 评论, …): choose it below.",
    "unavailable": "Not available on this server:", "error": "Error:", "working": "Working…",
    "busy": "The server is busy, retrying in", "apikey": "This server needs an API key:",
    "search.noindex": "no index (start with qkv serve --index DIR or --sample)",
    "match.note": "cosine {cos} = matching words {words} (the grid: query words × title words) + the model's query:/passage: prefixes {prefix} + special tokens and markers {special}",
    "heatmap.keys": "arrow keys move, Enter opens the row",
    "search.weak": "far from the query", "search.weak.hint": "Its similarity to the query is below the floor measured for this model: it is only the least far of the catalog's listings.",
    "search.nothing": "Nothing in the catalog is close to this query (with these filters): the results below are only the least far.", "search.share": "share of the score",
    "err.query.empty": "Type what you are looking for first.", "err.empty": "is empty: type or paste something first",
    "err.long": "is too long: shorten it", "err.range": "is out of range", "err.invalid": "is not valid",
    "err.tokens": "The text is too long for the model: {n} tokens, and it reads at most {limit}. Shorten it.",
    "field.title": "title", "field.brand": "brand", "field.category": "category", "field.colour": "colour", "field.size": "size",
    "field.price": "price", "field.rating": "rating", "field.language": "language",
  },
  zh: {
    "tab.attention": "注意力", "tab.search": "搜索", "tab.attributes": "属性", "tab.summaries": "摘要",
    "att.text": "文本", "att.show": "显示注意力", "att.layer": "层", "att.head": "头",
    "att.hide": "隐藏特殊词元", "att.mode.head": "单个头", "att.mode.grid": "本层所有头",
    "att.mode.rollout": "注意力累积 (rollout)", "att.mode.tour": "导览：五个步骤",
    "att.hint": "行：发出注意的词元（查询）。列：被注意的词元（键）。悬停或用方向键查看数值；点击行上的词元（或按回车）查看神经元视图。",
    "att.rollout.hint": "注意力累积：把从第一层到所选层的注意力（各头平均，加上残差）依次相乘，每一行显示该词元在这一层之后的表示依赖哪些输入词元。",
    "att.neuron.pick": "点击行上的词元（或在单元格上按回车），查看它的查询向量如何与每个键相遇。",
    "att.loading": "正在运行模型…", "att.kind": "图", "att.kind.attention": "注意力权重", "att.kind.norm": "范数加权 ‖α·f(x)‖",
    "att.level": "单位", "att.level.token": "词元", "att.level.word": "词", "att.hidden": "每行平均分给被隐藏特殊词元的权重比例：",
    "att.neuron": "神经元视图", "att.key": "键", "att.neuron.hint": "q × k：查询向量与每个键向量逐个数相乘（红为正，蓝为负）；其和为 q·k，除以 √d 再经 softmax 即得热图这一行的权重。", "att.cells": "个单元格", "att.max": "最大值",
    "search.query": "查询", "search.mode": "模式", "search.hybrid": "混合", "search.dense": "向量",
    "search.keyword": "关键词", "search.k": "结果数", "search.go": "搜索", "search.filters": "筛选",
    "search.why": "为什么匹配？", "search.hide": "隐藏匹配矩阵", "search.latency": "服务器", "search.roundtrip": "往返",
    "search.none": "没有结果。", "search.as": "检索为：", "search.corrected": "已按此拼写检索：", "search.astyped": "仍按原文检索", "search.adapted": "语义检索已按您的搜索词调整（查询适配器）。", "search.any": "任意", "search.min": "最小", "search.max": "最大", "search.score": "得分",
    "search.words": "逐词翻译", "search.also": "也搜", "search.source": "来源", "search.weight": "权重",
    "search.weight.hint": "它的关键词组按此权重检索：来源越不可靠，分量越轻",
    "src.glossary": "卖家词汇表", "src.units": "单位", "src.trade glossary": "行业词汇表", "src.dictionary": "词典",
    "src.ECDICT": "词典（ECDICT 英汉词典反查）",
    "src.sub-words": "词典（按组成部分）", "src.as typed": "原样", "src.untranslated": "未找到翻译",
    "attr.titles": "商品标题，每行一个", "attr.go": "提取属性", "attr.title": "标题",
    "attr.attribute": "属性", "attr.value": "值", "attr.confidence": "置信度", "attr.none": "没有找到属性。", "attr.known": "此模型认识的属性", "attr.nomodel": "没有属性模型（用 qkv serve --attributes 文件 或 --sample 启动）",
    "attr.demo": "这是演示模型：用 {n} 条虚构的中英文示例标题训练，认识与示例商品类似的商品的品牌、颜色、尺码和材质。要处理自己的商品，请标注一些自己的标题，训练自己的模型：",
    "attrname.brand": "品牌", "attrname.colour": "颜色", "attrname.size": "尺码", "attrname.material": "材质",
    "sum.reviews": "评论，每行一条（或上传文件）", "sum.file": "文件", "sum.budget": "预算（词元）",
    "sum.go": "生成摘要", "sum.chosen": "选中的句子", "sum.score": "得分", "sum.tokens": "词元",
    "sum.input": "输入词元", "sum.sentence": "句子", "sum.review": "评论", "sum.counts": "评论 / 句子", "sum.tokenizer": "分词器", "sum.tok.model": "编码器自己的", "sum.order": "顺序", "sum.order.original": "按评论原顺序", "sum.order.score": "按得分", "sum.used": "摘要词元", "sum.saved": "节省的词元",
    "sum.points": "买家在说什么", "sum.praise": "好评", "sum.complaints": "差评", "sum.nopoint": "没有两条以上评论共同提到的点。",
    "sum.nreviews": "{all} 条中 {n} 条", "sum.inreviews": "见评论 {list}", "sum.model": "模型",
    "sum.from.file": "文件 {name} 的摘要。", "sum.from.box": "文本框中评论的摘要。",
    "sum.column": "哪一列是评论？", "sum.column.ask": "文件里没有名为评论的列（评论内容、评论、review、text 等）：请在下面选择。",
    "unavailable": "此服务器不可用：", "error": "错误：", "working": "处理中…",
    "busy": "服务器繁忙，重试于", "apikey": "此服务器需要 API 密钥：",
    "search.noindex": "没有索引（用 qkv serve --index 目录 或 --sample 启动）",
    "match.note": "余弦 {cos} = 词与词的匹配 {words}（矩阵：查询词 × 标题词）+ 模型的 query:/passage: 前缀 {prefix} + 特殊词元与标记 {special}",
    "heatmap.keys": "方向键移动，回车打开该行",
    "search.weak": "与查询不相近", "search.weak.hint": "它与查询的相似度低于为此模型测得的下限：只是目录中最不远的一个。",
    "search.nothing": "目录中没有与此查询（在这些筛选条件下）相近的商品：下面的结果只是最不远的。", "search.share": "占得分的比例",
    "err.query.empty": "请先输入要找的商品。", "err.empty": "是空的：请先输入或粘贴内容", "err.long": "太长了：请缩短",
    "err.range": "超出范围", "err.invalid": "无效",
    "err.tokens": "文本太长：有 {n} 个词元，模型最多读 {limit} 个。请缩短。",
    "field.title": "标题", "field.brand": "品牌", "field.category": "类别", "field.colour": "颜色", "field.size": "尺码",
    "field.price": "价格", "field.rating": "评分", "field.language": "语言",
    "val.black": "黑色", "val.white": "白色", "val.navy": "藏青色", "val.red": "红色", "val.grey": "灰色", "val.olive": "橄榄绿",
    "val.blue": "蓝色", "val.pink": "粉色", "val.beige": "米色", "val.green": "绿色",
    "val.shoes": "鞋", "val.apparel": "服装", "val.kitchen": "厨房", "val.electronics": "电子产品", "val.home": "家居",
    "val.outdoor": "户外", "val.beauty": "美妆", "val.toys": "玩具", "val.en": "英文", "val.zh": "中文", "val.one size": "均码", "val.full size": "全尺寸",
  },
};
let lang = localStorage.getItem("qkv.lang") || ((navigator.language || "en").startsWith("zh") ? "zh" : "en");
const t = (key) => (I18N[lang] && I18N[lang][key]) || I18N.en[key] || key;

function applyLang() {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  document.querySelectorAll("[data-i18n]").forEach((n) => {
    const v = t(n.dataset.i18n);
    if (v !== n.dataset.i18n) n.textContent = v; else if (n.dataset.raw != null) n.textContent = n.dataset.raw;
  });
  document.querySelectorAll("[data-i18n-title]").forEach((n) => { n.title = t(n.dataset.i18nTitle); });
  document.getElementById("lang").textContent = lang === "zh" ? "English" : "中文";
  for (const id of Object.keys(STATUS)) drawStatus(id);
}
// a text in the page's language, marked so a change of language redraws it
const L = (key, tag = "span") => el(tag, { "data-i18n": key }, t(key));
// a name from the data (an attribute, a catalog field, a value) in the page's language when the
// labels have it ("colour" → 颜色, "black" → 黑色), else as the data names it
const named = (kind, name) => { const k = `${kind}.${name}`; const v = t(k); return v === k ? name : v; };
const N = (kind, name, tag = "span", attrs = {}) => el(tag, { ...attrs, "data-i18n": `${kind}.${name}`, "data-raw": name }, named(kind, name));

// An API error in the page's terms: a request the server refused field by field (pydantic's
// details) names the page's own box and says what to do; a text over the model's window says how
// long it may be. Anything else is the server's own message.
const FIELD_LABEL = { query: "search.query", text: "att.text", titles: "attr.titles", reviews: "sum.reviews",
                      budget: "sum.budget", k: "search.k", file: "sum.file" };
function explainError(e) {
  if (e.details && e.details.length) {
    const said = e.details.map((d) => {
      const field = [...(d.loc || [])].reverse().find((x) => FIELD_LABEL[x]);
      if (!field) return null;
      const what = /too_short|missing/.test(d.type) ? "err.empty" : /too_long/.test(d.type) ? "err.long"
        : /greater|less/.test(d.type) ? "err.range" : "err.invalid";
      return `${t(FIELD_LABEL[field])} ${t(what)}`;
    });
    if (said.every(Boolean)) return said.join("; ");
  }
  const m = /has (\d+) tokens, more than .*limit of (\d+)/.exec(e.message || "");
  if (m) return t("err.tokens").replace("{n}", m[1]).replace("{limit}", m[2]);
  return e.message;
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

class ApiError extends Error { constructor(status, message, data) { super(message); this.status = status; this.details = data && data.details; this.data = data || {}; } }

// A busy server answers 429 (queue full) or 503 (deadline) with Retry-After: say so and try again
// a few times rather than spinning. A server started with an API key answers 401: ask for it once.
const RETRIES = 4;
function busyNote(msg) {
  let n = $("busy");
  if (!n) { n = el("div", { id: "busy", role: "status", "aria-live": "polite" }); document.body.append(n); }
  n.textContent = msg || "";
  n.hidden = !msg;
}
async function api(path, body, { form = false, signal = undefined } = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = form || body === undefined ? {} : { "content-type": "application/json" };
    const key = sessionStorage.getItem("qkv.key");
    if (key) headers.authorization = "Bearer " + key;
    const opts = body === undefined ? { headers, signal } : { method: "POST", headers, signal, body: form ? body : JSON.stringify(body) };
    const res = await fetch("/api/" + path, opts);
    let data = null;
    try { data = await res.json(); } catch (e) { data = { error: res.statusText }; }
    const wait = Number(res.headers.get("retry-after"));
    if ((res.status === 429 || res.status === 503) && wait > 0 && attempt < RETRIES) {
      busyNote(`${t("busy")} ${Math.min(wait, 10)} s…`);
      await new Promise((ok) => setTimeout(ok, 1000 * Math.min(wait, 10)));
      if (signal && signal.aborted) throw new DOMException("replaced by a newer request", "AbortError");
      continue;
    }
    busyNote("");
    if (res.status === 401 && attempt === 0) {
      const given = window.prompt(t("apikey"));
      if (given) { sessionStorage.setItem("qkv.key", given.trim()); continue; }
    }
    if (!res.ok) throw new ApiError(res.status, (data && data.error) || res.statusText, data);
    return data;
  }
}

// One per view: each new request aborts the one it replaces, and an answer (or error) that is not
// the latest request's is dropped, so a slow older answer never draws over a newer one.
function latest() {
  let gen = 0, ctl = null;
  return {
    start() { if (ctl) ctl.abort(); ctl = new AbortController(); const g = ++gen; return { signal: ctl.signal, current: () => g === gen }; },
  };
}

// msg: a string, or a function giving it in the page's current language (redrawn on a change)
const STATUS = {};
function setStatus(id, msg, isError = false) {
  STATUS[id] = { msg, isError };
  drawStatus(id);
}
function drawStatus(id) {
  const { msg, isError } = STATUS[id], n = $(id);
  n.textContent = (typeof msg === "function" ? msg() : msg) || "";
  n.classList.toggle("error", !!isError);
}
function showError(id, e) {
  setStatus(id, () => `${e.status === 503 ? t("unavailable") : t("error")} ${explainError(e)}`, true);
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
  const g = el("div", { class: "heatmap", tabindex: "0", role: "group", "data-map": label || "", "aria-label": `${label || "heatmap"} (${t("heatmap.keys")})`,
    style: `grid-template-columns: auto repeat(${nc}, ${cell}px); --cell: ${cell}px` });
  g.append(el("div"));
  colLabels.forEach((c, j) => g.append(el("div", { class: "collab" + (colSpecial[j] ? " special" : "") + (/[\u3400-\u9fff]/.test(c) ? " han" : ""), title: c }, c)));
  const cells = [];
  const say = (i, j) => `${rowLabels[i]} → ${colLabels[j]}: ${fmt(values[i][j], 4)}`;
  values.forEach((row, i) => {
    g.append(el("div", { class: "rowlab" + (rowSpecial[i] ? " special" : ""), "data-row": i,
      onclick: () => { move(i, cj); onPick && onPick(i); } }, rowLabels[i]));
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
  container.append(el("div", { class: "legend" }, "0", el("span", { class: "ramp" }), L("att.max"), ` ${fmt(max, 3)} · ${nr}×${nc} `, L("att.cells")));
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
  $("model-info").textContent = INFO.model.split("/").pop();
  $("model-info").title = `${INFO.model}: ${INFO.num_layers} layers × ${INFO.num_heads} heads` + (INFO.index ? ` · index: ${INFO.index}` : "");
  const layer = $("att-layer"), head = $("att-head");
  layer.replaceChildren(...Array.from({ length: INFO.num_layers }, (_, i) => el("option", { value: i }, i)));
  head.replaceChildren(...Array.from({ length: INFO.num_heads }, (_, i) => el("option", { value: i }, i)));
}

// ============================================================== attention view
// gen numbers the attention requests: a change of layer, head or mode while an earlier request is
// still in flight must not let that earlier (slower) answer draw over the newer one
const att = { text: "", mode: "head", row: null, cache: {}, current: null, gen: 0 };
const stale = (gen) => gen !== att.gen;

async function cached(path, body) {
  const key = path + JSON.stringify(body);
  if (!att.cache[key]) att.cache[key] = await api(path, body);
  return att.cache[key];
}
const attBase = () => ({ text: att.text, level: $("att-level").value, hide_special: $("att-hide-special").checked });

// map row r of a heatmap back to a token position (for the neuron view)
function rowPositions(d, level, hide) {
  if (level === "word") return d.words.filter((w) => !(hide && w.special)).map((w) => w.tokens[0]);
  return d.tokens.map((_, i) => i).filter((i) => !(hide && d.special[i]));
}
// token-level maps show [UNK] tokens with the characters they stand for (labels from the API)
function shownLabels(d, map, pos, level) {
  return level === "word" || !d.labels ? map.rows : pos.map((i) => d.labels[i]);
}
function specialOf(d, level, hide) {
  if (level === "word") return d.words.filter((w) => !(hide && w.special)).map((w) => w.special);
  return d.special.filter((s) => !(hide && s));
}

async function runAttention() {
  const text = $("att-text").value;
  if (text !== att.text) { att.text = text; att.cache = {}; att.row = null; }
  const gen = ++att.gen;
  setStatus("att-status", () => t("att.loading"));
  try {
    if (att.mode === "head") await drawHead(gen);
    else if (att.mode === "grid") await drawGrid(gen);
    else if (att.mode === "rollout") await drawRollout(gen);
    else if (att.mode === "tour") await drawTour(gen);
    if (!stale(gen)) setStatus("att-status", "");
  } catch (e) {
    if (stale(gen)) return;
    // no map of an earlier text left under the error
    for (const id of ["att-heatmap", "att-readout", "att-neuron", "att-grid", "att-grid-readout", "att-rollout", "att-rollout-readout", "att-tour"]) $(id).replaceChildren();
    att.current = null;
    showError("att-status", e);
  }
}

// the server's map title ("attention · layer 0 head 0") in the page's language
function mapTitle(map) {
  if (lang === "en") return map.title;
  const what = { attention: t("att.kind.attention"), norm: t("att.kind.norm"), rollout: t("att.mode.rollout") }[map.kind] || map.kind;
  const where = [map.layer != null ? `${t("att.layer")} ${map.layer}` : null, map.head != null ? `${t("att.head")} ${map.head}` : null];
  return [what, ...where].filter(Boolean).join(" · ");
}

function hiddenNote(map) {
  if (!map.hidden_share) return null;
  const mean = map.hidden_share.reduce((a, b) => a + b, 0) / map.hidden_share.length;
  return el("p", { class: "hint" }, L("att.hidden"), ` ${fmt(100 * mean, 1)}%`);
}

async function drawHead(gen) {
  const layer = +$("att-layer").value, head = +$("att-head").value;
  const base = attBase();
  const d = await cached("attention", { ...base, layer, head, kind: $("att-kind").value });
  if (stale(gen)) return;
  const map = d.maps[0];
  const pos = rowPositions(d, base.level, base.hide_special), spec = specialOf(d, base.level, base.hide_special);
  att.current = { d, layer, head, pos };
  const box = $("att-heatmap");
  const lab = shownLabels(d, map, pos, base.level);
  const g = heatmap(box, {
    values: map.values, rowLabels: lab, colLabels: lab, rowSpecial: spec, colSpecial: spec,
    readout: $("att-readout"), label: `layer ${layer} head ${head}`,
    onPick: (r) => { att.row = pos[r]; drawNeuron(); },
  });
  if (att.focusMap) { att.focusMap = false; g.focus(); }
  box.prepend(el("h3", { class: "maptitle" }, mapTitle(map)));
  const note = hiddenNote(map); if (note) box.append(note);
  if (att.row != null) await drawNeuron(); else $("att-neuron").replaceChildren(L("att.neuron.pick", "p"));
}

async function drawNeuron() {
  const c = att.current, row = att.row; if (!c || row == null) return;
  const box = $("att-neuron");
  try {
    const n = await cached("neuron", { text: att.text, layer: c.layer, head: c.head, query: row });
    if (att.current !== c || att.row !== row) return;  // another head or token was picked meanwhile
    let maxAbs = 1e-9;
    for (const v of [n.q, ...n.k, ...n.qk]) for (const x of v) maxAbs = Math.max(maxAbs, Math.abs(x));
    let maxQk = 1e-9; for (const v of n.qk) for (const x of v) maxQk = Math.max(maxQk, Math.abs(x));
    const strip = (v, m) => el("span", { class: "vec" }, ...v.map((x) => el("span", { style: `background:${signed(x / m)}`, title: fmt(x, 4) })));
    const wmax = Math.max(...n.weights);
    const labels = c.d.labels || n.tokens;
    const rows = n.tokens.map((tok, j) => el("tr", { class: j === n.query ? "self" : null },
      el("td", { class: c.d.special[j] ? "special" : null }, labels[j]),
      el("td", {}, strip(n.k[j], maxAbs)),
      el("td", {}, strip(n.qk[j], maxQk)),
      el("td", { class: "num" }, fmt(n.scores[j], 2)),
      el("td", { class: "num" }, fmt(n.scaled_scores[j], 2)),
      el("td", { class: "num" }, el("span", { class: "bar-fill", style: `width:${Math.round(60 * n.weights[j] / wmax)}px` }), " ", fmt(n.weights[j], 3))));
    box.replaceChildren(
      el("h3", {}, `${t("att.neuron")} · ${t("att.layer")} ${n.layer} · ${t("att.head")} ${n.head} · “${labels[n.query]}”`),
      el("p", {}, "q = ", strip(n.q, maxAbs), ` (${n.q.length})`),
      el("table", { id: "neuron-table" },
        el("thead", {}, el("tr", {}, el("th", {}, t("att.key")), el("th", {}, "k"), el("th", {}, "q × k"), el("th", {}, "q·k"), el("th", {}, "/√d"), el("th", {}, "softmax"))),
        el("tbody", {}, ...rows)),
      el("p", { class: "hint" }, t("att.neuron.hint")));
    document.querySelectorAll("#att-heatmap .rowlab").forEach((x, r) => x.classList.toggle("active", c.pos[r] === att.row));
  } catch (e) { showError("att-status", e); }
}

async function drawGrid(gen) {
  const layer = +$("att-layer").value, base = attBase();
  const d = await cached("attention", { ...base, layer, grid: true, kind: $("att-kind").value });
  if (stale(gen)) return;
  const box = $("att-grid");
  box.replaceChildren();
  const lab = shownLabels(d, d.maps[0], rowPositions(d, base.level, base.hide_special), base.level);
  d.maps.forEach((map, h) => {
    const m = map.values, n = m.length;
    let max = 0; for (const r of m) for (const v of r) max = Math.max(max, v);
    const cv = el("canvas", { width: n, height: n, tabindex: "0", role: "button", "data-head": h, "aria-label": map.title });
    const ctx = cv.getContext("2d");
    m.forEach((r, i) => r.forEach((v, j) => { ctx.fillStyle = colour(max ? v / max : 0); ctx.fillRect(j, i, 1, 1); }));
    // the head opened by keyboard keeps the keyboard: its heatmap takes the focus once drawn
    const pick = (byKey = false) => { att.focusMap = byKey; $("att-head").value = h; selectMode(document.querySelector('#att-modes [data-mode="head"]'), false); };
    cv.addEventListener("click", () => pick(false));
    cv.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { pick(true); e.preventDefault(); } });
    cv.addEventListener("mousemove", (e) => {
      const r = cv.getBoundingClientRect();
      const i = Math.floor((e.clientY - r.top) / r.height * n), j = Math.floor((e.clientX - r.left) / r.width * n);
      if (i >= 0 && j >= 0 && i < n && j < n) {
        const s = `H${h}: ${lab[i]} → ${lab[j]}: ${fmt(m[i][j], 4)}`;
        tip(e, s); $("att-grid-readout").textContent = s;
      }
    });
    cv.addEventListener("mouseleave", (e) => tip(e, null));
    box.append(el("figure", {}, cv, el("figcaption", {}, `${t("att.layer")} ${layer} · ${t("att.head")} ${h}`)));
  });
}

async function drawRollout(gen) {
  const base = attBase();
  const d = await cached("rollout", { ...base, layer: +$("att-layer").value });
  if (stale(gen)) return;
  const map = d.maps[0], spec = specialOf(d, base.level, base.hide_special);
  const lab = shownLabels(d, map, rowPositions(d, base.level, base.hide_special), base.level);
  const box = $("att-rollout");
  heatmap(box, { values: map.values, rowLabels: lab, colLabels: lab, rowSpecial: spec, colSpecial: spec,
    readout: $("att-rollout-readout"), label: map.title });
  box.prepend(el("h3", { class: "maptitle" }, mapTitle(map)));
  const note = hiddenNote(map); if (note) box.append(note);
}

// a small numeric table of a tour array: token rows; square maps get token columns, wide ones their first columns
function arrayTable(name, a, labels) {
  const n = a.length, w = n ? a[0].length : 0;
  const square = w === n;
  const cols = square ? w : Math.min(w, 8);
  let maxAbs = 1e-9; for (const r of a) for (let j = 0; j < cols; j++) maxAbs = Math.max(maxAbs, Math.abs(r[j]));
  const isWeights = /attn\.weights/.test(name);
  const head = el("tr", {}, el("th", {}, ""), ...Array.from({ length: cols }, (_, j) => el("th", {}, square ? labels[j] : j)), square ? null : el("th", {}, w > cols ? `… ${w}` : ""));
  const body = a.map((r, i) => el("tr", {}, el("th", {}, labels[i]),
    ...r.slice(0, cols).map((v) => el("td", { style: `background:${isWeights ? colour(v) : signed(v / maxAbs)}`, title: String(v) }, fmt(v, square ? 2 : 3))),
    square ? null : el("td", {}, w > cols ? "…" : "")));
  return el("figure", { class: "arr" }, el("figcaption", {}, `${name}  [${n}×${w}]`), el("table", {}, el("thead", {}, head), el("tbody", {}, ...body)));
}

async function drawTour(gen) {
  const layer = +$("att-layer").value, head = +$("att-head").value;
  const tr = await cached("tour", { text: att.text, layer, head, lang });
  if (stale(gen)) return;
  const names = Object.keys(tr.arrays);
  const find = (n) => names.find((k) => k === n || k.startsWith(n + "["));
  const items = tr.steps.map((s) => {
    const parts = [el("h3", {}, s.title), el("p", {}, s.text)];
    if (s.special_note) parts.push(el("p", { class: "hint" }, s.special_note));
    if (s.attends) parts.push(el("ul", {}, ...s.attends.slice(0, 6).map((x) => el("li", {}, x))));
    if (s.id === "check") {
      parts.push(el("table", { class: "data" }, el("thead", {}, el("tr", {}, el("th", {}, "trace"), el("th", {}, "shape"), el("th", {}, "max |Δ|"), el("th", {}, ""))),
        el("tbody", {}, ...tr.checks.map((c) => el("tr", {}, el("td", {}, c.name), el("td", {}, c.shape.join("×")), el("td", {}, Number(c.max_abs_diff).toExponential(1)), el("td", {}, c.ok ? "✓" : "✗"))))));
    } else {
      for (const n of s.arrays || []) { const k = find(n); if (k && !(s.id === "heads" && /context/.test(n))) parts.push(arrayTable(k, tr.arrays[k], tr.labels)); }
    }
    return el("li", { class: "step", "data-step": s.id }, ...parts);
  });
  $("att-tour").replaceChildren(el("p", { class: "hint" }, `${t("att.layer")} ${tr.layer} · ${t("att.head")} ${tr.head} · d_k = ${tr.d_k}` + (tr.ok ? " · ✓" : "")), el("ol", { class: "tour" }, ...items));
}

const PANELS = { head: "att-head-panel", grid: "att-grid-panel", rollout: "att-rollout-panel", tour: "att-tour-panel" };
const SHOWN = { head: ["head", "kind", "level", "hide"], grid: ["kind", "level", "hide"], rollout: ["level", "hide"], tour: ["head"] };
const selectMode = tablist($("att-modes"), (tab) => {
  att.mode = tab.dataset.mode;
  for (const [m, id] of Object.entries(PANELS)) $(id).hidden = m !== att.mode;
  for (const c of ["head", "kind", "level", "hide"]) $(`att-${c}-label`).hidden = !SHOWN[att.mode].includes(c);
  $("att-hint").hidden = att.mode !== "head";
  runAttention();
});

$("att-form").addEventListener("submit", (e) => { e.preventDefault(); runAttention(); });
for (const id of ["att-layer", "att-head", "att-kind", "att-level", "att-hide-special"]) $(id).addEventListener("change", runAttention);

// ============================================================== search view
const srch = { fields: null };

async function initSearch() {
  if (!INFO.features.search) { setStatus("search-status", () => `${t("unavailable")} ${INFO.index ? "qkv.search" : t("search.noindex")}`, true); return; }
  if (srch.fields) return;
  try {
    const f = await api("search/fields");
    srch.fields = f.fields;
    const box = $("search-filters");
    box.replaceChildren(...f.fields.map((fd) => {
      if (fd.kind === "number") {
        return el("fieldset", { class: "num" }, el("legend", {}, fieldName(fd.name)),
          el("label", {}, L("search.min"), " ", el("input", { type: "number", step: "any", "data-field": fd.name, "data-op": ">=", placeholder: fmt(fd.min, 2), style: "width:6rem" })),
          " ",
          el("label", {}, L("search.max"), " ", el("input", { type: "number", step: "any", "data-field": fd.name, "data-op": "<=", placeholder: fmt(fd.max, 2), style: "width:6rem" })));
      }
      if (fd.values) {
        return el("label", {}, fieldName(fd.name), " ", el("select", { "data-field": fd.name, "data-op": "=" },
          el("option", { value: "", "data-i18n": "search.any" }, t("search.any")),
          ...fd.values.map((v) => N("val", String(v), "option", { value: v }))));
      }
      return el("label", {}, fieldName(fd.name), " ", el("input", { type: "text", "data-field": fd.name, "data-op": "contains", style: "width:8rem" }));
    }));
    $("search-filters-box").open = window.innerWidth > 600;  // folded on a phone: results first
  } catch (e) { showError("search-status", e); return; }
  if (!$("search-results").children.length) runSearch();
}

// a catalog field's name in the page's language (the sample's fields have labels; others stay as named)
const fieldName = (name) => N("field", name);

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
    const tipText = `${word}: ${t("search.share")} ${fmt(h.share, 4)}` + (h.answers ? ` ← "${h.answers}"` : "") +
      (h.keyword.length ? ` · BM25: ${h.keyword.join(", ")}` : "");
    // tint in proportion to the word's share of the cosine (as `qkv search --explain` shades it)
    const level = Math.max(0, h.share / maxShare);
    const tint = level > 0.3 ? `background-color: rgba(31, 95, 191, ${(0.35 * level).toFixed(2)})` : null;
    if (h.keyword.length) parts.push(el("mark", { title: tipText }, word));
    else parts.push(el("span", { class: tint ? "dense" : null, title: tipText, style: tint }, word));
    at = h.end;
  }
  parts.push(title.slice(at));
  return parts;
}

// The grid over words: each cell a query word × title word pair's exact part of the cosine; the
// model's "query: "/"passage: " prefixes and the special tokens ([CLS], [SEP], bare "▁" markers)
// take their parts too, said apart as totals, so the darkest cells are matching words.
function matchGrid(box, x) {
  const e = x.explanation, w = e.word_grid, c = e.context;
  box.replaceChildren();
  const kw = e.keyword_terms.length ? ` · BM25: ${e.keyword_terms.map((k) => `${k.term} ${fmt(k.bm25, 2)}`).join(", ")}` : "";
  box.append(el("p", { class: "hint", "data-cosine": e.cosine, "data-words": c.words, "data-prefix": c.prefix, "data-special": c.special },
    t("match.note").replace("{cos}", fmt(e.cosine, 4)).replace("{words}", fmt(c.words, 4))
      .replace("{prefix}", fmt(c.prefix, 4)).replace("{special}", fmt(c.special, 4)) + kw));
  const hm = el("div", { class: "heatmap-wrap" });
  box.append(hm);
  heatmap(hm, { values: w.values, rowLabels: w.rows, colLabels: w.cols, readout: null, label: `match grid ${x.id}` });
}

// A translated query word by word (the API's `translation`, qkv.search.crosslingual.translation_rows):
// one chip per translated word, "吊带 → brace", its other English dim ("also strap"), a weight below
// 1 shown (×0.5: the less sure the source, the less its keyword group counts), source and weight in
// the tooltip. Drawn again when the language changes (the tooltip is not a data-i18n label).
let lastTranslation = [];
function drawTranslation() {
  const box = $("search-words");
  // translated words, and words with no translation (a brand, 安踏): searched as typed, marked so
  const rows = lastTranslation.filter((w) => w.weight != null || w.source === "untranslated");
  box.hidden = !rows.length;
  box.setAttribute("aria-label", t("search.words"));
  box.replaceChildren(...rows.map((w) => {
    if (w.weight == null)
      return el("li", { class: "word untranslated", "data-source": w.source, title: `${w.zh} · ${t("src.untranslated")}` },
        el("span", { class: "zh" }, w.zh), " → ", el("i", {}, t("src.untranslated")));
    const tip = `${w.zh} → ${w.en} · ${t("search.source")}: ${t("src." + w.source)} · ${t("search.weight")} ${w.weight}` +
      (w.weight < 1 ? ` (${t("search.weight.hint")})` : "");
    return el("li", { class: "word" + (w.weight < 1 ? " weak" : ""), title: tip, "data-source": w.source, "data-weight": w.weight },
      el("span", { class: "zh" }, w.zh), " → ", el("b", {}, w.en),
      w.weight < 1 ? [" ", el("span", { class: "weight" }, `×${w.weight}`)] : null,
      w.alternatives.length ? [" ", el("span", { class: "also" }, el("span", { "data-i18n": "search.also" }, t("search.also")), " ", w.alternatives.join(", "))] : null);
  }));
}

const EXPLAIN_FIRST = 3;  // results explained with the search; the others when their grid is opened
const EXPLAIN_DETAIL = "grid";  // what matchGrid draws (token grid, sums, BM25 terms), not the word-level extras
const searchReq = latest();  // only the newest search draws its results (answers can arrive out of order)
let lastSearch = null;  // { r, body, rt }: drawn again when the language changes
async function runSearch(spell = true) {  // spell false: the words as typed ("Search instead for")
  if (!INFO.features.search) return initSearch();
  const body = { query: $("search-q").value, mode: $("search-mode").value, k: Number($("search-k").value) || 10,
                 filters: readFilters(), explain: EXPLAIN_FIRST, explain_detail: EXPLAIN_DETAIL, spell };
  const req = searchReq.start();
  if (!body.query.trim()) {  // said in the page's terms, before asking the server
    lastSearch = null; $("search-results").replaceChildren(); $("search-as").hidden = true; lastTranslation = []; drawTranslation();
    setStatus("search-status", () => `${t("error")} ${t("err.query.empty")}`, true);
    return;
  }
  setStatus("search-status", () => t("working"));
  const t0 = performance.now();
  try {
    const r = await api("search", body, { signal: req.signal });
    if (!req.current()) return;
    lastSearch = { r, body, rt: performance.now() - t0 };
    drawSearch();
  } catch (e) {
    if (!req.current()) return;
    lastSearch = null;  // no stale results under the error
    $("search-results").replaceChildren(); $("search-as").hidden = true; lastTranslation = []; drawTranslation();
    showError("search-status", e);
  }
}

// "Search instead for <the query as typed>": the same search with no word corrected
function astyped(query) {
  const a = el("a", { href: "#", id: "search-astyped" }, L("search.astyped"), " ", el("q", {}, query));
  a.addEventListener("click", (ev) => { ev.preventDefault(); runSearch(false); });
  return a;
}

function drawSearch() {
  if (!lastSearch) return;
  const { r, body, rt } = lastSearch;
  const list = $("search-results");
  list.replaceChildren();
  // a Chinese query is also searched in English (qkv.translate.translator): say as what
  // … and an English word no title holds in the catalog's own spelling (qkv.search.spelling)
  // … and whether the dense query went through the index's query adapter (`qkv terms adapt`)
  const as = $("search-as");
  as.hidden = !r.searched_as && !r.corrected && !r.query_adapter;
  as.replaceChildren(...(r.searched_as ? [L("search.as"), " ", el("q", {}, r.searched_as)]
    : r.corrected ? [L("search.corrected"), " ", el("q", {}, r.corrected), " · ", astyped(body.query)] : []),
    ...(r.query_adapter ? [(r.searched_as || r.corrected) ? " · " : "",
                           el("span", { id: "search-adapted", "data-i18n": "search.adapted" }, t("search.adapted"))] : []));
  lastTranslation = r.searched_as ? r.translation || [] : [];
  drawTranslation();
  if (!r.results.length) list.append(L("search.none", "p"));
  // results below the measured floor (qkv.search.floor): nothing in the catalog is close
  if (r.results.length && r.results.every((x) => x.weak)) list.append(el("p", { class: "note", id: "search-nothing", "data-i18n": "search.nothing" }, t("search.nothing")));
  r.results.forEach((x) => {
    const grid = el("div", { class: "match", hidden: true });
    const title = el("div", { class: "title" }, ...markedTitle(x.title, x.highlights));
    const btn = el("button", { type: "button", "aria-expanded": "false", "data-i18n": "search.why" }, t("search.why"));
    btn.addEventListener("click", async () => {
      const open = grid.hidden;
      if (open && !x.explanation) {  // computed on the server when first opened
        btn.disabled = true;
        try {
          const e = (await api("search/explain", { query: body.query, ids: [x.id], detail: EXPLAIN_DETAIL,
                                                   spell: body.spell })).explanations[x.id];
          Object.assign(x, e);
          title.replaceChildren(...markedTitle(x.title, x.highlights));
        } catch (err) { showError("search-status", err); return; } finally { btn.disabled = false; }
      }
      if (open && !grid.firstChild) matchGrid(grid, x);
      grid.hidden = !open;
      btn.setAttribute("aria-expanded", String(open));
      btn.dataset.i18n = open ? "search.hide" : "search.why";
      btn.textContent = t(btn.dataset.i18n);
    });
    const f = Object.entries(x.fields).filter(([, v]) => v != null)
      .flatMap(([k, v], i) => [i ? " · " : "", N("field", k), ": ", typeof v === "string" ? N("val", v) : String(v)]);
    // the score; how each side scored it (cosine and BM25, with ranks) on hover, for the curious
    const sides = [x.dense_score != null ? `cos ${fmt(x.dense_score, 3)}${x.dense_rank ? " #" + x.dense_rank : ""}` : null,
                   x.keyword_score != null ? `BM25 ${fmt(x.keyword_score, 2)} #${x.keyword_rank}` : null].filter(Boolean).join(" · ");
    const sc = [el("span", { class: "score", title: sides, "data-sides": sides }, L("search.score"), ` ${fmt(x.score, 4)}`)];
    list.append(el("li", { "data-id": x.id, class: x.weak ? "weak" : null },
      x.weak ? el("span", { class: "badge", "data-i18n": "search.weak", title: t("search.weak.hint"), "data-i18n-title": "search.weak.hint" }, t("search.weak")) : null,
      title,
      el("div", { class: "meta" }, `${x.id} · `, ...f),
      el("div", { class: "meta" }, ...sc, " ", btn),
      grid));
  });
  const tm = Object.entries(r.timings_ms).map(([k, v]) => `${k} ${fmt(v, 1)}`).join(", ");
  setStatus("search-status", () => `${r.count} · ${t("search.latency")} ${fmt(r.server_ms, 1)} ms · ${t("search.roundtrip")} ${fmt(rt, 1)} ms`);
  $("search-status").title = tm;  // the server's split (encode, ANN, keyword, fuse …): for the curious, on hover
  $("search-status").dataset.latency = r.server_ms;
}
$("search-form").addEventListener("submit", (e) => { e.preventDefault(); runSearch(); });

// ============================================================== attributes view
const PALETTE = ["#ffd8a8", "#b2f2bb", "#a5d8ff", "#eebefa", "#ffc9c9", "#c3fae8", "#ffec99", "#d0bfff"];

function spansInTitle(title, attrs, colourOf) {
  const parts = [];
  let at = 0;
  for (const a of [...attrs].sort((x, y) => x.start - y.start)) {
    if (a.start < at) continue;
    parts.push(title.slice(at, a.start));
    parts.push(el("span", { class: "span-attr", "data-attr": a.attr, style: `background:${colourOf(a.attr)}`,
      title: `${a.attr}: ${a.value} (${fmt(a.confidence, 3)})` }, title.slice(a.start, a.end)));
    at = a.end;
  }
  parts.push(title.slice(at));
  return parts;
}


const attrReq = latest();
let lastAttributes = null;  // drawn again when the language changes
async function runAttributes() {
  if (!INFO.features.attributes) {
    setStatus("attr-status", () => `${t("unavailable")} ${INFO.attributes_model ? "qkv.attributes" : t("attr.nomodel")}`, true);
    return;
  }
  const titles = $("attr-titles").value.split(/\n/).map((x) => x.trim()).filter(Boolean);
  const req = attrReq.start();
  setStatus("attr-status", () => t("working"));
  try {
    const r = await api("attributes", { titles }, { signal: req.signal });
    if (!req.current()) return;
    lastAttributes = r;
    drawAttributes();
  } catch (e) {
    if (!req.current()) return;
    lastAttributes = null;
    $("attr-out").replaceChildren();  // no stale table under the error
    showError("attr-status", e);
  }
}

function drawAttributes() {
  const r = lastAttributes;
  if (!r) return;
  const colourOf = (a) => PALETTE[Math.max(0, r.attributes.indexOf(a)) % PALETTE.length];
  const rows = [];
  for (const res of r.results) {
    const n = Math.max(1, res.attributes.length);
    const titleCell = el("td", { rowspan: n, class: "title-cell" }, ...spansInTitle(res.title, res.attributes, colourOf));
    if (!res.attributes.length) { rows.push(el("tr", {}, titleCell, el("td", { colspan: 3, class: "muted" }, t("attr.none")))); continue; }
    res.attributes.forEach((a, k) => rows.push(el("tr", { "data-attr": a.attr },
      k === 0 ? titleCell : null,
      el("td", {}, N("attrname", a.attr, "span", { class: "span-attr", style: `background:${colourOf(a.attr)}` })),
      el("td", {}, a.value + (a.normalized && a.normalized !== a.value ? ` → ${a.normalized}` : "")),
      el("td", {}, el("span", { class: "conf" }, el("i", { style: `width:${Math.round(100 * a.confidence)}%` })), fmt(a.confidence, 3)))));
  }
  $("attr-out").replaceChildren(
    r.demo ? el("p", { class: "note", id: "attr-demo" }, t("attr.demo").replace("{n}", r.demo.titles), " ",
      el("code", {}, "qkv attrs train --data titles.jsonl --out my.qkvattr"), " → ", el("code", {}, "qkv serve --attributes my.qkvattr")) : null,
    el("p", { class: "hint" }, `${t("attr.known")}: `, ...r.attributes.map((a) => N("attrname", a, "span", { class: "span-attr", "data-attr": a, style: `background:${colourOf(a)};margin-right:.4rem` }))),
    el("table", { class: "data", id: "attr-table" },
      el("thead", {}, el("tr", {}, el("th", {}, t("attr.title")), el("th", {}, t("attr.attribute")), el("th", {}, t("attr.value")), el("th", {}, t("attr.confidence")))),
      el("tbody", {}, ...rows)));
  setStatus("attr-status", () => `${r.results.length} · ${t("search.latency")} ${fmt(r.server_ms, 1)} ms`);
}
$("attr-form").addEventListener("submit", (e) => { e.preventDefault(); runAttributes(); });

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
    el("div", {}, el("b", {}, r.tokenizer), t("sum.tokenizer")),
    el("div", {}, el("b", { id: "sum-model" }, r.model || "—"), t("sum.model"))));
  out.append(el("div", { class: "summary", id: "sum-text", lang: "" }, r.text));
  if (r.points) out.append(drawPoints(r.points, r.n_reviews));
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

// What several buyers say, counted (issue 27): a point is a cluster of units from the reviews, its
// label taken from them; the count is of reviews, exact. Praise and complaints side by side.
function drawPoints(points, nReviews) {
  const side = (key, cls) => {
    const list = points[key] || [];
    return el("div", { class: `points ${cls}`, id: `sum-${key}` },
      el("h4", {}, t(`sum.${key}`)),
      list.length ? el("ol", {}, ...list.map((p) => el("li", { title: t("sum.inreviews").replace("{list}", p.reviews.map((i) => i + 1).join(", ")) },
        el("span", { class: "label" }, p.label),
        el("span", { class: "count" }, el("span", { class: "conf" }, el("i", { style: `width:${100 * p.count / Math.max(nReviews, 1)}%` })),
          t("sum.nreviews").replace("{n}", p.count).replace("{all}", nReviews)),
        el("q", {}, p.example))))
        : el("p", { class: "hint" }, t("sum.nopoint")));
  };
  return el("div", { id: "sum-points" }, el("h3", {}, t("sum.points")),
    el("div", { class: "points-row" }, side("praise", "praise"), side("complaints", "complaint")));
}

// A CSV whose review column has a name qkv does not know: the page lists its columns to choose from
let sumColumn = "";
function askColumn(columns) {
  const pick = el("select", { id: "sum-column" }, el("option", { value: "" }, "—"), ...columns.map((c) => el("option", { value: c }, c)));
  pick.addEventListener("change", () => { sumColumn = pick.value; if (sumColumn) runSummary(); });
  $("sum-out").replaceChildren(el("p", { class: "note" }, el("label", {}, L("sum.column"), " ", pick)));
}
$("sum-file").addEventListener("change", () => { sumColumn = ""; });

const sumReq = latest();
let lastSummary = null;  // drawn again when the language changes
async function runSummary() {
  if (!INFO.features.summaries) { setStatus("sum-status", () => `${t("unavailable")} qkv.summarize`, true); return; }
  const req = sumReq.start();
  setStatus("sum-status", () => t("working"));
  try {
    const budget = Number($("sum-budget").value);
    const file = $("sum-file").files[0];
    let r, reviews;
    if (file) {
      const fd = new FormData();
      fd.append("file", file);
      fd.append("budget", String(budget));
      fd.append("tokenizer", $("sum-tokenizer").value);
      fd.append("order", $("sum-order").value);
      if (sumColumn) fd.append("column", sumColumn);
      r = await api("summarize/upload", fd, { form: true, signal: req.signal });
      reviews = r.reviews;
    } else {
      reviews = $("sum-reviews").value.split(/\n/).map((x) => x.trim()).filter(Boolean);
      r = await api("summarize", { reviews, budget, tokenizer: $("sum-tokenizer").value, order: $("sum-order").value }, { signal: req.signal });
    }
    if (!req.current()) return;
    lastSummary = r;
    renderSummary(r, reviews);
    const from = file ? file.name : null;  // the file wins over the box: say which was summarised
    setStatus("sum-status", () => (from ? t("sum.from.file").replace("{name}", from) : t("sum.from.box")));
  } catch (e) {
    if (!req.current()) return;
    lastSummary = null;
    $("sum-out").replaceChildren();  // no stale summary under the error
    if (e.data.columns) { askColumn(e.data.columns); setStatus("sum-status", () => t("sum.column.ask"), true); return; }
    showError("sum-status", e);
  }
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
  drawTranslation();
  drawSearch();
  drawAttributes();
  if (lastSummary) renderSummary(lastSummary);
  if (att.text) runAttention();  // from its cache: titles, neuron view and the tour in the new language
});

(async function start() {
  applyLang();
  try { await loadInfo(); } catch (e) { showError("att-status", e); return; }
  const v = location.hash.replace("#", "");
  if (VIEWS.includes(v) && v !== "attention") selectView($("tab-" + v), false);
  runAttention();
})();
