"""Fixtures for the explain tests: titles written for these tests (no shared data), and qkv's bound
on two float32 computations of the same attention scores."""

import numpy as np
import pytest

NIKE = "Nike Air Max 270 Men's Running Shoes Breathable Lightweight"
BOTTLE = "Stainless Steel Water Bottle 750ml, Insulated (Leak-Proof)"
ZH = "运动鞋 跑步 轻便 透气"

U32 = 2.0 ** -24  # float32's unit roundoff


def score_bound(qa, ka, qb, kb, scale: float = 1.0) -> np.ndarray:
    """qkv's bound on |ŝa − ŝb| for two float32 computations of scale · q·kᵀ ([..., L, d] per head),
    element by element, from the q̂, k̂ each computation had: the exact difference
    (qa − qb)·kb + qa·(ka − kb), plus each side's rounding, γ_(d+1)·|q̂|·|k̂| (a sum of d products
    and the scale's multiply in float32, in any order, with or without fused multiply-adds; Higham,
    Accuracy and Stability, §3.1). It holds on any CPU, whatever order its BLAS adds in: a tolerance
    of 1e-5 on the element does not (on an AVX2 Zen 3 the engine's two passes differ by 1.4e-5 on a
    score of 0.10; at most 0.13 of this bound on any score there)."""
    qa, ka, qb, kb = (np.asarray(x, np.float64) for x in (qa, ka, qb, kb))
    d = qa.shape[-1]
    gamma = (d + 1) * U32 / (1 - (d + 1) * U32)

    def dots(a, b):
        return np.abs(a) @ np.swapaxes(np.abs(b), -1, -2)

    return abs(scale) * (dots(qa - qb, kb) + dots(qa, ka - kb) + gamma * (dots(qa, ka) + dots(qb, kb)))


@pytest.fixture(scope="session")
def nike_maps(encoder):
    from qkv.explain import attention_maps

    return attention_maps(encoder, NIKE)


@pytest.fixture(scope="session")
def nike_explanation(encoder):
    from qkv.explain.report import explain

    return explain(encoder, NIKE, query="running shoes for men")
