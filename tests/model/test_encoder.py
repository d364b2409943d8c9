"""Encoder behaviour that needs no reference model: trace names, long inputs, tokens and words."""

import warnings

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.model import all_names
from qkv.model.trace import LAYER_NAMES, Selector


def test_trace_keeps_only_what_is_asked(encoder):
    tr = encoder.trace(["red shoes"], keep=["layers.2.attn.*"])
    assert set(tr) == {f"layers.2.{n}" for n in LAYER_NAMES if n.startswith("attn.")}
    assert len(encoder.trace(["red shoes"], keep=[])) == 0


def test_trace_shapes_and_names(encoder):
    texts = ["red running shoes", "a blue cotton t-shirt for men"]
    tr = encoder.trace(texts, keep=["*"])
    assert sorted(tr) == sorted(all_names(6))
    b, length = tr.input_ids.shape
    c = encoder.config
    assert tr["embeddings"].shape == (b, length, c.hidden_size)
    for n in ("q", "k", "v", "context"):
        assert tr[f"layers.0.attn.{n}"].shape == (b, c.num_heads, length, c.head_dim)
    for n in ("scores", "scaled_scores", "weights"):
        assert tr[f"layers.3.attn.{n}"].shape == (b, c.num_heads, length, length)
    assert tr["layers.1.ffn.hidden"].shape == (b, length, c.intermediate_size)
    # padding sliced off per text
    n0 = len(tr.seqs[0])
    assert tr.get("layers.0.attn.weights", 0).shape == (c.num_heads, n0, n0)
    assert tr.stack("attn.weights", 0).shape == (6, c.num_heads, n0, n0)


def test_trace_steps_are_consistent(encoder):
    tr = encoder.trace(["breathable lightweight running shoes"], keep=["*"])
    d = encoder.config.head_dim
    q, k = tr["layers.4.attn.q"], tr["layers.4.attn.k"]
    np.testing.assert_allclose(tr["layers.4.attn.scores"], q @ k.swapaxes(-1, -2), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tr["layers.4.attn.scaled_scores"], tr["layers.4.attn.scores"] / np.sqrt(d), rtol=1e-6)
    w = tr["layers.4.attn.weights"]
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(tr["layers.4.attn.context"], w @ tr["layers.4.attn.v"], atol=1e-5)
    # layer 4's output is what layer 5 reads: its q recomputed from it is the q traced in layer 5
    lw5 = encoder.weights.layers[5]
    q5 = (tr["layers.4.out"][0] @ lw5.w_qkv + lw5.b_qkv)[:, :384].reshape(-1, 12, 32).transpose(1, 0, 2)
    np.testing.assert_allclose(q5, tr["layers.5.attn.q"][0], atol=1e-4)
    lw = encoder.weights.layers[4]
    x = tr["layers.3.out"][0]
    qkv_ = x @ lw.w_qkv + lw.b_qkv
    np.testing.assert_allclose(qkv_[:, :384].reshape(-1, 12, 32).transpose(1, 0, 2), q[0], atol=1e-4)


def test_padding_gets_zero_weight_and_does_not_change_results(encoder):
    alone = encoder.trace(["red shoes"], keep=["layers.5.attn.weights", "layers.5.out"])
    padded = encoder.trace(["red shoes", "a much longer product title with many more words in it"],
                           keep=["layers.5.attn.weights", "layers.5.out"])
    n = len(alone.seqs[0])
    w = padded["layers.5.attn.weights"][0]
    assert np.all(w[:, :, n:] == 0)
    np.testing.assert_allclose(padded.get("layers.5.out", 0), alone.get("layers.5.out", 0), atol=1e-5)


def test_bad_trace_pattern(encoder):
    with pytest.raises(InputError, match="matches no name"):
        encoder.trace(["x"], keep=["layers.9.attn.weights"])


def test_long_text_refused_in_trace_unless_truncated(encoder):
    long = "shoes " * 600
    with pytest.raises(InputError, match="more than this model's limit of 512.*truncate"):
        encoder.trace([long])
    with pytest.warns(UserWarning, match="cut from 602 to 512"):
        tr = encoder.trace([long], truncate=True)
    assert tr.input_ids.shape == (1, 512)


