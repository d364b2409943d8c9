"""Offline HTML: a self-contained report page with hand-written SVG and a little JavaScript, and
small fragments for notebooks. A renderer above the data: it imports the result classes and
registers its views for them (``display.renders``), which is how their ``_repr_html_`` and
``Explanation.to_html`` find it; the result modules never import this one.

Why not plotly: its JavaScript bundle weighs several megabytes, which every offline page would
have to inline (no CDN allowed), once per report in a batch — while what we draw is a
grid of coloured squares with tooltips and a few selectors. About forty lines of JavaScript and some SVG do that,
load instantly, and keep the page free of any network reference. SVG is written as markup
strings (no XML namespace URL is needed inside HTML), so the page contains no http(s) address.
"""

from __future__ import annotations

import html as _html
import itertools
import json

import numpy as np

from qkv.explain.attribution import PairAttribution
from qkv.explain.display import renders
from qkv.explain.maps import CAVEAT, HeatMap, NeuronView
from qkv.explain.report import Explanation
from qkv.explain.salience import METHODS, SellingPoints
from qkv.explain.tour import Tour

_ids = itertools.count()

CSS = """
.qkv{font:14px/1.45 system-ui,-apple-system,"Segoe UI","Noto Sans","PingFang SC","Microsoft YaHei",sans-serif;color:#1d2733;max-width:1200px}
.qkv h1{font-size:20px;margin:.2em 0}.qkv h2{font-size:16px;margin:1.2em 0 .4em;border-bottom:1px solid #dde3ea}
.qkv .caveat{background:#fff8e1;border-left:4px solid #f0b400;padding:.5em .8em;margin:.6em 0;font-size:13px}
.qkv .controls label{margin-right:1em}.qkv select,.qkv input{font:inherit}
.qkv .info{font-family:ui-monospace,Menlo,Consolas,monospace;min-height:1.4em;color:#244}
.qkv .row{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}
.qkv .grid{display:flex;flex-wrap:wrap;gap:6px}.qkv .grid figure{margin:0;cursor:pointer;text-align:center;font-size:11px}
.qkv .grid figure.sel{outline:2px solid #e4572e}
.qkv table{border-collapse:collapse;font-size:12px}.qkv td,.qkv th{padding:2px 6px;text-align:right}
.qkv th{background:#f2f5f8}.qkv td.l,.qkv th.l{text-align:left}
.qkv .bar{display:inline-block;height:10px;background:#2a6fb0;vertical-align:middle}
.qkv .bar.neg{background:#c8553d}
.qkv .hl{padding:1px 2px;border-radius:3px}
.qkv .muted{color:#6b7785;font-size:12px}
.qkv svg text{font-size:11px;font-family:ui-monospace,Menlo,Consolas,monospace}
"""


def esc(s) -> str:
    return _html.escape(str(s), quote=True)


def _color(v: float, vmax: float) -> str:
    f = 0.0 if vmax <= 0 else min(1.0, max(0.0, v / vmax))
    r, g, b = (round(255 - (255 - c) * f) for c in (8, 48, 107))
    return f"rgb({r},{g},{b})"


