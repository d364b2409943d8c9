"""The encoder against Hugging Face transformers (torch 2.13.0, CPU), the reference implementation."""

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason="parity needs the test extra (make test installs it)")

WORDS = ("breathable lightweight running shoes men women stainless steel water bottle insulated wireless "
         "bluetooth earbuds noise cancelling leather wallet cotton t-shirt size xl blue red black kitchen "
         "knife set ceramic non-stick frying pan camping tent waterproof 4-person fishing lure 85mm 20g").split()


def parity_inputs() -> list[str]:
    rng = np.random.default_rng(7)
    titles = [" ".join(rng.choice(WORDS, size=rng.integers(3, 16))) for _ in range(26)]
    titles += ["Nike Air Max 270 Men's Running Shoes Breathable Lightweight",
               "YTQHXY Metal Spinner Spoon Fishing Lure Hard Baits 85mm 20g Crankbait",
               "Apple iPhone 15 Pro (256GB) – Natural Titanium",
               "Café crème brûlée façade naïve coöperate",  # accents
               "运动鞋 跑步 轻便 透气",
               "夏季新款女装连衣裙 雪纺 碎花 长裙",
               "小米 Redmi Note 13 Pro 5G 手机 8GB+256GB",
               "Great shoes!!! 👟👟 Love them 😍 would buy again 💯",
               "🎁🎄 gift set 🎄🎁",
               "",
               " ",
               "a",
               "A",
               "100% COTTON, 2-PACK; size: XL/XXL (US 10-12)",
               "Wi-Fi 6E router — tri-band, 5400 Mbps",
               "\t tabs \n and newlines \r\n inside ",
               "ОЧЕНЬ хорошее качество, рекомендую",
               "日本製 ステンレス 包丁 三徳",
               "x" * 300]
    reviews = []
    for n in (120, 300, 520, 700, 1500):  # words; the last three exceed 512 tokens
        reviews.append(" ".join(rng.choice(WORDS, size=n)) + " overall I am happy with this purchase.")
    reviews.append("这双鞋非常舒服，跑步的时候很轻便，透气性也很好。" * 40)  # > 512 Chinese characters
    return titles + reviews


INPUTS = parity_inputs()


@pytest.fixture(scope="module")
def reference(encoder):
    tok = transformers.AutoTokenizer.from_pretrained(str(encoder.path))
    model = transformers.AutoModel.from_pretrained(str(encoder.path), attn_implementation="eager").eval()
    return tok, model


@pytest.fixture(scope="module")
def reference64(encoder):
    model = transformers.AutoModel.from_pretrained(str(encoder.path), attn_implementation="eager").eval().double()
    return model, encoder.astype(np.float64)


def test_at_least_fifty_varied_inputs():
    assert len(INPUTS) >= 50
    assert "" in INPUTS and any(len(t) > 3000 for t in INPUTS)


BATCHES = [INPUTS[i:i + 8] for i in range(0, len(INPUTS), 8)]

U32 = 2.0 ** -24  # float32's unit roundoff
EXP_ULPS = 8  # float32 exp, relative error in units of U32: NumPy's SIMD exp and qkv's exp_f32 are within a few


def _gamma(n):
    """γ_n = n·u/(1 − n·u): a sum of n products in float32 is off by at most γ_n·Σ|terms|, in any
    order, with or without fused multiply-adds (Higham, Accuracy and Stability, §3.1)."""
    return n * U32 / (1 - n * U32)


