"""precision="bfloat16": the packed product, the attention route, and the whole encoder against
float32 (sentence vectors within cosine 0.999 on the parity inputs), on every unit this CPU offers.
float32 stays the default and is never replaced silently."""

import numpy as np
import pytest

from qkv.kernels import bfloat16 as bf16, cpu
from qkv.model import attend
from qkv.model import linear as L
from qkv.model.workers import Workers

needs_lib = pytest.mark.skipif(not cpu.available(), reason=f"compiled kernels not in use: {cpu.STATUS}")
UNITS = [u for u in cpu.offered()]  # the units to force, float32 included


def _parity_inputs() -> list[str]:
    """The 51 inputs of test_parity.py (titles, accents, CJK, emoji, blanks, long reviews)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_parity", Path(__file__).with_name("test_parity.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.parity_inputs()


@pytest.fixture(params=UNITS)
def unit(request):
    """Each unit this CPU offers, forced as QKV_ISA would; the process's choice put back after."""
    before = cpu.ISA
    assert cpu.select(request.param) == request.param
    yield request.param
    cpu.select(before)


@needs_lib
@pytest.mark.parametrize("act", [None, "gelu", "relu"])
@pytest.mark.parametrize("rows", [1, 33, 200])
def test_bfloat16_panels_are_x_times_w_plus_b_within_bfloat16_rounding(rows, act):
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 64)).astype(np.float32)
    w = (rng.standard_normal((64, 96)) / 8).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    lin = L.BFloat16Panels(w)
    out = np.empty((rows, 96), np.float32)
    assert lin(x, out, bias=b, act=act, workers=Workers(2)) is out
    y = x.astype(np.float64) @ w + b
    if act == "gelu":
        from scipy.special import erf

        y = y * 0.5 * (1 + erf(y / np.sqrt(2)))
    elif act == "relu":
        y = np.maximum(y, 0)
    bound = 1.13 * ((2 * 2 ** -8 + 2 ** -16) + 66 * 2 ** -24) * (np.abs(x) @ np.abs(w) + np.abs(b)) + 1e-6
    assert np.all(np.abs(out - y) <= bound)
    assert lin.precision == "bfloat16"
    np.testing.assert_array_equal(lin.dense(), bf16.round_bf16(w))


@needs_lib
def test_the_dispatcher_gives_bfloat16_only_where_a_unit_runs_it(monkeypatch):
    w = np.zeros((64, 96), np.float32)
    monkeypatch.setattr(cpu, "BLAS_BATCHES", False)  # (a v3 build on AVX-512 sends batches to BLAS: test_linear.py)
    monkeypatch.setattr(cpu, "ISA", "amx")
    assert L.choose(w, "bfloat16", 500) is L.BFloat16Panels
    assert L.choose(w, "float32", 500) is L.Float32Panels  # float32 is never replaced
    monkeypatch.setattr(cpu, "ISA", "float32")  # no unit: bfloat16 is not emulated, float32 runs
    assert L.choose(w, "bfloat16", 500) is L.Float32Panels


@needs_lib
@pytest.mark.parametrize("isa,route", [("amx", "tiles"), ("avx512bf16", "dots")])
def test_bfloat16_attention_runs_on_the_unit_in_use(isa, route, monkeypatch):
    """precision="bfloat16": attention's products on the bfloat16 unit (tiles, or dot products where
    there are no tiles); float32 stays float32, and the float32 unit has no bfloat16 attention."""
    batch = attend.Batch(2, 80, np.ones((2, 80), bool), np.array([80, 80]))
    monkeypatch.setattr(cpu, "ISA", isa)
    assert attend.choose(batch, False, "bfloat16", 32) == route
    assert attend.choose(batch, False, "float32", 32) == "per_text"
    assert attend.choose(batch, False, "bfloat16", 64) == "per_text"  # the kernels take head size 32
    assert attend.choose(batch, True, "bfloat16", 32) == "reference"  # traced: float32, every step
    monkeypatch.setattr(cpu, "ISA", "float32")
    assert attend.choose(batch, False, "bfloat16", 32) == "per_text"


@needs_lib
def test_the_encoder_runs_bfloat16_attention_on_the_unit_in_use(encoder, unit, monkeypatch):
    """A padded batch of mixed lengths in bfloat16 calls the unit's attention kernel for every text
    of every layer (no silent float32 fallback), and none on the float32 unit."""
    calls = []
    real = bf16.attention_text_bf16
    monkeypatch.setattr(bf16, "attention_text_bf16",
                        lambda *a, **k: calls.append(real(*a, **k)) or calls[-1])
    texts = _TEXTS[:6]
    b = encoder._pad(encoder.tokenize(texts))
    for pack in (True, False):
        encoder.forward(b.ids, b.mask, precision="bfloat16", pack=pack, threads=1)
    n_layers = encoder.config.num_layers
    if unit == "float32":
        assert calls == []
    else:
        assert len(calls) == 2 * n_layers * len(texts) and all(calls)


