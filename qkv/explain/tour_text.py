"""The tour's explanations, in English and Chinese, filled in with the tour's own numbers.

Each step is plain data (id, title, text, and the names of the arrays it shows) so the CLI, the web
page and a notebook tell the same story.
"""

from __future__ import annotations

import math

import numpy as np

LANGS = ("en", "zh")
LACKS_SCRIPT = 0.2  # share of content tokens that are unknown from which a model "lacks the script"


def _fmt_attends(t, i: int, lang: str) -> str:
    parts = [f"{t.labels[j]} ({w:.2f})" for j, w in t.attends(i, 2)]
    return ("、" if lang == "zh" else ", ").join(parts)


def _fmt_word_attends(t, i: int, lang: str) -> str:
    parts = [f"{t.words[j].text} ({w:.2f})" for j, w in t.word_attends(i, 2)]
    return ("、" if lang == "zh" else ", ").join(parts)


def notes(t, lang: str = "en") -> list[str]:
    """Remarks about the input, judged by the model's own tokenizer (not by the text's language):
    a warning when the model lacks the text's script (at least ``LACKS_SCRIPT`` of the content
    tokens are its unknown token), a short note for a few unknown characters, nothing otherwise."""
    out = []
    n, k, chars = t.n_content, t.n_unknown, t.unknown_chars
    shown = chars if len(chars) <= 12 else chars[:12] + "…"
    if t.lacks_script:
        han = t.n_cjk > 0 and any(_han(c) for c in chars)
        out.append({"en": f"This model lacks the script of this text: {k} of its {n} content tokens are the unknown "
                          f"token ({k / n:.0%}, at least {LACKS_SCRIPT:.0%} counts as lacking), standing for "
                          f"{shown}. Unknown tokens all share one vector, so they differ only by position. "
                          + ("A multilingual model sees Chinese as real pieces: --model multilingual-e5-small."
                             if han else "A model whose vocabulary has these characters would see them."),
                    "zh": f"这个模型缺少这段文字的字符：{n} 个内容词元中有 {k} 个是未知词元（{k / n:.0%}，"
                          f"达到 {LACKS_SCRIPT:.0%} 即视为缺少），代表 {shown}。未知词元共用同一个向量，彼此只有位置不同。"
                          + ("多语言模型能把中文切成真正的词片：--model multilingual-e5-small。"
                             if han else "请换用词表里有这些字符的模型。")}[lang])
    elif k:
        out.append({"en": f"{k} token(s) are the model's unknown token, standing for {shown}: characters outside its "
                          "vocabulary (emoji, rare symbols); the rest of the text is read as real pieces.",
                    "zh": f"有 {k} 个词元是未知词元，代表 {shown}：模型词表之外的字符（表情符号、罕见符号）；"
                          "其余文字都是真正的词片。"}[lang])
    return out


def _han(c: str) -> bool:
    from qkv.text.zh import has_han

    return has_han(c)


def question(t, lang: str = "en") -> str | None:
    """The tour's question, answered from the real weights of every head of the layer."""
    a = t.answer()
    if a is None:
        return None
    per = a["per_head"]
    lo, hi = min(per), max(per)
    if lang == "zh":
        return (f"问题：{a['from']} 对 {a['to']} 的关注有多少？第 {t.layer} 层第 {t.head} 个头：{a['weight']:.3f}"
                f"（在 {a['from']} 这一行的 {a['of']} 个词里排第 {a['rank']}；这一行有 {a['special']:.2f} 给了特殊词元；"
                f"均匀分配是 {a['uniform']:.3f}）。本层 {len(per)} 个头从 "
                f"{lo:.3f} 到 {hi:.3f}，最高是第 {a['top_head']} 个头。词级：{a['from']} 各词片的行取平均，"
                f"{a['to']} 各词片的列相加，所以每行仍然和为 1。")
    return (f"Question: how much does {a['from']} attend to {a['to']}? Layer {t.layer}, head {t.head}: "
            f"{a['weight']:.3f} (rank {a['rank']} of the {a['of']} words in {a['from']}'s row, which gives "
            f"{a['special']:.2f} to the special tokens; uniform would be {a['uniform']:.3f}). Across the layer's {len(per)} heads it runs from {lo:.3f} to {hi:.3f}, highest "
            f"in head {a['top_head']}. Word level: the rows of {a['from']}'s pieces averaged, the columns of "
            f"{a['to']}'s pieces summed, so each row still sums to 1.")


