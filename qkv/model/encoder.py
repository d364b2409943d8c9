"""A BERT-family encoder in NumPy: embeddings → layers → pooling.

Each layer is the tutorial's attention followed by a feed-forward block (post-LayerNorm, as BERT):

    A = LayerNorm(X + MultiHead(X)·Wo)
    Y = LayerNorm(A + GELU(A·W1)·W2)

The forward pass works on the whole batch as [batch·len, hidden] matrices so the time goes into
a few large matrix products; element-wise steps run in place to avoid extra passes over memory.
Intermediates are copied out only when a trace asks for them (see ``qkv.model.trace``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkv import kernels
from qkv.attention import chunked_attention
from qkv.errors import InputError
from qkv.kernels import add_layer_norm, bias_gelu, layer_norm
from qkv.model.config import ModelConfig
from qkv.model.hub import resolve
from qkv.model.threads import blas_threads, default_threads
from qkv.model.tokenizer import Tokenizer, Tokens
from qkv.model.trace import Selector, Trace
from qkv.model.weights import EncoderWeights, load_weights


# Sequence length from which attention runs tile by tile (per text and head, cache-resident)
# rather than on whole [batch, heads, L, L] arrays; below it the batched form has less overhead.
TILED_FROM = 64
# Skip padding rows when nothing inside attention is traced (see Encoder.forward); False computes
# them as the reference implementations do (for comparisons).
PACK_PADDING = True
# The products x·W run, with the compiled kernels, in qkv.kernels.gemm on a copy of the weights
# packed into column panels on first use (all-MiniLM-L6-v2: 42 MB, kept while the encoder lives),
# bias and GELU applied tile by tile: faster than OpenBLAS on all four of the model's product
# shapes for a reviews batch, and for a lone query (~9 tokens: forward 4.0 ms against 5.3 in the
# few-row panel product and 11.7 through OpenBLAS); figures in docs/engine.md. At more than one
# thread a product's rows are split between the encoder's threads. Up to FEW_ROWS rows, ``precision="float16"``
# reads float16 panels in qkv.kernels.panel_matmul (half the bytes: 3.1 ms per query). Without
# the compiled kernels, BLAS: for a few rows as (Wᵀ·xᵀ)ᵀ on a transposed copy, the shape OpenBLAS
# takes fastest.
FEW_ROWS = 32
PRECISIONS = ("float32", "float16")  # of the weights a few-row product reads (see Encoder.encode)


class Workspace:
    """Scratch arrays reused across the layers and batches of one call. A large fresh array costs
    page faults on first touch (glibc maps big blocks and unmaps them when freed); reusing them
    was measured at about 7% of a forward pass over 8×256-token reviews."""

    def __init__(self):
        self._bufs: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple, dtype) -> np.ndarray:
        n = math.prod(shape)
        buf = self._bufs.get(name)
        if buf is None or buf.size < n or buf.dtype != dtype:
            buf = self._bufs[name] = kernels.aligned_empty(max(n, 1), dtype)  # see aligned_empty
        return buf[:n].reshape(shape)


@dataclass
class _Batch:
    ids: np.ndarray  # [B, L] int64
    mask: np.ndarray  # [B, L] bool


class Encoder:
    """A pretrained BERT-family encoder with every intermediate available by name.

    >>> enc = Encoder.load()                      # all-MiniLM-L6-v2, shipped in a package
    >>> enc.encode(["red running shoes"]).shape   # (1, 384)
    >>> tr = enc.trace(["red running shoes"], keep=["layers.*.attn.weights"])
    >>> tr["layers.0.attn.weights"].shape         # (1, 12, 5, 5)
    """

    def __init__(self, config: ModelConfig, weights: EncoderWeights, tokenizer: Tokenizer,
                 name: str = "", path: Path | None = None, threads: int | None = None):
        self.config = config
        self.weights = weights
        self.tokenizer = tokenizer
        self.name = name
        self.path = path
        self.threads = default_threads() if threads is None else max(1, int(threads))
        self.dtype = weights.word.dtype
        self._scale = self.dtype.type(1.0 / math.sqrt(config.head_dim))
        self._packed: dict[tuple, np.ndarray] = {}  # (id(weight), dtype) -> its layout for the products (_layout)
        self._workers = None  # threads - 1 worker threads, started on first use

    @classmethod
    def load(cls, name: str | Path | None = None, *, threads: int | None = None) -> "Encoder":
        """Load a model by local path, packaged name or hub id (see ``qkv.model.hub``)."""
        canonical, path = resolve(name)
        config = ModelConfig.from_dir(path)
        tokenizer = Tokenizer(path / "tokenizer.json")
        weights = load_weights(path / "model.safetensors", config)
        return cls(config, weights, tokenizer, name=canonical, path=path, threads=threads)

    # ------------------------------------------------------------------ identity
    @property
    def dim(self) -> int:
        return self.config.hidden_size

    def fingerprint(self) -> str:
        """A short hash of the weights file: indexes and attribute models record it."""
        import hashlib

        if self.path is None or not (self.path / "model.safetensors").is_file():
            return "unknown"
        h = hashlib.sha256()
        with open(self.path / "model.safetensors", "rb") as f:
            h.update(f.read(1 << 20))
            f.seek(0, 2)
            h.update(str(f.tell()).encode())
        return h.hexdigest()[:16]

    def astype(self, dtype) -> "Encoder":
        """The same model computing in ``dtype``: float64 gives reference-precision traces (about
        twice as slow), against which float32 rounding can be judged."""
        return Encoder(self.config, self.weights.astype(dtype), self.tokenizer, self.name, self.path, self.threads)

    # ------------------------------------------------------------------ tokens
    def tokenize(self, texts, *, truncate: bool = False) -> list[Tokens]:
        """Tokens with special tokens. Texts longer than the model allows are refused unless
        ``truncate`` (cut, with a warning)."""
        texts = Tokenizer._check(texts)
        limit = self.config.max_tokens
        out = []
        for text, enc in zip(texts, self.tokenizer.content(texts)):
            n = len(enc.ids) + self.tokenizer.n_special
            if n > limit:
                if not truncate:
                    raise InputError(f"text {len(out)} has {n} tokens, more than this model's limit of {limit}; "
                                     "pass truncate=True (--truncate) to cut it, or shorten it")
                warnings.warn(f"text {len(out)} cut from {n} to {limit} tokens", stacklevel=3)
                out.append(self.tokenizer.wrap(text, enc, 0, limit - self.tokenizer.n_special))
            else:
                out.append(self.tokenizer.wrap(text, enc))
        return out

    def _windows(self, text: str, enc) -> list[Tokens]:
        """Overlapping windows (half a window apart) covering a long text; see ``encode``."""
        width = self.config.window_tokens - self.tokenizer.n_special
        n = len(enc.ids)
        if n <= width:
            return [self.tokenizer.wrap(text, enc)]
        stride = max(1, width // 2)
        starts = list(range(0, n - width, stride)) + [n - width]
        return [self.tokenizer.wrap(text, enc, s, s + width) for s in starts]

    # ------------------------------------------------------------------ forward
    def _pad(self, items: list[Tokens]) -> _Batch:
        length = max(len(t) for t in items)
        ids = np.full((len(items), length), self.config.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(items), length), dtype=bool)
        for r, t in enumerate(items):
            ids[r, :len(t)] = t.ids
            mask[r, :len(t)] = True
        return _Batch(ids, mask)

    def forward(self, ids: np.ndarray, mask: np.ndarray, keep: Selector | None = None,
                store: dict | None = None, *, upto: int | None = None,
                workspace: Workspace | None = None, precision: str = "float32") -> np.ndarray:
        """Hidden states [B, L, H] for token ids [B, L] with padding mask [B, L] (True = real).
        Intermediates named in ``keep`` are copied into ``store``. ``upto``: run only the first
        ``upto`` layers (callers that read middle layers need not pay for the rest). ``workspace``:
        scratch arrays to reuse across calls (one per thread). ``precision``: see ``encode``.

        Padding rows carry no meaning. When nothing inside attention is traced and the compiled
        kernels are in use, they are not computed at all: the real tokens of every text are packed
        into one [tokens, hidden] matrix for the row-wise steps (projections, LayerNorm, the
        feed-forward block), and attention runs text by text on each text's own rows."""
        cfg, w = self.config, self.weights
        ws = Workspace() if workspace is None else workspace
        if precision not in PRECISIONS:
            raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        half = precision == "float16"
        B, L = ids.shape
        H, nh, d = cfg.hidden_size, cfg.num_heads, cfg.head_dim
        keep = keep if keep else None
        if L > cfg.max_tokens:
            raise InputError(f"sequence of {L} tokens exceeds the model's {cfg.max_tokens}")

        if cfg.position_offset:  # RoBERTa: positions count real tokens, after the padding index
            pos = np.cumsum(mask, axis=1) * mask + cfg.pad_token_id
        else:
            pos = np.arange(L)[None, :]
        x = w.word[ids]
        x += w.position[pos]
        x += w.token_type[0]
        x = x.reshape(B * L, H)

        # The compiled softmax takes each text's length: it needs the real tokens first (right padding).
        lens = mask.sum(axis=1)
        if not (kernels.available() and self.dtype == np.float32
                and np.array_equal(mask, np.arange(L)[None, :] < lens[:, None])):
            lens = None
        row_wise = keep is None or all(n == "embeddings" or n.endswith((".out", ".norm", ".hidden"))
                                       for n in keep.names)
        packed = PACK_PADDING and lens is not None and row_wise and not mask.all()
        flat = np.flatnonzero(mask.ravel()) if packed else None
        if packed:
            x = x[flat]
        R = x.shape[0]  # rows the row-wise steps run on: real tokens only when packed

        def emit(name: str, a: np.ndarray) -> None:
            """Copy a [R, width] intermediate into the store as [B, L, width]."""
            if flat is None:
                store[name] = a.reshape(B, L, -1).copy()
            else:
                full = np.zeros((B * L, a.shape[-1]), dtype=a.dtype)
                full[flat] = a
                store[name] = full.reshape(B, L, -1)

        x = layer_norm(x, w.emb_ln_g, w.emb_ln_b, cfg.layer_norm_eps)
        if keep and "embeddings" in keep:
            emit("embeddings", x)

        # Padding keys get -inf before the softmax, so their weight is exactly 0.
        pad_bias = None
        if not mask.all():
            pad_bias = np.where(mask, 0, -np.inf).astype(self.dtype)[:, None, None, :]
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]) if packed else None
        if packed and L < TILED_FROM:  # short texts attend all at once, on a padded copy of Q|K|V
            padded_qkv = ws.get("qkv_padded", (B * L, 3 * H), self.dtype)
            padded_qkv[~mask.ravel()] = 0

        for i, lw in enumerate(w.layers[:upto]):
            want = (lambda n: False) if keep is None else (lambda n, i=i: f"layers.{i}.{n}" in keep)
            # 1. project: one fused product gives Q | K | V for every token.
            qkv = self._dense(x, lw.w_qkv, ws.get("qkv", (R, 3 * H), self.dtype), ws, lw.b_qkv, half)
            if packed:
                ctx = ws.get("ctx", (R, nh, d), self.dtype)
                if L < TILED_FROM:
                    padded_qkv[flat] = qkv
                    padded_ctx = ws.get("ctx_padded", (B, L, nh, d), self.dtype)
                    self._attend_fused(padded_qkv, B, L, lens, padded_ctx, ws)
                    ctx.reshape(R, H)[:] = padded_ctx.reshape(B * L, H)[flat]
                else:
                    spans = [slice(int(starts[b]), int(starts[b] + lens[b])) for b in range(B)]
                    self._attend_texts([(qkv[r], ctx.reshape(R, H)[r]) for r in spans], L, ws)
            else:
                heads = qkv.reshape(B, L, 3, nh, d).transpose(2, 0, 3, 1, 4)  # [3, B, nh, L, d], a view
                q, k, v = heads[0], heads[1], heads[2]
                for n, a in (("attn.q", q), ("attn.k", k), ("attn.v", v)):
                    if want(n):
                        store[f"layers.{i}.{n}"] = a.copy()
                ctx = ws.get("ctx", (B, L, nh, d), self.dtype)  # heads' outputs, already merged
                traced = want("attn.scores") or want("attn.scaled_scores") or want("attn.weights")
                if not traced and lens is not None:
                    self._attend_fused(qkv, B, L, lens, ctx, ws)
                elif not traced and L >= TILED_FROM:
                    # steps 2-5 tile by tile, one (text, head) at a time: see qkv.attention.chunked_attention
                    chunked_attention(q, k, v, mask=None if pad_bias is None else mask[:, None, None, :],
                                      scale=self._scale, out=ctx.transpose(0, 2, 1, 3))
                else:
                    # 2. score: Q·Kᵀ, all heads and texts at once
                    s = q @ k.transpose(0, 1, 3, 2)
                    if want("attn.scores"):
                        store[f"layers.{i}.attn.scores"] = s.copy()
                    s *= self._scale  # 3. scale by 1/√d
                    if pad_bias is not None:
                        s += pad_bias
                    if want("attn.scaled_scores"):
                        store[f"layers.{i}.attn.scaled_scores"] = s.copy()
                    # 4. softmax each row (in place; no row is fully masked: [CLS] is always real)
                    s -= s.max(axis=-1, keepdims=True)
                    np.exp(s, out=s)
                    s /= s.sum(axis=-1, keepdims=True)
                    if want("attn.weights"):
                        store[f"layers.{i}.attn.weights"] = s.copy()
                    # 5. weighted sum of V, written straight into the merged-heads layout [B, L, nh, d]
                    np.matmul(s, v, out=ctx.transpose(0, 2, 1, 3))
                if want("attn.context"):
                    store[f"layers.{i}.attn.context"] = ctx.transpose(0, 2, 1, 3).copy()
            # heads concatenated, projected, added to the input, normalised
            # (x never lives in "a" when it is written: x is the embeddings or the last layer's "f")
            a = self._dense(ctx.reshape(R, H), lw.w_o, ws.get("a", (R, H), self.dtype), ws, None, half)
            if want("attn.out"):
                a += lw.b_o
                emit(f"layers.{i}.attn.out", a)
                x = add_layer_norm(a, x, None, lw.ln1_g, lw.ln1_b, cfg.layer_norm_eps)
            else:
                x = add_layer_norm(a, x, lw.b_o, lw.ln1_g, lw.ln1_b, cfg.layer_norm_eps)
            if want("attn.norm"):
                emit(f"layers.{i}.attn.norm", x)
            # feed-forward
            h = self._dense(x, lw.w_in, ws.get("h", (R, cfg.intermediate_size), self.dtype), ws, lw.b_in, half,
                            act=cfg.hidden_act)
            if want("ffn.hidden"):
                emit(f"layers.{i}.ffn.hidden", h)
            f = self._dense(h, lw.w_out, ws.get("f", (R, H), self.dtype), ws, None, half)
            if want("ffn.out"):
                f += lw.b_out
                emit(f"layers.{i}.ffn.out", f)
                x = add_layer_norm(f, x, None, lw.ln2_g, lw.ln2_b, cfg.layer_norm_eps)
            else:
                x = add_layer_norm(f, x, lw.b_out, lw.ln2_g, lw.ln2_b, cfg.layer_norm_eps)
            if want("out"):
                emit(f"layers.{i}.out", x)
        if flat is None:
            return x.reshape(B, L, H).copy()  # x is a workspace array
        out = np.zeros((B * L, H), dtype=self.dtype)
        out[flat] = x
        return out.reshape(B, L, H)

    def _layout(self, w: np.ndarray, dtype) -> np.ndarray:
        """W as the compiled products read it (panels [N / 32, K, 32] of ``dtype``), or, when
        they cannot (no compiled kernels, or N not whole panels) or ``dtype`` is None, Wᵀ for
        BLAS; made on first use and kept while the encoder lives."""
        compiled = dtype is not None and kernels.available() and self.dtype == np.float32
        key = (id(w), dtype if compiled else None)
        packed = self._packed.get(key)
        if packed is None:
            packed = kernels.pack_panels(w, dtype) if compiled else None
            if packed is None:
                packed = np.ascontiguousarray(w.T)
            self._packed[key] = packed
        return packed

    def _dense(self, x: np.ndarray, w: np.ndarray, out: np.ndarray, ws: Workspace,
               bias: np.ndarray | None = None, half: bool = False, act: str | None = None) -> np.ndarray:
        """x·W + bias, then the activation ``act`` if given, into ``out``. With the compiled
        kernels: the blocked product (bias and GELU applied tile by tile), its rows shared out
        between the encoder's threads, or float16 panels for a few rows if ``half``; without
        them, BLAS."""
        R = x.shape[0]
        compiled = kernels.available() and self.dtype == np.float32
        few = R <= FEW_ROWS
        if compiled:
            packed = self._layout(w, np.float16 if half and few else np.float32)
            if packed.ndim == 3 and packed.dtype == np.float16:
                kernels.panel_matmul(np.ascontiguousarray(x), packed, None if act else bias, out)
                if not act:
                    return out
            elif packed.ndim == 3 and act in (None, "gelu"):
                x = np.ascontiguousarray(x)
                cuts = _row_cuts(R, self.threads)
                self._in_parallel(lambda g: kernels.gemm(x[cuts[g]:cuts[g + 1]], packed, bias,
                                                         out[cuts[g]:cuts[g + 1]], gelu=act == "gelu"),
                                  len(cuts) - 1)
                return out
            else:
                np.matmul(x, w, out=out)
        elif few:  # BLAS on Wᵀ, the shape OpenBLAS takes fastest for a few rows
            wt = self._layout(w, None)
            out[:] = np.matmul(wt, x.T, out=ws.get("dense_t", (w.shape[1], R), self.dtype)).T
        else:
            np.matmul(x, w, out=out)
        if act is not None:
            return bias_gelu(out, np.zeros(out.shape[1], out.dtype) if bias is None else bias, act)
        if bias is not None:
            out += bias
        return out

    def _attend_fused(self, qkv, B: int, L: int, lens, ctx, ws: Workspace) -> None:
        """Steps 2-5 when nothing in them is traced, with the compiled kernels. qkv: [B·L, 3H],
        texts of L rows each, the first lens[b] of them real; ctx: [B, L, heads, d].

        Short texts (L < TILED_FROM): all at once, with the compiled masked softmax (scale, mask,
        max, exp, sum and division in one pass). Longer ones: text by text, cut to its own length
        so padding costs nothing, in the fused kernel that keeps each block's scores in L1
        (``kernels.attention_text``)."""
        nh, d = self.config.num_heads, self.config.head_dim
        if L < TILED_FROM:
            q, k, v = qkv.reshape(B, L, 3, nh, d).transpose(2, 0, 3, 1, 4)
            s = np.matmul(q, k.transpose(0, 1, 3, 2), out=ws.get("scores", (B, nh, L, L), self.dtype))
            kernels.softmax_rows(s, float(self._scale), lens)
            np.matmul(s, v, out=ctx.transpose(0, 2, 1, 3))
            return
        pairs = []
        for b in range(B):
            n = int(lens[b])
            ctx[b, n:] = 0
            pairs.append((qkv[b * L:b * L + n], ctx[b, :n].reshape(n, nh * d)))
        self._attend_texts(pairs, L, ws)

    def _attend_texts(self, pairs, L: int, ws: Workspace) -> None:
        """Steps 2-5 for each (Q|K|V rows, context rows) pair of one text each, in the fused
        kernel; at more than one thread the texts are dealt out by their cost (length²), each
        thread with its own scratch (the kernel releases the GIL)."""
        nh, d = self.config.num_heads, self.config.head_dim
        need = (kernels.attention_work(L, d, d),)
        groups = _deal([len(q) ** 2 for q, _ in pairs], self.threads)

        def run(g: int) -> None:
            work = ws.get(f"attn_work{g}", need, np.float32)
            for i in groups[g]:
                kernels.attention_text(pairs[i][0], nh, float(self._scale), pairs[i][1], work)

        self._in_parallel(run, len(groups))

    def _in_parallel(self, fn, n: int) -> None:
        """fn(0) … fn(n - 1), fn(0) on this thread and the rest on the encoder's worker threads."""
        if n <= 1:
            if n:
                fn(0)
            return
        if self._workers is None:
            from concurrent.futures import ThreadPoolExecutor

            self._workers = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="qkv-encoder")
        futures = [self._workers.submit(fn, g) for g in range(1, n)]
        fn(0)
        for f in futures:
            f.result()

    # ------------------------------------------------------------------ pooling
    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Un-normalised sentence vectors [B, H] by the model's pooling rule."""
        if self.config.pooling == "cls":
            return hidden[:, 0].copy()
        if self.config.pooling == "max":
            return np.where(mask[..., None], hidden, -np.inf).max(axis=1)
        m = mask.astype(np.float32)
        return np.einsum("bl,blh->bh", m, hidden) / np.maximum(m.sum(axis=1, keepdims=True), 1e-9)

    def _batches(self, items: list[Tokens], batch_size: int, max_batch_tokens: int = 16384):
        """Indices grouped into batches of similar length (sorted), so padding is small."""
        order = sorted(range(len(items)), key=lambda j: len(items[j]))
        batch: list[int] = []
        for j in order:
            if batch and (len(batch) >= batch_size or len(items[j]) * (len(batch) + 1) > max_batch_tokens):
                yield batch
                batch = []
            batch.append(j)
        if batch:
            yield batch

    def _run(self, items: list[Tokens], batch_size: int, progress, fn, keep: Selector | None = None,
             upto: int | None = None, precision: str = "float32"):
        """Run ``fn(batch_indices, hidden, mask, store)`` over length-bucketed batches; ``store``
        holds the intermediates ``keep`` names."""
        if batch_size < 1:
            raise InputError("batch_size must be at least 1")
        ws = Workspace()  # one per call: reused by every batch, freed when the call ends
        with blas_threads(self.threads):
            for idx in self._batches(items, batch_size):
                b = self._pad([items[j] for j in idx])
                store: dict = {}
                hidden = self.forward(b.ids, b.mask, keep, store, upto=upto, workspace=ws, precision=precision)
                fn(idx, hidden, b.mask, store)
                if progress is not None:
                    progress(len(idx))

    def encode(self, texts, *, batch_size: int = 32, normalize: bool | None = None,
               truncate: bool = False, progress=None, precision: str = "float32") -> np.ndarray:
        """Sentence embeddings, float32 [n, dim], in input order.

        Long texts are never cut silently. By default a text longer than the model's window
        (sentence-transformers' max_seq_length, 256 tokens for MiniLM) is embedded as overlapping
        windows half a window apart, and its vector is the mean of the windows' pooled vectors
        weighted by their token counts. ``truncate=True`` keeps only the first window, with a warning.
        ``normalize`` defaults to the model's own setting (True for all-MiniLM-L6-v2).
        ``progress``, if given, is called with the number of sequences done after each batch.
        ``precision="float16"``: batches of at most FEW_ROWS tokens (a lone search query) read
        float16 copies of the weights, half the bytes of a pass that is bound by reading them;
        sums stay float32, and the vectors differ from float32 ones by cosine distance ~2e-7
        (see docs/engine.md). Larger batches, bound by arithmetic, stay float32.
        """
        texts = Tokenizer._check(texts)
        normalize = self.config.normalize if normalize is None else normalize
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        items: list[Tokens] = []
        owner: list[int] = []
        width = self.config.window_tokens
        for i, (text, enc) in enumerate(zip(texts, self.tokenizer.content(texts))):
            if len(enc.ids) + self.tokenizer.n_special > width and truncate:
                warnings.warn(f"text {i} cut from {len(enc.ids) + self.tokenizer.n_special} to {width} tokens",
                              stacklevel=2)
                wins = [self.tokenizer.wrap(text, enc, 0, width - self.tokenizer.n_special)]
            else:
                wins = self._windows(text, enc)
            items.extend(wins)
            owner.extend([i] * len(wins))
        pooled = np.zeros((len(items), self.dim), dtype=np.float32)

        def keep(idx, hidden, mask, _store):
            pooled[idx] = self._pool(hidden, mask)

        self._run(items, batch_size, progress, keep, precision=precision)
        if len(items) == len(texts):
            out = pooled
        else:  # average each text's windows, weighted by their content length
            out = np.zeros((len(texts), self.dim), dtype=np.float32)
            weight = np.zeros(len(texts), dtype=np.float32)
            wlen = np.asarray([len(t) - self.tokenizer.n_special for t in items], dtype=np.float32)
            np.add.at(out, owner, pooled * wlen[:, None])
            np.add.at(weight, owner, wlen)
            out /= np.maximum(weight, 1)[:, None]
        if normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def token_vectors(self, texts, *, layers=None, batch_size: int = 32,
                      truncate: bool = False) -> list[tuple[Tokens, np.ndarray]]:
        """Each text's tokens and their contextual vectors, special tokens included, computed in
        length-bucketed batches. ``layers=None``: the last layer's output [n_tokens, hidden]; a list
        of layer indices (negative counts from the end): those layers' outputs concatenated along
        the features, [n_tokens, hidden·len(layers)]. For a mean-pooled model the mean of all the
        last layer's rows (specials too, as sentence-transformers pools) is ``encode``'s vector
        before normalisation."""
        items = self.tokenize(texts, truncate=truncate)
        n_layers = self.config.num_layers
        chosen = None if layers is None else [l % n_layers for l in layers]
        if chosen is not None and any(not -n_layers <= l < n_layers for l in layers):
            raise InputError(f"layers {layers} out of range for a {n_layers}-layer model")
        out: list = [None] * len(items)
        keep = None if chosen is None else Selector([f"layers.{l}.out" for l in chosen], n_layers)

        def collect(idx, hidden, mask, store):
            feats = hidden if chosen is None else np.concatenate([store[f"layers.{l}.out"] for l in chosen], axis=-1)
            for r, j in enumerate(idx):
                out[j] = (items[j], np.ascontiguousarray(feats[r, :len(items[j])]))

        self._run(items, batch_size, None, collect, keep, None if chosen is None else max(chosen) + 1)
        return out

    def trace(self, texts, keep=("layers.*.attn.weights",), *, truncate: bool = False) -> Trace:
        """Run one padded batch (input order, no bucketing) and keep the named intermediates.

        ``keep``: names or wildcard patterns (see ``qkv.model.trace``), e.g. "layers.2.attn.*".
        Texts over the model's limit are refused unless ``truncate``.
        """
        if isinstance(texts, str):
            texts = [texts]
        items = self.tokenize(texts, truncate=truncate)
        if not items:
            raise InputError("trace needs at least one text")
        selector = Selector(keep, self.config.num_layers)
        b = self._pad(items)
        store: dict[str, np.ndarray] = {}
        with blas_threads(self.threads):
            self.forward(b.ids, b.mask, selector, store)
        return Trace(items, b.ids, b.mask, store, self.config.num_layers, self.config.num_heads)

    def __repr__(self) -> str:
        c = self.config
        return (f"Encoder({self.name!r}, {c.model_type}, layers={c.num_layers}, heads={c.num_heads}, "
                f"hidden={c.hidden_size}, pooling={c.pooling}, normalize={c.normalize})")


def _row_cuts(rows: int, threads: int, step: int = 12, least: int = 96) -> list[int]:
    """Row boundaries splitting a product between threads: whole 12-row register blocks, and no
    part under ``least`` rows (below that, waking a thread costs more than it saves)."""
    n = max(1, min(threads, rows // least))
    size = -(-rows // n // step) * step
    return [min(i * size, rows) for i in range(n)] + [rows]


def _deal(costs: list[int], threads: int) -> list[list[int]]:
    """Indices of ``costs`` dealt to at most ``threads`` groups, largest first to the lightest
    group (longest-processing-time rule); empty groups are dropped."""
    groups: list[list[int]] = [[] for _ in range(max(1, threads))]
    loads = [0] * len(groups)
    for i in sorted(range(len(costs)), key=lambda i: -costs[i]):
        g = loads.index(min(loads))
        groups[g].append(i)
        loads[g] += costs[i]
    return [g for g in groups if g]


def load(name: str | Path | None = None, *, threads: int | None = None) -> Encoder:
    """Load an encoder (default: sentence-transformers/all-MiniLM-L6-v2)."""
    return Encoder.load(name, threads=threads)
