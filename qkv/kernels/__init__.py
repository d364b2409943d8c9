"""qkv's compiled kernels, one folder per precision, each C source beside its NumPy twin.

- ``qkv.kernels.cpu``: loads the one library (``_kernels.so``, or ``QKV_KERNELS_LIB``), reads
  what the CPU offers, chooses the unit bfloat16 and 4-bit products run on (``QKV_ISA``) and says
  which path runs (``cpu.STATUS``, shown by ``qkv info``);
- ``qkv.kernels.float32``: the float32 products, fused attention and element-wise steps;
- ``qkv.kernels.bfloat16``: products and attention in bfloat16 on AMX tiles or AVX-512 BF16;
- ``qkv.kernels.q4``: products on 4-bit (Q4_0) blocks, on the float32 kernel or AMX tiles;
- ``qkv.kernels.int8``: ``precision="int8"`` for float32 models, integer dot products (VNNI, AVX2);
- ``qkv.kernels.build``: compiles every ``*.c`` here into the library (install time, or by hand);
- ``qkv.kernels.blas``: BLAS thread limits for what the kernels leave to BLAS.

Inside the package, imports run one way: cpu < float32 < bfloat16, q4, int8 (tests/test_layers.py).
Nothing is re-exported here: a caller names the precision it runs.
"""