def steps(t, lang: str = "en") -> list[dict]:
    if lang not in LANGS:
        from qkv.errors import InputError

        raise InputError(f"language {lang!r} is not available; choose one of {', '.join(LANGS)}")
    zh = lang == "zh"
    L, h, d, n, nh = t.layer, t.head, t.d_k, len(t.tokens), t.num_heads
    H = t.x.shape[1]
    sp = t.spread()
    where = "the embeddings (word + position + type vectors, normalised)" if L == 0 else f"the output of layer {L - 1}"
    where_zh = "嵌入向量（词向量 + 位置向量 + 类型向量，再做归一化）" if L == 0 else f"第 {L - 1} 层的输出"
    rs = t.weights.sum(axis=1)
    sp_mask = np.asarray(t.special)
    content = ~sp_mask
    share = float(t.weights[content][:, sp_mask].sum(axis=1).mean()) if content.any() and sp_mask.any() else 0.0
    sp_names = "/".join(dict.fromkeys(lab for lab, x in zip(t.labels, t.special) if x)) or "[CLS]/[SEP]"
    special_note = (f"这个头平均把 {share:.0%} 的权重给了 {sp_names}：BERT 类模型的许多头把它们当作“无事可做”时的停靠点"
                    f"（Clark 等 2019）。这些词元的值向量往往很小，所以实际传递的信息更少——见 qkv explain 的范数加权图。"
                    if zh else
                    f"This head gives {share:.0%} of a content token's weight to {sp_names} on average: many heads of "
                    f"BERT-family models park attention there when they have nothing to do (Clark et al. 2019). "
                    "Those tokens' value vectors tend to be small, so less moves than the weights suggest — see the "
                    "norm-weighted maps of `qkv explain`.")
    sp_list = list(dict.fromkeys(lab for lab, x in zip(t.labels, t.special) if x)) or ["[CLS]", "[SEP]"]
    sp_en, sp_zh = " and ".join(sp_list), " 和 ".join(sp_list)
    out = [
        {"id": "tokens", "arrays": [t.x_name],
         "title": "1 · 词元与输入向量 X" if zh else "1 · Tokens and the input vectors X",
         "text": (f"文本被切成 {n} 个词元（含 {sp_zh}）。进入第 {L} 层的是{where_zh}：矩阵 X，形状 {n}×{H}，"
                  f"每个词元一行。" if zh else
                  f"The text becomes {n} tokens ({sp_en} included). Entering layer {L} is {where}: "
                  f"a matrix X of shape {n}×{H}, one row per token.")},
        {"id": "project", "arrays": [f"layers.{L}.attn.q", f"layers.{L}.attn.k", f"layers.{L}.attn.v"],
         "title": f"2 · 投影：Q = X·Wq, K = X·Wk, V = X·Wv（第 {h} 个头）" if zh else
                  f"2 · Project: Q = X·Wq, K = X·Wk, V = X·Wv (head {h})",
         "text": (f"第 {h} 个头有自己的 Wq、Wk、Wv（各 {H}×{d}，加偏置）。每个词元的行向量乘上它们，得到查询 q（我在找什么）、"
                  f"键 k（我能提供什么）和值 v（我要传递的内容），各 {d} 维：Q、K、V 都是 {n}×{d}。" if zh else
                  f"Head {h} has its own Wq, Wk, Wv ({H}×{d} each, plus a bias). Every token's row is multiplied by "
                  f"them: a query q (what am I looking for), a key k (what do I offer) and a value v (what I pass "
                  f"on), {d} numbers each. Q, K and V are {n}×{d}.")
                 + (("这个模型的 4 位权重乘法先把 X 的每 32 个数按一个比例四舍五入成 int8（没有 AMX 的 CPU 上），"
                     "引擎乘的是这样取整后的 X，本导览也一样。" if zh else
                     " This model's 4-bit products first round X to int8, 32 numbers to a scale (on CPUs without "
                     "AMX tiles): the engine multiplies that rounded X, and so does this tour.") if t.x_rounded else "")},
        {"id": "scores", "arrays": [f"layers.{L}.attn.scores"],
         "title": "3 · 打分：S = Q·Kᵀ" if zh else "3 · Score: S = Q·Kᵀ",
         "text": (f"每个查询与每个键做点积：S[i, j] = q_i·k_j，{n}×{n} 的矩阵，行是“看”的词元，列是“被看”的词元。"
                  f"数值越大，两者越匹配。本例分数范围 {sp['before']['min']:.1f} 到 {sp['before']['max']:.1f}。" if zh else
                  f"Each query is dotted with each key: S[i, j] = q_i·k_j, a {n}×{n} matrix; rows are the tokens "
                  f"that look, columns the tokens looked at. Larger means a better match. Here the scores run from "
                  f"{sp['before']['min']:.1f} to {sp['before']['max']:.1f}.")},
        {"id": "scale", "arrays": [f"layers.{L}.attn.scaled_scores"],
         "title": f"4 · 缩放：除以 √d_k = √{d} = {math.sqrt(d):.2f}" if zh else
                  f"4 · Scale: divide by √d_k = √{d} = {math.sqrt(d):.2f}",
         "text": (f"{d} 维向量的点积，方差随维数增长；不缩放的话 softmax 会几乎变成独热，梯度消失（Vaswani 等 2017）。"
                  f"每行分数的标准差：缩放前 {sp['before']['std']:.2f}，缩放后 {sp['after']['std']:.2f}。"
                  f"每行最大权重的平均值：不缩放时会是 {sp['top_weight_without_scaling']:.2f}，缩放后是 "
                  f"{sp['top_weight_with_scaling']:.2f}。" if zh else
                  f"Dot products of {d}-dimensional vectors grow in spread with the dimension; unscaled, softmax "
                  f"turns nearly one-hot and its gradients vanish (Vaswani et al. 2017). The std of a row's scores: "
                  f"{sp['before']['std']:.2f} before, {sp['after']['std']:.2f} after. The mean largest weight of a "
                  f"row would be {sp['top_weight_without_scaling']:.2f} without scaling; with it, "
                  f"{sp['top_weight_with_scaling']:.2f}.")},
        {"id": "softmax", "arrays": [f"layers.{L}.attn.weights", f"layers.{L}.attn.context"],
         "title": "5 · Softmax 与加权求和" if zh else "5 · Softmax, then the weighted sum of V",
         "text": (f"每一行做 softmax：全部为正、每行和为 1（本例各行和与 1 的差不超过 {np.abs(rs - 1).max():.0e}）。"
                  f"输出第 i 行 = Σ_j 权重[i, j]·v_j，{n}×{d}。" if zh else
                  f"Softmax turns each row into positive weights summing to 1 (here every row sums to 1 within "
                  f"{np.abs(rs - 1).max():.0e}). Output row i = Σ_j weights[i, j]·v_j, {n}×{d}."),
         "special_note": special_note,
         "attends": [(f"{t.labels[i]} 主要关注 {_fmt_attends(t, i, lang)}" if zh else
                      f"{t.labels[i]} mainly attends to {_fmt_attends(t, i, lang)}") for i in range(n)],
         "word_attends": [(f"{w.text} 主要关注 {_fmt_word_attends(t, i, lang)}" if zh else
                           f"{w.text} mainly attends to {_fmt_word_attends(t, i, lang)}")
                          for i, w in enumerate(t.words) if not w.special],
         "question": question(t, lang), "answer": t.answer()},
        {"id": "heads", "arrays": [f"layers.{L}.attn.context", f"layers.{L}.attn.out"],
         "title": "多头：拼接并投影" if zh else "Many heads: concatenate and project",
         "text": (f"这一层的 {nh} 个头各自做同样的五步，各得 {n}×{d}；拼接成 {n}×{nh * d}，再乘 W_o（{H}×{H}）加偏置，"
                  f"得到 attn.out（{n}×{H}），随后加上残差 X 并做 LayerNorm。" if zh else
                  f"All {nh} heads of the layer do the same five steps, each giving {n}×{d}; concatenated they are "
                  f"{n}×{nh * d}, multiplied by W_o ({H}×{H}) plus a bias: attn.out ({n}×{H}), which is then added "
                  "to X (the residual) and layer-normalised.")},
        {"id": "check", "arrays": [c.name for c in t.checks],
         "title": "核对：手算 = 引擎的追踪" if zh else "Check: by hand = the engine's trace",
         "text": ((f"以上全部由 X 和第 {L} 层的权重手算得出。与引擎自己记录的第 {L} 层中间结果相比，"
                   + ("全部一致（最大差异见下表）。" if t.ok else "有不一致！"))
                  if zh else
                  (f"Everything above was computed by hand from X and layer {L}'s weights. Against the engine's "
                   f"own trace of layer {L}: " + ("all equal (largest differences below)." if t.ok
                                                   else "MISMATCH (see below)."))),
         "ok": t.ok},
    ]
    return out
