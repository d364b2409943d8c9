"""Fixtures for the explain tests: titles written for these tests (no shared data)."""

import pytest

NIKE = "Nike Air Max 270 Men's Running Shoes Breathable Lightweight"
BOTTLE = "Stainless Steel Water Bottle 750ml, Insulated (Leak-Proof)"
ZH = "运动鞋 跑步 轻便 透气"


@pytest.fixture(scope="session")
def nike_maps(encoder):
    from qkv.explain import attention_maps

    return attention_maps(encoder, NIKE)


@pytest.fixture(scope="session")
def nike_explanation(encoder):
    from qkv.explain.report import explain

    return explain(encoder, NIKE, query="running shoes for men")
