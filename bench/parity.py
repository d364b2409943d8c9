"""Parity of qkv's encoder with transformers on the test suite's inputs (51), in numbers.

Prints, per layer, the largest attention-weight difference of qkv and of transformers (both in
float32) from transformers in float64, and the float64-vs-float64 difference, plus hidden-state
and embedding figures. The assertions live in tests/model/test_parity.py; this shows the margins.

    .venv/bin/python bench/parity.py
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np


def main() -> None:
    import torch
    import transformers
    from rich.console import Console
    from rich.table import Table

    import qkv

    warnings.simplefilter("ignore")
    spec = importlib.util.spec_from_file_location(
        "parity_inputs", Path(__file__).resolve().parents[1] / "tests" / "model" / "test_parity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    inputs = mod.parity_inputs()

    enc = qkv.load()
    enc64 = enc.astype(np.float64)
    tok = transformers.AutoTokenizer.from_pretrained(str(enc.path))
    ref = transformers.AutoModel.from_pretrained(str(enc.path), attn_implementation="eager").eval()
    ref64 = transformers.AutoModel.from_pretrained(str(enc.path), attn_implementation="eager").eval().double()
    n_layers = enc.config.num_layers
    w_q32, w_t32, w_64, w_32v32 = (np.zeros(n_layers) for _ in range(4))
    h32 = h64 = 0.0
    cos_min = 1.0
    keep = ["layers.*.attn.weights", f"layers.{n_layers - 1}.out"]
    for i in range(0, len(inputs), 8):
        batch = inputs[i:i + 8]
        e = tok(batch, padding=True, truncation=True, max_length=512, return_tensors="pt")
        with torch.no_grad():
            o32 = ref(**e, output_attentions=True)
            o64 = ref64(**e, output_attentions=True)
        t32 = enc.trace(batch, keep=keep, truncate=True)
        t64 = enc64.trace(batch, keep=keep, truncate=True)
        mask = e["attention_mask"].numpy().astype(bool)
        last = f"layers.{n_layers - 1}.out"
        h32 = max(h32, float(np.abs(t32[last] - o32.last_hidden_state.numpy())[mask].max()))
        h64 = max(h64, float(np.abs(t64[last] - o64.last_hidden_state.numpy())[mask].max()))
        for l in range(n_layers):
            r64 = o64.attentions[l].numpy()
            name = f"layers.{l}.attn.weights"
            w_q32[l] = max(w_q32[l], np.abs(t32[name] - r64).max())
            w_t32[l] = max(w_t32[l], np.abs(o32.attentions[l].numpy() - r64).max())
            w_64[l] = max(w_64[l], np.abs(t64[name] - r64).max())
            w_32v32[l] = max(w_32v32[l], np.abs(t32[name] - o32.attentions[l].numpy()).max())
        m = mask[..., None].astype(np.float32)
        a = (t32[last] * m).sum(1) / m.sum(1)
        b = (o32.last_hidden_state.numpy() * m).sum(1) / m.sum(1)
        a /= np.linalg.norm(a, axis=1, keepdims=True)
        b /= np.linalg.norm(b, axis=1, keepdims=True)
        cos_min = min(cos_min, float((a * b).sum(1).min()))

    con = Console()
    tb = Table(title=f"Attention weights, largest |difference| over {len(inputs)} inputs (7 batches, up to 512 tokens)")
    for c in ("layer", "qkv f32 − torch f64", "torch f32 − torch f64", "qkv f32 − torch f32", "qkv f64 − torch f64"):
        tb.add_column(c, justify="right")
    for l in range(n_layers):
        tb.add_row(str(l), f"{w_q32[l]:.1e}", f"{w_t32[l]:.1e}", f"{w_32v32[l]:.1e}", f"{w_64[l]:.1e}")
    con.print(tb)
    con.print(f"last hidden state: qkv f32 − torch f32 {h32:.1e}; qkv f64 − torch f64 {h64:.1e}")
    con.print(f"mean-pooled normalised embeddings: smallest cosine qkv f32 · torch f32 = {cos_min:.7f}")


if __name__ == "__main__":
    main()