@needs_lib
def test_encoder_in_bfloat16_within_cosine_bound_of_float32(encoder, unit):
    texts = _parity_inputs()
    assert len(texts) >= 50
    exact = encoder.encode(texts, batch_size=8)
    fast = encoder.encode(texts, batch_size=8, precision="bfloat16")
    # blank texts next to windowed long ones pool to zero in both precisions (their window weight
    # is 0); everything else must be within the bound
    zero = np.linalg.norm(exact, axis=1) == 0
    np.testing.assert_array_equal(zero, np.linalg.norm(fast, axis=1) == 0)
    cos = (exact * fast).sum(axis=1)[~zero]
    assert cos.min() >= 0.999, cos.min()
    if unit != "float32":
        assert not np.array_equal(exact, fast)  # it did run in bfloat16
        made = [lin for lin in encoder._packed.made() if lin.precision == "bfloat16"]
        assert made
    else:
        np.testing.assert_array_equal(exact, fast)  # no unit: the float32 path itself


@needs_lib
def test_bfloat16_activations_handed_over_as_bits_change_nothing(encoder, unit, monkeypatch):
    """Products that hand each other bfloat16 bits (Q | K | V, the heads' outputs, the LayerNorms'
    results, the hidden layer) round the very float32 values the next kernel would have rounded
    (nearest even both ways): the same hidden states to the bit, packed and padded."""
    texts = _parity_inputs()[:16]
    b = encoder._pad(encoder.tokenize(texts))
    for pack in (True, False):
        with_bits = encoder.forward(b.ids, b.mask, precision="bfloat16", pack=pack)
        monkeypatch.setattr(L.BFloat16Panels, "bf16_bits", False)
        without = encoder.forward(b.ids, b.mask, precision="bfloat16", pack=pack)
        monkeypatch.undo()
        np.testing.assert_array_equal(with_bits, without)


def _one_and_two_threads(enc, texts):
    """``enc``'s bfloat16 vectors of ``texts`` at one thread and at two (the encoder left at one)."""
    one = enc.encode(texts, precision="bfloat16")
    enc.threads = 2
    try:
        return one, enc.encode(texts, precision="bfloat16")
    finally:
        enc.threads = 1


@needs_lib
def test_bfloat16_at_two_threads_gives_the_same_vectors(encoder):
    texts = ["red running shoes " * k for k in range(1, 40)]
    np.testing.assert_array_equal(*_one_and_two_threads(encoder, texts))


def test_traced_runs_stay_float32(encoder):
    """tour and explain read traces: those have no precision to choose and run float32."""
    import inspect

    assert "precision" not in inspect.signature(encoder.trace).parameters
    tr = encoder.trace(["red running shoes"], keep=["layers.5.out"])
    b = encoder._pad(encoder.tokenize(["red running shoes"]))
    np.testing.assert_array_equal(tr["layers.5.out"], encoder.forward(b.ids, b.mask, precision="float32"))


_TEXTS = ["red running shoes " * k for k in (1, 17, 3, 40, 2, 70, 55, 80, 1, 75, 65)] + ["水杯 保温 " * 9, "a", "usb-c cable, 2 m"]


def _record_pieces(monkeypatch) -> list:
    """The pieces each bfloat16 forward at several threads was cut into (Encoder._forward_pieces)."""
    from qkv.model.encoder import Encoder

    seen = []
    real = Encoder._forward_pieces
    monkeypatch.setattr(Encoder, "_forward_pieces", lambda self, ids, mask, pieces, *a: seen.append(pieces)
                        or real(self, ids, mask, pieces, *a))
    return seen


@needs_lib
@pytest.mark.parametrize("threads", [2, 3])
def test_bfloat16_batches_claimed_in_pieces_of_texts_give_the_same_hidden_states(encoder, unit, threads,
                                                                                 monkeypatch):
    """At two threads and more a bfloat16 batch of several texts is cut into pieces of whole texts
    the threads claim one after another (Encoder._forward_pieces), each piece through every layer:
    the same floats as one thread, packed and padded, for odd batch sizes and lengths, and for the
    first layers only."""
    seen = _record_pieces(monkeypatch)
    b = encoder._pad(encoder.tokenize(_TEXTS))
    for pack in (True, False):
        for upto in (None, 2):
            one = encoder.forward(b.ids, b.mask, precision="bfloat16", pack=pack, upto=upto, threads=1)
            many = encoder.forward(b.ids, b.mask, precision="bfloat16", pack=pack, upto=upto, threads=threads)
            np.testing.assert_array_equal(one, many)
    if unit == "float32":  # no bfloat16 unit: float32 runs, split step by step as float32 always is
        assert seen == []
    else:
        assert len(seen) == 4 and all(p[0][0] == 0 and p[-1][1] == len(_TEXTS) for p in seen)
        assert all(len(p) > threads for p in seen)  # more pieces than threads: the last ones go to whoever is ahead