def test_long_text_encoded_as_windows(encoder):
    """Default: overlapping windows averaged, not cut. The result differs from the first window
    alone, is unit-norm, and for repetitive text stays close to it."""
    long = " ".join(f"word{i % 50}" for i in range(900))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        full = encoder.encode([long])[0]
    with pytest.warns(UserWarning):
        first = encoder.encode([long], truncate=True)[0]
    assert abs(np.linalg.norm(full) - 1) < 1e-5
    assert not np.allclose(full, first) and float(full @ first) > 0.9
    content = encoder.tokenizer.content([long])[0]
    wins = encoder._windows(long, content)
    assert len(wins) > 2 and all(len(w) <= 256 for w in wins)
    covered = set()
    for w in wins:
        covered.update(o for o, sp in zip(w.offsets, w.special) if not sp)
    assert covered == {tuple(o) for o in content.offsets}


def test_encode_order_batches_and_empty(encoder):
    texts = ["a", "a much longer title with many words " * 3, "", "blue"]
    one = np.stack([encoder.encode([t])[0] for t in texts])
    np.testing.assert_allclose(encoder.encode(texts, batch_size=2), one, atol=1e-5)
    assert encoder.encode([]).shape == (0, 384)
    with pytest.raises(InputError):
        encoder.encode(["x"], batch_size=0)


def test_token_vectors_mean_is_the_embedding(encoder):
    texts = ["red running shoes", "stainless steel bottle"]
    vecs = encoder.encode(texts, normalize=False)
    for (tokens, tv), v in zip(encoder.token_vectors(texts), vecs):
        assert tv.shape == (len(tokens), 384)
        np.testing.assert_allclose(tv.mean(0), v, atol=1e-5)
    (_, both), = encoder.token_vectors(["red shoes"], layers=[-2, -1])
    assert both.shape == (4, 768)


def test_middle_layers_without_running_the_rest(encoder):
    """token_vectors(layers=[1]) stops after layer 1, and gives what the full pass traces there."""
    texts = ["red running shoes for men", "kettle"]
    full = encoder.trace(texts, keep=["layers.1.out", "layers.5.out"])
    for i, (tokens, tv) in enumerate(encoder.token_vectors(texts, layers=[1])):
        np.testing.assert_allclose(tv, full.get("layers.1.out", i), atol=1e-5)
    b = encoder._pad(encoder.tokenize(texts))
    two = encoder.forward(b.ids, b.mask, upto=2)
    np.testing.assert_allclose(two[b.mask], full["layers.1.out"][b.mask], atol=1e-5)
    assert not np.allclose(two[b.mask], full["layers.5.out"][b.mask], atol=1e-2)


def test_offsets_point_into_the_text(encoder):
    text = "Nike Air Max 270 Men's Running-Shoes, 运动鞋 😀"
    (t,) = encoder.tokenize([text])
    for tok, (s, e), sp in zip(t.tokens, t.offsets, t.special):
        if not sp and tok != "[UNK]":
            assert text[s:e].lower() == tok.removeprefix("##").lower()


def test_words_merge_pieces_and_split_edge_punctuation(encoder):
    text = "Men's ultralightweight shoes, (blue) 运动鞋 跑步 😀!"
    (t,) = encoder.tokenize([text])
    words = [w for w in t.words() if not w.special]
    assert [w.text for w in words] == ["Men's", "ultralightweight", "shoes", ",", "(", "blue", ")", "运动鞋",
                                       "跑步", "😀", "!"]
    ultra = words[1]
    assert len(ultra.tokens) > 1 and all(t.tokens[i].startswith("##") for i in ultra.tokens[1:])
    for w in words:
        assert text[w.start:w.end] == w.text


def test_tiled_attention_path_equals_the_traced_path(encoder):
    """Untraced forward passes of long inputs take the tiled attention path; tracing the weights
    forces the whole-array five steps. Both must give the same hidden states at real tokens
    (padding positions carry no meaning; the fast path leaves them zero)."""
    texts = ["quiet kettle with a cool handle " * 20, "short title"]
    tiled = encoder.trace(texts, keep=["layers.5.out"])
    whole = encoder.trace(texts, keep=["layers.5.out", "layers.*.attn.weights"])
    assert tiled.input_ids.shape[1] >= 64
    real = tiled.attention_mask
    np.testing.assert_allclose(tiled["layers.5.out"][real], whole["layers.5.out"][real], rtol=1e-5, atol=2e-5)