def weight_error_bound(q, k, q64, k64, p64, key_mask):
    """qkv's own bound on |p̂ − p| for float32 attention weights p̂, element by element, given the
    float32 pass's q̂, k̂ and the float64 pass's q, k, p (all [B, nh, L, d] / [B, nh, L, L]).

    Scores: ŝ − s = (q̂ − q)·k̂ + q·(k̂ − k) exactly; the float32 dot product adds γ_d·|q̂|·|k̂|; the
    1/√d scale, the row maximum's subtraction and their product add 3u·(|s| + |max|). With δ_j
    that bound on a row's score errors and Δ its largest over the real keys, softmax(s + δ)_j / p_j
    = e^δj / Σ p_i e^δi lies within e^±(|δj| + Δ). The float32 softmax then adds its own relative
    error: exp twice (the entry and the sum's term) and the sum of n terms and the division,
    η = 2·ε_exp + γ_(n+2). So |p̂ − p| ≤ p·(e^(|δ| + Δ)·(1 + η) − 1) + 2^-126, the last term for
    weights below float32's normal range (e^-87.3), which underflow. Holds on any CPU: it uses
    nothing but float32's rounding and the errors of q̂ and k̂ the pass actually had."""
    q, k, q64, k64 = (np.asarray(a, np.float64) for a in (q, k, q64, k64))
    d = q.shape[-1]
    scale = 1 / np.sqrt(d)
    keys = np.asarray(key_mask, bool)[:, None, None, :]

    def dots(a, b):
        return a @ np.swapaxes(b, -1, -2)

    delta = scale * (dots(np.abs(q - q64), np.abs(k)) + dots(np.abs(q64), np.abs(k - k64))
                     + _gamma(d) * dots(np.abs(q), np.abs(k)))
    s = scale * dots(q64, k64)
    row_max = np.where(keys, s, -np.inf).max(-1, keepdims=True)
    delta = np.where(keys, delta + 3 * U32 * (np.abs(s) + np.abs(row_max)), 0.0)
    n = keys.sum(-1, keepdims=True)
    eta = 2 * EXP_ULPS * U32 + _gamma(n + 2)
    bound = p64 * np.expm1(delta + delta.max(-1, keepdims=True) + np.log1p(eta)) + 2.0 ** -126
    return np.where(keys, bound, 0.0)  # padding keys: weight exactly 0 in both


def test_weight_error_bound_catches_a_wrong_weight(encoder):
    """The bound is tight enough to fail: a weight moved by 1e-5 (the old "no worse than torch"
    margin) breaks it where the weight is small, and a row scaled by 1 + 1e-4 breaks it too."""
    batch = BATCHES[0]
    keep = ["layers.0.attn.weights", "layers.0.attn.q", "layers.0.attn.k"]
    tr, tr64 = encoder.trace(batch, keep=keep), encoder.astype(np.float64).trace(batch, keep=keep)
    args = [tr["layers.0.attn.q"], tr["layers.0.attn.k"], tr64["layers.0.attn.q"], tr64["layers.0.attn.k"],
            tr64["layers.0.attn.weights"], tr.attention_mask]
    bound = weight_error_bound(*args)
    w, w64 = tr["layers.0.attn.weights"].astype(np.float64), tr64["layers.0.attn.weights"]
    assert np.all(np.abs(w - w64) <= bound)
    moved = w.copy()
    moved[0, 0, 1, 1] += 1e-5
    assert not np.all(np.abs(moved - w64) <= bound)
    scaled = w.copy()
    scaled[0, 0, 1] *= 1 + 1e-4
    assert not np.all(np.abs(scaled - w64) <= bound)


