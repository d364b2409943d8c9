"""``qkv info``: what this machine runs — the compiled kernels, the bfloat16 unit and why, and the
precision each kind of work uses."""

from __future__ import annotations

from typing import Annotated

import typer

from qkv.cli._common import console, print_json


def info_dict() -> dict:
    from qkv.kernels import bfloat16, cpu, int8, q4
    from qkv.attributes.features import PRECISION as ATTRS
    from qkv.model.linear import effective_precision
    from qkv.search.build import BUILD_PRECISION
    from qkv.search.index import query_precision
    from qkv.summarize.core import PRECISION as SUMMARIES

    products = ("NumPy's BLAS for batches (its kernels are faster than this AVX2 build's: "
                f"{'wider, AVX-512' if 'avx512f' in (cpu.cpu_flags() or set()) else 'measured on a Zen 3'}), "
                "the compiled kernel for up to 32 rows" if cpu.BLAS_BATCHES
                else "compiled (blocked, bias and GELU fused)" if cpu.available() else "NumPy's BLAS")
    return {"kernels": cpu.STATUS, "library": str(cpu.LIB_PATH), "built_for": cpu.TARGET,
            "float32_products": products,
            "bfloat16_unit": cpu.ISA, "passed_over": cpu.WHY,
            "units_offered": cpu.offered(), "bfloat16_attention": bfloat16.attention_unit(),
            "4bit_unit": q4.unit(), "int8_unit": int8.unit(), "int8_block": int8.BLOCK,
            "precision": {"qkv index (titles)": effective_precision(BUILD_PRECISION),
                          "qkv attrs (token vectors)": effective_precision(ATTRS),
                          "qkv summarize (sentences)": effective_precision(SUMMARIES),
                          "search queries": query_precision(), "encode() default, traces": "float32"}}


def register(app: typer.Typer) -> None:
    @app.command()
    def info(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False):
        """The compiled kernels, the bfloat16 unit in use (QKV_ISA=amx|avx512bf16|float32 forces one)
        and the precision of each kind of work."""
        d = info_dict()
        if as_json:
            print_json(d)
            return
        console.print(f"compiled kernels: {d['kernels']}")
        console.print(f"library: {d['library']}, built for [bold]{d['built_for']}[/] (QKV_KERNELS_LIB=path loads another)")
        console.print(f"float32 products: {d['float32_products']}")
        console.print(f"bfloat16 unit: [bold]{d['bfloat16_unit']}[/] (this CPU offers {', '.join(d['units_offered'])})"
                      + (f"; passed over: {d['passed_over']}" if d["passed_over"] else ""))
        console.print(f"bfloat16 attention (Q·Kᵀ and P·V): [bold]{d['bfloat16_attention']}[/]")
        how = {"amx": " (x in three bfloat16 parts: exact products)",
               "vnni": " (x in int8 blocks of 32, AVX-512 VNNI dot products: bound in docs/engine.md)",
               "avx2": " (x in int8 blocks of 32, AVX2 dot products: bound in docs/engine.md)"}
        console.print(f"4-bit products (multilingual-e5-small): [bold]{d['4bit_unit']}[/]{how.get(d['4bit_unit'], '')}")
        console.print(f"int8 products (precision=\"int8\", float32 models): [bold]{d['int8_unit']}[/]"
                      f" (weights per column and block of {d['int8_block']}, x per row and block of {d['int8_block']}"
                      " with a zero point, int32 sums: "
                      "bound and cosine in "
                      "docs/engine.md; a default nowhere)")
        for k, v in d["precision"].items():
            console.print(f"  {k}: {v}")
