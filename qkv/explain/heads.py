"""What each head mostly does, measured over a set of texts: the numbers behind the tour's default.

For every layer and head, averaged over the content (non-special) query tokens of every text:
  special   weight on [CLS]/[SEP]           self      weight on the token itself
  previous  weight on the token before it   next      weight on the token after it
  entropy   row entropy / log(n) (0 = one token, 1 = uniform)
  far_peak  the largest weight on one other content token that is not a neighbour (|i−j| > 1):
            how clearly a word picks out another word of the title, which is what the tour's
            step 5 ("token i mainly attends to j") wants to show.

``level="word"`` measures the same on word-level maps (``merge_attention``: pieces summed as keys,
averaged as queries; Chinese runs cut by the segmenter): neighbours are then neighbouring words.
That is the fair measure for a SentencePiece model, whose bare "▁" word-start pieces would
otherwise count as tokens of their own (multilingual-e5-small's default head was chosen this way).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STATS = ("special", "self", "previous", "next", "entropy", "far_peak")


@dataclass(frozen=True)
class HeadProfile:
    stats: dict[str, np.ndarray]  # name -> [layers, heads]
    n_texts: int

    def best(self, stat: str = "far_peak") -> tuple[int, int]:
        a = self.stats[stat]
        layer, head = np.unravel_index(int(np.argmax(a)), a.shape)
        return int(layer), int(head)

    def to_dict(self) -> dict:
        return {"n_texts": self.n_texts, **{k: np.round(v, 4).tolist() for k, v in self.stats.items()}}


def head_profile(enc, texts, level: str = "token", progress=None) -> HeadProfile:
    """``progress``: ``qkv.progress`` callback, stage "heads", counted in texts."""
    from qkv.explain.words import merge_attention
    from qkv.progress import Count

    if level not in ("token", "word"):
        raise ValueError(f"level must be 'token' or 'word', not {level!r}")
    texts = list(texts)
    nl, nh = enc.config.num_layers, enc.config.num_heads
    acc = {k: np.zeros((nl, nh)) for k in STATS}
    used = 0
    count = Count(progress, "heads", len(texts))
    for t in texts:
        count.add(1)
        tr = enc.trace([t], keep=["layers.*.attn.weights"])
        w = tr.stack("attn.weights", 0).astype(np.float64)  # [L, H, n, n]
        sp = np.asarray(tr.seqs[0].special)
        if level == "word":
            words = tr.seqs[0].words(segment=True)
            w = merge_attention(w, words)
            sp = np.asarray([x.special for x in words])
        n, c = len(sp), ~sp
        if c.sum() < 3:
            continue
        idx = np.arange(n)
        wc = w[:, :, c]  # content query rows
        acc["special"] += wc[..., sp].sum(-1).mean(-1)
        acc["self"] += w[:, :, idx, idx][:, :, c].mean(-1)
        prev = np.where(idx > 0, idx - 1, 0)
        nxt = np.where(idx < n - 1, idx + 1, n - 1)
        acc["previous"] += w[:, :, idx, prev][:, :, c].mean(-1)
        acc["next"] += w[:, :, idx, nxt][:, :, c].mean(-1)
        acc["entropy"] += (-(wc * np.log(wc + 1e-12)).sum(-1)).mean(-1) / np.log(n)
        far = (np.abs(idx[:, None] - idx[None, :]) > 1) & c[None, :]
        acc["far_peak"] += (w * far).max(-1)[:, :, c].mean(-1)
        used += 1
    return HeadProfile({k: v / max(used, 1) for k, v in acc.items()}, used)