@pytest.mark.parametrize("b", range(len(BATCHES)), ids=lambda b: f"batch{b}")
def test_hidden_states_attention_and_embeddings_match_transformers(encoder, reference, reference64, b):
    """Tolerances of the issue (hidden ≤ 1e-4, attention weights ≤ 1e-5, embeddings cos ≥ 0.99999)
    hold exactly when both implementations compute in float64. In float32 each implementation
    rounds differently: transformers' own float32 weights differ from its float64 ones by up to
    ~4e-5 on the 512-token batch, so float32-vs-float32 is checked at 1e-4. qkv's float32 weights
    are held to qkv's own bound against the float64 pass (``weight_error_bound``, element by
    element), which depends on no other library's rounding, and to 3e-5 overall."""
    batch = BATCHES[b]
    tok, model = reference
    model64, encoder64 = reference64
    enc_in = tok(batch, padding=True, truncation=True, max_length=512, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc_in, output_attentions=True)
        out64 = model64(**enc_in, output_attentions=True)
    keep = ["layers.*.attn.weights", "layers.*.attn.q", "layers.*.attn.k", "layers.5.out"]
    tr = encoder.trace(batch, keep=keep, truncate=True)
    tr64 = encoder64.trace(batch, keep=keep, truncate=True)
    np.testing.assert_array_equal(tr.input_ids, enc_in["input_ids"].numpy())
    mask = enc_in["attention_mask"].numpy().astype(bool)
    assert np.array_equal(tr.attention_mask, mask)

    # float64 against float64: the tolerances
    assert np.abs(tr64["layers.5.out"] - out64.last_hidden_state.numpy())[mask].max() <= 1e-4
    for i, ref_w in enumerate(out64.attentions):
        assert np.abs(tr64[f"layers.{i}.attn.weights"] - ref_w.numpy()).max() <= 1e-5, f"float64 layer {i}"

    # float32 against float32, and float32 against the float64 reference
    hidden = tr["layers.5.out"]
    ref_hidden = out.last_hidden_state.numpy()
    assert np.abs(hidden - ref_hidden)[mask].max() <= 1e-4
    for i, ref_w in enumerate(out.attentions):
        w = tr[f"layers.{i}.attn.weights"]
        assert np.abs(w - ref_w.numpy()).max() <= 1e-4, f"layer {i}"
        got = {n: tr[f"layers.{i}.attn.{n}"] for n in ("q", "k", "weights")}
        exact = {n: tr64[f"layers.{i}.attn.{n}"] for n in ("q", "k", "weights")}
        err = np.abs(got["weights"] - exact["weights"])
        bound = weight_error_bound(got["q"], got["k"], exact["q"], exact["k"], exact["weights"], mask)
        worst = np.unravel_index(np.argmax(err - bound), err.shape)
        assert np.all(err <= bound), f"layer {i} at {worst}: |error| {err[worst]:.3g} > bound {bound[worst]:.3g}"
        assert err.max() <= 3e-5, f"layer {i}: {err.max():.3g}"

    # sentence embeddings: mean pooling over real tokens, then L2 normalisation
    m = mask[..., None].astype(np.float32)
    ref_vec = (ref_hidden * m).sum(1) / m.sum(1)
    ref_vec /= np.linalg.norm(ref_vec, axis=1, keepdims=True)
    pooled = (hidden * m).sum(1) / m.sum(1)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    assert ((pooled * ref_vec).sum(1) >= 0.99999).all()


def test_encode_equals_sentence_transformers_pooling(encoder, reference):
    """encode() buckets by length and pools; for texts within the model's 256-token window it must
    equal mean-pooled, normalised transformers output over the same texts in input order."""
    tok, model = reference
    texts = [t for t in INPUTS if len(tok(t)["input_ids"]) <= 256]
    ours = encoder.encode(texts, batch_size=5)
    e = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**e).last_hidden_state.numpy()
    m = e["attention_mask"].numpy()[..., None].astype(np.float32)
    ref = (h * m).sum(1) / m.sum(1)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    cos = (ours * ref).sum(1)
    assert cos.min() >= 0.99999, texts[int(cos.argmin())][:40]


def test_encode_truncate_matches_transformers_at_the_window(encoder, reference):
    tok, model = reference
    long_text = INPUTS[-3]
    with pytest.warns(UserWarning, match="cut"):
        ours = encoder.encode([long_text], truncate=True)[0]
    e = tok([long_text], truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        h = model(**e).last_hidden_state[0].numpy()
    ref = h.mean(0) / np.linalg.norm(h.mean(0))
    assert float(ours @ ref) >= 0.99999


def test_two_threads_give_the_same_embeddings(encoder):
    import qkv

    two = qkv.Encoder(encoder.config, encoder.weights, encoder.tokenizer, threads=2)
    np.testing.assert_allclose(two.encode(INPUTS[:20]), encoder.encode(INPUTS[:20]), atol=1e-5)