def test_packed_rows_give_the_padded_result(encoder):
    """Skipping padding rows (the default when nothing inside attention is traced) changes no real
    token's value, for short batches (all texts at once) and long ones (text by text), and the
    row-wise intermediates it traces come back in the padded [B, L, ...] layout, zero on padding."""
    for texts in (["red shoes", "Stainless Steel Electric Kettle 1.7L with auto shut-off", "kettle"],
                  ["a long review of a quiet kettle " * 14, "short one", "a medium review of a kettle " * 4]):
        b = encoder._pad(encoder.tokenize(texts))
        keep = Selector(["layers.2.out", "layers.3.ffn.hidden", "embeddings"], encoder.config.num_layers)
        runs = []
        for pack in (True, False):
            store = {}
            runs.append((encoder.forward(b.ids, b.mask, keep, store, pack=pack), store))
        (packed, ps), (padded, qs) = runs
        np.testing.assert_allclose(packed[b.mask], padded[b.mask], atol=1e-5)
        assert (packed[~b.mask] == 0).all()
        assert not (padded[~b.mask] == 0).all()  # pack=False really computed the padding rows
        for name in keep.names:
            assert ps[name].shape == qs[name].shape
            np.testing.assert_allclose(ps[name][b.mask], qs[name][b.mask], atol=1e-5)
            assert (ps[name][~b.mask] == 0).all()


@pytest.mark.parametrize("compiled", [True, False])
def test_few_rows_take_their_own_products_with_the_same_result(encoder, monkeypatch, compiled):
    """Products run on weights packed for them (compiled panels for float32.gemm, or BLAS with a
    transposed copy for a few rows without the kernels); the sentence vectors are those of plain
    x·W in BLAS, for a few rows and for many."""
    from qkv.kernels import cpu
    from qkv.model.encoder import Encoder
    from qkv.model.linear import Blas, Float32Panels, PackedWeights

    texts = ["breathable running shoes", "透气跑鞋 men"]
    many = texts * 12  # over FEW_ROWS rows in one batch
    lib = cpu.lib
    monkeypatch.setattr(cpu, "BLAS_BATCHES", False)  # (a v3 build on AVX-512 sends batches to BLAS: test_linear.py)
    monkeypatch.setattr(cpu, "lib", None)  # plain: every product x·W in BLAS
    plain = Encoder(encoder.config, encoder.weights, encoder.tokenizer, threads=1)
    plain._packed = PackedWeights(force=Blas)
    want = plain.encode(texts), plain.encode(many)
    monkeypatch.setattr(cpu, "lib", lib if compiled else None)
    enc = Encoder(encoder.config, encoder.weights, encoder.tokenizer, threads=1)
    few = enc.encode(texts), enc.encode(many)
    made = enc._packed.made()
    assert len(made) == 4 * encoder.config.num_layers  # Wqkv, Wo, W1, W2 of every layer
    kind = Float32Panels if compiled and cpu.available() else Blas
    assert all(type(m) is kind for m in made)
    for got, ref in zip(few, want):
        np.testing.assert_allclose(got, ref, atol=1e-6)


def test_float16_few_row_weights_give_the_same_sentence_vectors(encoder):
    """precision="float16" halves what a lone query reads; the pooled, normalised vectors stay
    within cosine distance 1e-6 of float32 (measured ~2e-7), while the hidden states do move
    (so the float16 copies were really used), and batches over FEW_ROWS tokens are untouched."""
    from qkv.kernels import cpu
    from qkv.model.linear import FEW_ROWS

    queries = ["breathable running shoes", "透气跑鞋", "stainless steel water bottle 1l", "2x4x18 pine board"]
    exact = encoder.encode(queries, batch_size=1)
    half = encoder.encode(queries, batch_size=1, precision="float16")
    assert ((exact * half).sum(axis=1) > 1 - 1e-6).all()
    if cpu.available():
        assert not np.array_equal(exact, half)
        assert any(m.precision == "float16" for m in encoder._packed.made())
    else:  # float16 is not emulated without the kernels: the float32 products run, bit for bit
        np.testing.assert_array_equal(exact, half)
        assert not any(m.precision == "float16" for m in encoder._packed.made())
    long = ["a long product description " * 3] * 4  # 4 texts in one batch: over FEW_ROWS rows
    assert sum(len(t) for t in encoder.tokenize(long)) > FEW_ROWS
    np.testing.assert_array_equal(encoder.encode(long), encoder.encode(long, precision="float16"))
    with pytest.raises(InputError, match="precision must be one of float32, float16, bfloat16"):
        encoder.encode(queries, precision="int3")