@needs_lib
@pytest.mark.parametrize("plan", ["a piece a text", "reversed", "one big and singles", "uneven"])
def test_any_cut_into_pieces_claimed_in_any_order_gives_the_same_floats(encoder, plan, monkeypatch):
    """Rows never meet outside their own text: however the batch is cut and whichever piece is
    claimed first, the hidden states are one thread's, packed and padded, and with ``upto``."""
    from qkv.model import encoder as E

    n = len(_TEXTS)
    pieces = {"a piece a text": [(i, i + 1) for i in range(n)],
              "reversed": [(i, i + 1) for i in range(n)][::-1],
              "one big and singles": [(0, n - 3), (n - 3, n - 2), (n - 2, n - 1), (n - 1, n)],
              "uneven": [(3, 4), (0, 3), (6, 8), (8, n), (4, 6)]}[plan]
    seen = _record_pieces(monkeypatch)
    monkeypatch.setattr(E, "text_pieces", lambda lens, threads: pieces)
    b = encoder._pad(encoder.tokenize(_TEXTS))
    for pack in (True, False):
        for upto in (None, 3):
            one = encoder.forward(b.ids, b.mask, precision="bfloat16", pack=pack, upto=upto, threads=1)
            for threads in (2, 3):
                many = encoder.forward(b.ids, b.mask, precision="bfloat16", pack=pack, upto=upto, threads=threads)
                np.testing.assert_array_equal(one, many)
    if cpu.ISA != "float32":
        assert seen and all(p == pieces for p in seen)


def test_forward_writes_into_out_when_given(encoder):
    from qkv.errors import InputError

    b = encoder._pad(encoder.tokenize(_TEXTS))
    for pack in (True, False):
        want = encoder.forward(b.ids, b.mask, pack=pack)
        out = np.full((*b.ids.shape, encoder.dim), np.nan, np.float32)  # padding rows must come back zero
        assert encoder.forward(b.ids, b.mask, pack=pack, out=out) is out
        np.testing.assert_array_equal(out, want)
    with pytest.raises(InputError, match="out must be"):
        encoder.forward(b.ids, b.mask, out=np.empty((1, 2, encoder.dim), np.float32))


@needs_lib
def test_traced_float32_and_tiny_batches_are_not_cut_by_texts(encoder, monkeypatch):
    from qkv.model.encoder import Encoder
    from qkv.model.trace import Selector

    monkeypatch.setattr(Encoder, "_forward_pieces", lambda *a: pytest.fail("cut by texts"))
    b = encoder._pad(encoder.tokenize(["red running shoes " * k for k in range(1, 9)]))
    store: dict = {}
    keep = Selector(["layers.1.out"], encoder.config.num_layers)
    encoder.forward(b.ids, b.mask, keep, store, precision="bfloat16", threads=2)  # a trace keeps rows
    assert store["layers.1.out"].shape[:2] == b.ids.shape
    encoder.forward(b.ids, b.mask, precision="float32", threads=2)  # float32 splits each step
    q = encoder._pad(encoder.tokenize(["red shoes", "blue"]))
    encoder.forward(q.ids, q.mask, precision="bfloat16", threads=2)  # too few tokens to share out


@needs_lib
@pytest.mark.parametrize("plan", ["claimed", "a piece a text"])
def test_the_4bit_multilingual_model_cut_by_texts_gives_the_same_vectors(e5, plan, monkeypatch):
    """multilingual-e5-small's 4-bit layers (qkv.model.layer_q4) in pieces of texts claimed by two
    threads; a piece of one short text runs its layers in one compiled call (fused_stack)."""
    from qkv.model import encoder as E

    if plan == "a piece a text":
        monkeypatch.setattr(E, "text_pieces", lambda lens, threads: [(i, i + 1) for i in range(len(lens))])
    texts = ["红色跑鞋 " * k for k in range(1, 9)] + ["red running shoes " * k for k in range(1, 9)]
    np.testing.assert_array_equal(*_one_and_two_threads(e5, texts))