def svg_heatmap(rows, cols, values, cell: int = 20, label_w: int = 90, title: str = "") -> str:
    """A static heatmap as SVG markup; each square has a tooltip (row → col: value)."""
    v = np.asarray(values, dtype=float)
    vmax = float(v.max()) if v.size else 1.0
    top = label_w
    w, h = label_w + cell * len(cols) + 4, top + cell * len(rows) + 4
    parts = [f'<svg width="{w}" height="{h}" role="img" aria-label="{esc(title)}">']
    for j, c in enumerate(cols):
        x = label_w + j * cell + cell / 2
        parts.append(f'<text x="{x}" y="{top - 4}" transform="rotate(-60 {x} {top - 4})">{esc(c)}</text>')
    for i, r in enumerate(rows):
        y = top + i * cell
        parts.append(f'<text x="{label_w - 4}" y="{y + cell * 0.7}" text-anchor="end">{esc(r)}</text>')
        for j, c in enumerate(cols):
            parts.append(f'<rect x="{label_w + j * cell}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                         f'fill="{_color(v[i, j], vmax)}"><title>{esc(r)} → {esc(c)}: {v[i, j]:.3f}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def _wrap(body: str) -> str:
    return f'<div class="qkv"><style>{CSS}</style>{body}</div>'


@renders(HeatMap)
def heatmap_fragment(hm) -> str:
    extra = ""
    if hm.hidden_share is not None:
        extra = (f'<p class="muted">[CLS]/[SEP] hidden; they took {float(np.mean(hm.hidden_share)):.0%} '
                 "of each row on average.</p>")
    return _wrap(f"<b>{esc(hm.title)}</b> <span class='muted'>({esc(hm.name)})</span>"
                 f"{svg_heatmap(hm.rows, hm.cols, hm.values, title=hm.title)}{extra}"
                 f'<div class="caveat">{esc(CAVEAT["en"])}</div>')


@renders(NeuronView)
def neuron_fragment(nv) -> str:
    rows = []
    wmax = float(nv.weights.max())
    for j, tok in enumerate(nv.tokens):
        qk = nv.qk[j]
        m = float(np.abs(nv.qk).max()) or 1.0
        strip = "".join(f'<span style="display:inline-block;width:4px;height:12px;background:'
                        f'{"#2a6fb0" if x >= 0 else "#c8553d"};opacity:{abs(x) / m:.2f}"></span>' for x in qk)
        rows.append(f"<tr><td class='l'>{esc(tok)}</td><td class='l'>{strip}</td><td>{nv.scores[j]:.2f}</td>"
                    f"<td>{nv.scaled[j]:.2f}</td><td class='l'><span class='bar' style='width:{100 * nv.weights[j] / wmax:.0f}px'>"
                    f"</span> {nv.weights[j]:.3f}</td></tr>")
    return _wrap(f"<b>neuron view · layer {nv.layer} head {nv.head} · query “{esc(nv.tokens[nv.query])}”</b>"
                 "<table><tr><th class='l'>key</th><th class='l'>q × k (element-wise; blue +, red −)</th>"
                 "<th>q·k</th><th>/√d</th><th class='l'>softmax</th></tr>" + "".join(rows) + "</table>")


def _highlight(text: str, spans, values, signed: bool = False) -> str:
    """The text with spans [(start, end)] shaded by value (blue; red for negative when signed)."""
    vmax = max([abs(float(v)) for v in values] + [1e-12])
    out, pos = [], 0
    for (s, e), v in sorted(zip(spans, values), key=lambda t: t[0][0]):
        out.append(esc(text[pos:s]))
        a = abs(float(v)) / vmax
        rgb = "200,85,61" if (signed and v < 0) else "42,111,176"
        out.append(f'<span class="hl" style="background:rgba({rgb},{0.08 + 0.6 * a:.2f})" '
                   f'title="{float(v):+.4f}">{esc(text[s:e])}</span>')
        pos = e
    out.append(esc(text[pos:]))
    return "".join(out)


def _bars(pairs, signed: bool = False, top: int = 25) -> str:
    more = len(pairs) - top
    pairs = pairs[:top]
    vmax = max([abs(v) for _, v in pairs] + [1e-12])
    rows = [f"<tr><td class='l'>{esc(w)}</td><td class='l'><span class='bar{' neg' if v < 0 else ''}' "
            f"style='width:{120 * abs(v) / vmax:.0f}px'></span></td><td>{v:+.4f}</td></tr>" for w, v in pairs]
    return "<table>" + "".join(rows) + "</table>" + (f"<p class='muted'>… and {more} more</p>" if more > 0 else "")


@renders(SellingPoints)
def selling_points_fragment(sp) -> str:
    return _wrap(f"<p>{_highlight(sp.text, list(zip(sp.starts, sp.ends)), sp.score)}</p>"
                 f"{_points_table(sp)}<p class='muted'>ranked by {esc(sp.method)}: {esc(METHODS[sp.method])}; "
                 f"rollout = salience from rollout ([CLS]/[SEP], bare ▁ and punctuation took "
                 f"{sp.special_share:.0%} before rescaling)</p>")


def _points_table(sp, top: int = 25) -> str:
    """Each word's score by the method, with its rollout salience beside it (the attention evidence)."""
    ranked = sp.to_dict()["ranked"]
    vmax = max([abs(r["score"]) for r in ranked[:top]] + [1e-12])
    rows = [f"<tr><td class='l'>{esc(r['word'])}</td><td class='l'><span class='bar{' neg' if r['score'] < 0 else ''}' "
            f"style='width:{120 * abs(r['score']) / vmax:.0f}px'></span></td><td>{r['score']:+.4f}</td>"
            f"<td>{r['salience']:.4f}</td></tr>" for r in ranked[:top]]
    more = len(ranked) - top
    return ("<table><tr><th class='l'>word</th><th></th><th>score</th><th>rollout</th></tr>" + "".join(rows)
            + "</table>" + (f"<p class='muted'>… and {more} more</p>" if more > 0 else ""))


def _word_spans(text: str, words):
    out, pos = [], 0
    for w in words:
        s = text.find(w, pos)
        if s < 0:
            s = text.find(w)
        out.append((s, s + len(w)))
        pos = s + len(w)
    return out


@renders(PairAttribution)
def pair_fragment(pa) -> str:
    def spans(ws):
        if ws.starts:
            return [(s, s + len(w)) for s, w in zip(ws.starts, ws.words)]
        return _word_spans(ws.text, ws.words)

    q = _highlight(pa.query, spans(pa.query_words), pa.query_words.scores, signed=True)
    t = _highlight(pa.title, spans(pa.title_words), pa.title_words.scores, signed=True)
    return _wrap(f"<p>similarity <b>{pa.similarity:.3f}</b> · {esc(pa.method)} "
                 f"<span class='muted'>({esc(pa.title_words.measure)}; blue helped, red hurt)</span></p>"
                 f"<p>query: {q}</p><p>title: {t}</p>")


@renders(Tour)
def tour_fragment(t, lang: str = "en") -> str:
    parts = [f"<h1>{'Attention tour' if lang == 'en' else '注意力导览'} · layer {t.layer} head {t.head}</h1>"
             f"<p>“{esc(t.text)}”</p>"]
    for s in t.steps(lang):
        parts.append(f"<h2>{esc(s['title'])}</h2><p>{esc(s['text'])}</p>")
        if s["id"] == "scores":
            parts.append(svg_heatmap(t.labels, t.labels, t.scores - t.scores.min(), title="scores"))
        if s["id"] == "softmax":
            parts.append(svg_heatmap(t.labels, t.labels, t.weights, title="weights"))
            parts.append("<ul>" + "".join(f"<li>{esc(a)}</li>" for a in s["attends"]) + "</ul>")
        if s["id"] == "check":
            parts.append("<table><tr><th class='l'>trace name</th><th>max |diff|</th><th></th></tr>" + "".join(
                f"<tr><td class='l'>{esc(c.name)}</td><td>{c.max_abs_diff:.1e}</td><td>{'✓' if c.ok else '✗'}</td></tr>"
                for c in t.checks) + "</table>")
    return _wrap("".join(parts))


# ------------------------------------------------------------------ the interactive report page

JS = r"""
(function(){
const root=document.getElementById(ROOT);
const D=JSON.parse(root.querySelector('script.qkv-data').textContent);
const st={kind:'attention',layer:D.layer,head:D.head,level:'token',hide:false,query:Math.min(1,D.tokens.length-1)};
const $=s=>root.querySelector(s);
const esc=s=>String(s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
function matrix(kind,layer,head){
  if(kind==='attention')return head<0?D.attention_all[layer]:D.attention[layer][head];
  if(kind==='norm')return head<0?D.norm_all[layer]:D.norm[layer][head];
  return D[kind][layer];}
function view(m){
  let labels=D.tokens,special=D.special,groups=D.tokens.map((_,i)=>[i]);
  if(st.level==='word'){groups=D.words.map(w=>w.tokens);labels=D.words.map(w=>w.text);special=D.words.map(w=>w.special);
    m=groups.map(gr=>groups.map(gc=>{let s=0;for(const i of gr)for(const j of gc)s+=m[i][j];return s/gr.length;}));}
  let keep=labels.map((_,i)=>!(st.hide&&special[i]));if(!keep.some(x=>x))keep=labels.map(()=>true);
  const idx=keep.map((k,i)=>k?i:-1).filter(i=>i>=0);
  const hidden=st.hide?idx.map(i=>m[i].reduce((a,v,j)=>a+(keep[j]?0:v),0)):null;
  return {labels:idx.map(i=>labels[i]),vals:idx.map(i=>idx.map(j=>m[i][j])),hidden,groups:idx.map(i=>groups[i])};}
function color(v,max){const f=max>0?Math.max(0,Math.min(1,v/max)):0;
  return `rgb(${Math.round(255-247*f)},${Math.round(255-207*f)},${Math.round(255-148*f)})`;}
function svg(v,cell,labels,lw){
  const n=v.labels.length,max=Math.max(1e-12,...v.vals.flat());const W=lw+cell*n+(labels?60:4),H=lw+cell*n+4;
  let s=`<svg width="${W}" height="${H}">`;
  if(labels){v.labels.forEach((l,j)=>{const x=lw+j*cell+cell/2;s+=`<text x="${x}" y="${lw-4}" transform="rotate(-60 ${x} ${lw-4})">${esc(l)}</text>`;});
    v.labels.forEach((l,i)=>{s+=`<text x="${lw-4}" y="${lw+i*cell+cell*0.7}" text-anchor="end">${esc(l)}</text>`;});}
  v.vals.forEach((r,i)=>r.forEach((x,j)=>{s+=`<rect data-i="${i}" data-j="${j}" x="${lw+j*cell}" y="${lw+i*cell}" width="${cell-1}" height="${cell-1}" fill="${color(x,max)}"><title>${esc(v.labels[i])} → ${esc(v.labels[j])}: ${x.toFixed(3)}</title></rect>`;}));
  return s+'</svg>';}
const NAMES={attention:l=>`layers.${l}.attn.weights`,norm:l=>`layers.${l}.attn.weighted_norms`,rollout:l=>`rollout.${l}`,value_zeroing:l=>`layers.${l}.value_zeroing`};
function drawMain(){
  const perHead=(st.kind==='attention'||st.kind==='norm');
  $('.qkv-head').disabled=!perHead;
  const head=perHead?st.head:-1;const v=view(matrix(st.kind,st.layer,head));
  const cell=Math.max(12,Math.min(30,Math.floor(560/v.labels.length)));
  $('.qkv-main').innerHTML=svg(v,cell,true,110);
  $('.qkv-name').textContent=NAMES[st.kind](st.layer)+(perHead&&head>=0?`  head ${head}`:perHead?'  (heads combined)':'');
  $('.qkv-hidden').textContent=v.hidden?`[CLS]/[SEP] hidden: they took ${(100*v.hidden.reduce((a,b)=>a+b,0)/v.hidden.length).toFixed(0)}% of each row on average.`:'';
  $('.qkv-main').onmousemove=e=>{const r=e.target.closest('rect');if(!r)return;const i=+r.dataset.i,j=+r.dataset.j;
    $('.qkv-info').textContent=`${v.labels[i]} → ${v.labels[j]}: ${v.vals[i][j].toFixed(4)}`;};
  $('.qkv-main').onclick=e=>{const r=e.target.closest('rect');if(!r)return;st.query=v.groups[+r.dataset.i][0];drawNeuron();};
  drawGrid();drawNeuron();}
function drawGrid(){
  const g=$('.qkv-grid');if(!(st.kind==='attention'||st.kind==='norm')){g.innerHTML='<span class="muted">rollout and value zeroing combine the heads of a layer</span>';return;}
  let s='';for(const h of D.heads){const v=view(matrix(st.kind,st.layer,h));const cell=Math.max(2,Math.floor(84/v.labels.length));
    s+=`<figure data-h="${h}" class="${h===st.head?'sel':''}">${svg(v,cell,false,0)}<figcaption>head ${h}</figcaption></figure>`;}
  g.innerHTML=s;g.querySelectorAll('figure').forEach(f=>f.onclick=()=>{st.head=+f.dataset.h;$('.qkv-head').value=st.head;drawMain();});}
function drawNeuron(){
  const l=st.layer,h=st.head,i=st.query;const q=D.q[l][h][i],K=D.k[l][h];const d=q.length;
  const qk=K.map(k=>k.map((x,c)=>x*q[c]));const s=qk.map(r=>r.reduce((a,b)=>a+b,0));const sc=s.map(x=>x/Math.sqrt(d));
  const mx=Math.max(...sc);const e=sc.map(x=>Math.exp(x-mx));const z=e.reduce((a,b)=>a+b,0);const w=e.map(x=>x/z);
  const m=Math.max(1e-12,...qk.flat().map(Math.abs)),wm=Math.max(...w);
  const strip=(r,mm)=>r.map(x=>`<span style="display:inline-block;width:4px;height:12px;background:${x>=0?'#2a6fb0':'#c8553d'};opacity:${(Math.abs(x)/mm).toFixed(2)}"></span>`).join('');
  let t=`<p><b>neuron view</b> · layer ${l} head ${h} · query <b>${esc(D.tokens[i])}</b> <span class="muted">(click a row of the map to change it)</span></p>`;
  t+=`<p>q: ${strip(q,Math.max(...q.map(Math.abs)))}</p><table><tr><th class="l">key</th><th class="l">k</th><th class="l">q × k</th><th>q·k</th><th>/√${d}</th><th class="l">softmax</th></tr>`;
  K.forEach((k,j)=>{t+=`<tr><td class="l">${esc(D.tokens[j])}</td><td class="l">${strip(k,Math.max(...k.map(Math.abs)))}</td><td class="l">${strip(qk[j],m)}</td><td>${s[j].toFixed(2)}</td><td>${sc[j].toFixed(2)}</td><td class="l"><span class="bar" style="width:${(100*w[j]/wm).toFixed(0)}px"></span> ${w[j].toFixed(3)}</td></tr>`;});
  $('.qkv-neuron').innerHTML=t+'</table>';}
$('.qkv-kind').onchange=e=>{st.kind=e.target.value;drawMain();};
$('.qkv-layer').onchange=e=>{st.layer=+e.target.value;drawMain();};
$('.qkv-head').onchange=e=>{st.head=+e.target.value;drawMain();};
$('.qkv-level').onchange=e=>{st.level=e.target.value;drawMain();};
$('.qkv-hide').onchange=e=>{st.hide=e.target.checked;drawMain();};
drawMain();
})();
"""


def _controls(d: dict) -> str:
    kinds = [("attention", "attention weights"), ("norm", "norm-weighted ‖α·f(x)‖ (Kobayashi 2020)"),
             ("rollout", "rollout (Abnar & Zuidema 2020)")]
    if d["value_zeroing"]:
        kinds.append(("value_zeroing", "value zeroing (Mohebbi 2023)"))
    k = "".join(f'<option value="{v}">{esc(t)}</option>' for v, t in kinds)
    layers = "".join(f'<option value="{l}"{" selected" if l == d["layer"] else ""}>{l}</option>' for l in d["layers"])
    heads = "".join(f'<option value="{h}"{" selected" if h == d["head"] else ""}>{h}</option>'
                    for h in d["heads"])
    return ('<div class="controls">'
            f'<label>map <select class="qkv-kind">{k}</select></label>'
            f'<label>layer <select class="qkv-layer">{layers}</select></label>'
            f'<label>head <select class="qkv-head">{heads}</select></label>'
            '<label>level <select class="qkv-level"><option value="token">tokens</option>'
            '<option value="word">words</option></select></label>'
            '<label><input type="checkbox" class="qkv-hide"> hide [CLS]/[SEP]</label></div>')


@renders(Explanation)
def report_fragment(ex) -> str:
    d = ex.page_data()
    rid = f"qkv-report-{next(_ids)}"
    sp = ex.selling_points
    body = [f"<h1>{esc(d['text'])}</h1><p class='muted'>{esc(d['model'])} · {len(d['tokens'])} tokens</p>",
            f'<div class="caveat"><b>Caveat.</b> {esc(d["caveat"])}</div>']
    if d["note_layers"]:
        body.append(f"<p class='muted'>{esc(d['note_layers'])}</p>")
    body += ["<h2>Selling points</h2>",
             f"<p style='font-size:16px'>{_highlight(sp.text, list(zip(sp.starts, sp.ends)), sp.score)}</p>",
             _points_table(sp),
             f"<p class='muted'>ranked by {esc(sp.method)}: {esc(METHODS[sp.method])}. "
             "rollout: salience s_j = mean over output tokens i of the last layer's rollout R[i, j], "
             f"summed over a word's pieces, rescaled to 1 over the other words ([CLS]/[SEP], bare ▁ and punctuation took "
             f"{sp.special_share:.0%})</p>",
             "<h2>Attention maps</h2>", _controls(d),
             "<div class='info qkv-name'></div><div class='row'><div><div class='qkv-main'></div>"
             "<div class='info qkv-info'>hover a square to read its value</div><div class='muted qkv-hidden'></div></div>"
             "<div class='qkv-neuron'></div></div>",
             "<h2>All heads of the layer</h2><div class='grid qkv-grid'></div>",
             "<h2>Which words matter: checks that need no attention weights</h2><div class='row'>"]
    for name, ws in (("occlusion", ex.occlusion), ("value zeroing", ex.value_zeroing)):
        if ws is not None:
            body.append(f"<div><b>{name}</b><br><span class='muted'>{esc(ws.measure)}</span>{_bars(ws.ranked())}</div>")
    body.append("</div>")
    if ex.pair is not None:
        body.append("<h2>Query / title similarity</h2>")
        body.append(pair_fragment(ex.pair))
        body.append(pair_fragment(ex.pair_value_zeroing))
    data = json.dumps(d, ensure_ascii=False).replace("</", "<\\/")
    return (f'<div class="qkv" id="{rid}"><style>{CSS}</style>{"".join(body)}'
            f'<script type="application/json" class="qkv-data">{data}</script>'
            f"<script>{JS.replace('ROOT', json.dumps(rid), 1)}</script></div>")


@renders(Explanation, "page")
def report_page(ex) -> str:
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>qkv explain · {esc(ex.text[:80])}</title></head><body>{report_fragment(ex)}</body></html>")


def index_page(entries: list[dict], model: str) -> str:
    """Batch index: one row per title with its top selling points and a link to its report."""
    rows = "".join(
        f"<tr><td>{e['n']}</td><td class='l'><a href='{esc(e['href'])}'>{esc(e['text'])}</a></td>"
        f"<td class='l'>{esc(', '.join(e['top']))}</td><td>{e['tokens']}</td></tr>" for e in entries)
    inner = (f"<h1>qkv explain · {len(entries)} titles</h1><p class='muted'>{esc(model)}</p>"
             "<table><tr><th>#</th><th class='l'>title</th><th class='l'>selling points</th><th>tokens</th></tr>"
             + rows + "</table>")
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>qkv explain · index</title></head>"
            f"<body>{_wrap(inner)}</body></html>")
